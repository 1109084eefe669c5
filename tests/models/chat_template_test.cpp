// Chat templates (models/text/chat_template.h): the family and the default system message read from
// Jinja sources written here in the styles real models use, and what refuses the rest; then
// SmolLM2-135M-Instruct's own template through CausalLM::chat_prompt against the prompts and ids of
// Hugging Face's apply_chat_template (tests/golden/smollm2/chat_prompts.json, made by
// tests/golden/make_smollm2_chat_goldens.py), and copies of its file whose template is another
// family's or absent.
#include "models/text/chat_template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "models/model_files.h"
#include "models/smollm2_copy.h"
#include "qkv/model.h"
#include "qkv/tensor.h"

namespace qkv {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kSmolDefault =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

// SmolLM2's template as its GGUF stores it: the newlines inside the literals are real ones.
const std::string kSmolTemplate =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

// The same with every newline inside a literal written as Jinja's escape, backslash and n, as a
// tokenizer_config.json read without decoding it would give.
std::string escaped(const std::string& jinja) {
  std::string out;
  for (const char c : jinja) out += c == '\n' ? std::string("\\n") : std::string(1, c);
  return out;
}

std::string format_error(const ChatTemplate& t) {
  try {
    t.format("hi");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::runtime);
    return e.what();
  }
  return "";
}

TEST(ChatTemplateTest, SmolLM2sTemplateInsertsItsDefaultSystemMessage) {
  const ChatTemplate t = ChatTemplate::parse(kSmolTemplate);
  EXPECT_EQ(t.family(), ChatTemplate::Family::chatml);
  ASSERT_TRUE(t.default_system().has_value());
  EXPECT_EQ(*t.default_system(), kSmolDefault);
  EXPECT_EQ(t.format("What is 2+2?"),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
  // A system message of the caller's replaces the default, as the template's
  // messages[0]['role'] != 'system' test does.
  EXPECT_EQ(t.format("hi", "Be brief."),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, EscapedNewlinesReadAsNewlines) {
  const std::string jinja = escaped(kSmolTemplate);
  ASSERT_EQ(jinja.find('\n'), std::string::npos);
  const ChatTemplate t = ChatTemplate::parse(jinja);
  ASSERT_TRUE(t.default_system().has_value());
  EXPECT_EQ(*t.default_system(), kSmolDefault);
  EXPECT_EQ(t.format("hi", "x"), ChatTemplate::parse(kSmolTemplate).format("hi", "x"));
  EXPECT_EQ(t.format("hi"), ChatTemplate::parse(kSmolTemplate).format("hi"));
}

TEST(ChatTemplateTest, ChatMLWithoutADefaultWritesNoSystemTurn) {
  const ChatTemplate t = ChatTemplate::parse(
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|im_start|>assistant\\n' }}{% endif %}");
  EXPECT_EQ(t.family(), ChatTemplate::Family::chatml);
  EXPECT_FALSE(t.default_system().has_value());
  EXPECT_EQ(t.format("hi"), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.format("hi", "sys"),
            "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

// A template in the style of Qwen2.5's: the system turn that frames the caller's own message
// (a literal that stops after "system\n") comes before the default, which is the one taken.
TEST(ChatTemplateTest, TheDefaultIsAWholeSystemTurnInOneLiteral) {
  const ChatTemplate t = ChatTemplate::parse(
      "{%- if messages[0]['role'] == 'system' %}\n"
      "    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
      "{%- else %}\n"
      "    {{- \"<|im_start|>system\\nYou are Bob, a \\\"careful\\\" assistant.<|im_end|>\\n\" }}\n"
      "{%- endif %}\n"
      "{#- it's a comment: '<|im_start|>system\\nnot this<|im_end|>' -#}\n"
      "{%- for message in messages if message.role != 'system' %}\n"
      "    {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
      "{%- endfor %}\n"
      "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}\n");
  EXPECT_EQ(t.family(), ChatTemplate::Family::chatml);
  ASSERT_TRUE(t.default_system().has_value());
  EXPECT_EQ(*t.default_system(), "You are Bob, a \"careful\" assistant.");
}

TEST(ChatTemplateTest, LiteralsAreReadInsideTagsOnly) {
  EXPECT_THAT(jinja_string_literals("don't {{ 'a' + \"b\\'c\" }} it's {% if x == 'y\\\\' %}"
                                    "{# 'comment' #}{{ '\\t' }}"),
              ElementsAre("a", "b'c", "y\\", "\t"));
  // A brace in a literal does not close the tag; an unknown escape stays as written.
  EXPECT_THAT(jinja_string_literals("{{ '}}' + '\\q' }}"), ElementsAre("}}", "\\q"));
  // Unterminated: what came before is kept.
  EXPECT_THAT(jinja_string_literals("{{ 'a' }}{{ 'b"), ElementsAre("a"));
  EXPECT_THAT(jinja_string_literals("{{ 'a' "), ElementsAre("a"));
  EXPECT_THAT(jinja_string_literals("{{"), ElementsAre());
}

TEST(ChatTemplateTest, OtherFamiliesAndNoTemplateAreRefused) {
  // Llama 2's [INST] and Gemma's <start_of_turn>, in their styles.
  for (const char* jinja :
       {"{% for message in messages %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + "
        "message['content'] + ' [/INST]' }}{% endif %}{% endfor %}",
        "{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\\n' + "
        "message['content'] + '<end_of_turn>\\n' }}{% endfor %}"}) {
    const ChatTemplate t = ChatTemplate::parse(jinja);
    EXPECT_EQ(t.family(), ChatTemplate::Family::other) << jinja;
    EXPECT_EQ(format_error(t),
              "its chat template is not ChatML (<|im_start|>role … <|im_end|>); qkv knows only "
              "that family");
  }
  // One marker without the other is not ChatML either.
  EXPECT_EQ(ChatTemplate::parse("{{ '<|im_start|>' + m }}").family(), ChatTemplate::Family::other);
  const ChatTemplate none = ChatTemplate::parse("");
  EXPECT_EQ(none.family(), ChatTemplate::Family::none);
  EXPECT_THAT(format_error(none), HasSubstr("it has no chat template (tokenizer.chat_template)"));
}

// ---- SmolLM2-135M-Instruct ----

const CausalLM& smollm2() {
  static const CausalLM model = CausalLM::load(test::smollm2_gguf());
  return model;
}

TEST(ChatTemplateSmolLM2, PromptsAndIdsMatchHuggingFace) {
  const nlohmann::json golden = test::read_golden_json("chat_prompts.json", "smollm2");
  // The golden was made from this file's template.
  EXPECT_EQ(golden.at("chat_template"),
            GgufFile::open(test::smollm2_gguf()).meta("tokenizer.chat_template"));
  const nlohmann::json& cases = golden.at("cases");
  ASSERT_EQ(cases.size(), 3u);
  int with_system = 0;
  for (const nlohmann::json& c : cases) {
    const nlohmann::json& messages = c.at("messages");
    ASSERT_EQ(messages.back().at("role"), "user");
    const std::string user = messages.back().at("content").get<std::string>();
    std::string system;
    if (messages.size() == 2) {
      ASSERT_EQ(messages[0].at("role"), "system");
      system = messages[0].at("content").get<std::string>();
      ++with_system;
    } else {
      ASSERT_EQ(messages.size(), 1u);
    }
    const std::string text = smollm2().chat_prompt(user, system);
    EXPECT_EQ(text, c.at("text").get<std::string>()) << "user: " << user;
    EXPECT_EQ(smollm2().tokenize(text), c.at("ids").get<std::vector<int32_t>>())
        << "user: " << user;
  }
  EXPECT_EQ(with_system, 1);
}

TEST(ChatTemplateSmolLM2, MarkersAreSingleIds) {
  EXPECT_THAT(smollm2().tokenize("<|im_start|>"), ElementsAre(1));
  EXPECT_THAT(smollm2().tokenize("<|im_end|>"), ElementsAre(2));
  EXPECT_EQ(smollm2().token_text(1), "<|im_start|>");
  EXPECT_EQ(smollm2().token_text(2), "<|im_end|>");
  // In a whole prompt: three turns, each one id 1 … one id 2 (the last left open).
  const std::vector<int32_t> ids = smollm2().tokenize(smollm2().chat_prompt("a <b> |c|"));
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 3);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 2);
  EXPECT_EQ(ids.front(), 1);
}

TEST(ChatTemplateSmolLM2, AnotherFamilyOrNoTemplateRefusesChatOnly) {
  for (const auto& [path, why] :
       {std::pair{test::smollm2_with_other_template(),
                  std::string(": its chat template is not ChatML (<|im_start|>role … <|im_end|>); "
                              "qkv knows only that family")},
        std::pair{test::smollm2_without_template(),
                  std::string(": it has no chat template (tokenizer.chat_template)")}}) {
    const CausalLM model = CausalLM::load(path);
    try {
      model.chat_prompt("hi");
      ADD_FAILURE() << path << ": chat_prompt was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::runtime);
      EXPECT_THAT(e.what(), HasSubstr(path + why));
    }
    // Plain text still tokenizes as the original file's.
    EXPECT_EQ(model.tokenize("The capital of France is"),
              smollm2().tokenize("The capital of France is"));
  }
}

}  // namespace
}  // namespace qkv
