// Chat templates (models/text/chat_template.h): each family's real templates
// (tests/golden/chat_templates/*.jinja, with where each came from) formatted exactly as Hugging
// Face's apply_chat_template renders them (chat_prompts.json, made by
// tests/golden/make_chat_template_goldens.py); the default system message read from Jinja sources
// written here in the styles real models use; what refuses the rest (no template, another family,
// a template too large, a system message a family has no place for); then SmolLM2-135M-Instruct's
// own template through CausalLM::chat_prompt against the prompts and ids of Hugging Face
// (tests/golden/smollm2/chat_prompts.json, made by tests/golden/make_smollm2_chat_goldens.py),
// copies of its file whose template is another family's or absent, and each family's markers
// checked against a vocabulary.
#include "models/text/chat_template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "core/scratch_files.h"
#include "models/model_files.h"
#include "models/smollm2_copy.h"
#include "models/tiny_llama_gguf.h"
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

// ---- The real templates of each family, against Hugging Face ----

std::string read_template(const std::string& file) {
  std::ifstream in(test::golden_dir("chat_templates") + "/" + file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

ChatTemplate::Family family_named(const std::string& name) {
  using F = ChatTemplate::Family;
  for (const F f : {F::chatml, F::llama3, F::gemma, F::llama2, F::mistral, F::phi3})
    if (name == (f == F::chatml    ? "chatml"
                 : f == F::llama3  ? "llama3"
                 : f == F::gemma   ? "gemma"
                 : f == F::llama2  ? "llama2"
                 : f == F::mistral ? "mistral"
                                   : "phi3"))
      return f;
  return F::other;
}

std::string error_of(const ChatTemplate& t, std::string_view user, std::string_view system) {
  try {
    t.format(user, system);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::runtime);
    return e.what();
  }
  return "(no error)";
}

TEST(ChatTemplateGoldens, EachFamilysRealTemplatesMatchHuggingFace) {
  const nlohmann::json golden = test::read_golden_json("chat_prompts.json", "chat_templates");
  ASSERT_EQ(golden.at("templates").size(), 15u);
  int compared = 0, refused = 0;
  for (const nlohmann::json& g : golden.at("templates")) {
    const std::string file = g.at("file");
    const std::string jinja = read_template(file);
    ASSERT_FALSE(jinja.empty()) << file;
    const ChatTemplate t = ChatTemplate::parse(jinja);
    EXPECT_EQ(t.family(), family_named(g.at("family"))) << file;
    // format() leaves out the BOS text the template writes first (chat_template.h says why).
    const std::string bos = g.at("bos_token").is_null() ? "" : g.at("bos_token").get<std::string>();
    for (const nlohmann::json& c : g.at("cases")) {
      const std::string system = c.at("system"), user = c.at("user");
      const std::string date = c.value("date_string", "");
      if (c.contains("error") || c.contains("system_dropped")) {
        EXPECT_THAT(error_of(t, user, system), HasSubstr("takes no system message")) << file;
        EXPECT_FALSE(t.takes_system()) << file;
        ++refused;
        continue;
      }
      const std::string text = c.at("text");
      EXPECT_EQ(t.writes_bos(), !bos.empty() && text.starts_with(bos)) << file;
      const std::string prompt = t.format(user, system, date);
      EXPECT_EQ((t.writes_bos() ? bos : "") + prompt, text) << file << ", user: " << user;
      if (!bos.empty()) EXPECT_FALSE(prompt.starts_with(bos)) << file;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 78);
  // Gemma 2's, Mistral's 2023 and Phi-3-mini's April 2024 templates, each with 4 system messages
  EXPECT_EQ(refused, 12);
}

// The framing is read from each template, not assumed of its family: a template changed in one
// place renders the change, and the golden comparison above would fail on it.
TEST(ChatTemplateGoldens, WhatIsReadFromTheTemplateFollowsIt) {
  const auto replaced = [](std::string s, const std::string& from, const std::string& to) {
    const std::size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? s : s.replace(at, from.size(), to);
  };
  const std::string qwen = read_template("qwen2.5-7b-instruct.jinja");
  EXPECT_EQ(ChatTemplate::parse(replaced(qwen,
                                         "You are Qwen, created by Alibaba Cloud. You are a "
                                         "helpful assistant.<|im_end|>",
                                         "You are Bob.<|im_end|>"))
                .format("hi"),
            "<|im_start|>system\nYou are Bob.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
            "<|im_start|>assistant\n");
  const std::string llama31 = read_template("llama-3.1-8b-instruct.jinja");
  const std::string cut =
      ChatTemplate::parse(replaced(llama31, "December 2023", "March 2025")).format("hi");
  EXPECT_THAT(cut, HasSubstr("Cutting Knowledge Date: March 2025\nToday Date: 26 Jul 2024\n\n"));
  EXPECT_THAT(ChatTemplate::parse(replaced(llama31, "26 Jul 2024", "01 Jan 2030")).format("hi"),
              HasSubstr("Today Date: 01 Jan 2030\n\n<|eot_id|>"));
  EXPECT_THAT(ChatTemplate::parse(llama31).format("hi", "", "05 May 2025"),
              HasSubstr("Today Date: 05 May 2025\n\n<|eot_id|>"));
  // Mistral's spaces around [INST] are the template's: v0.3's "[INST] " made Nemo's "[INST]".
  const std::string v3 = read_template("mistral-large-instruct-2407.jinja");
  EXPECT_EQ(ChatTemplate::parse(v3).format("hi"), "[INST] hi[/INST]");
  std::string tekken = v3;
  for (std::size_t at; (at = tekken.find("\"[INST] \"")) != std::string::npos;)
    tekken.replace(at, 9, "\"[INST]\"");
  EXPECT_EQ(ChatTemplate::parse(tekken).format("hi"), "[INST]hi[/INST]");
}

// Llama 3.2's template writes today's date (strftime_now("%d %b %Y"), local time) unless given one.
TEST(ChatTemplateGoldens, Llama32WritesTodaysDate) {
  const ChatTemplate t = ChatTemplate::parse(read_template("llama-3.2-3b-instruct.jinja"));
  std::string day;
  for (int tries = 0; tries < 2; ++tries) {  // a midnight between the two reads: read again
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char out[32];
    day.assign(out, std::strftime(out, sizeof out, "%d %b %Y", &local));
    if (t.format("hi").find("Today Date: " + day + "\n\n") != std::string::npos) break;
  }
  EXPECT_THAT(
      t.format("hi"),
      HasSubstr("Cutting Knowledge Date: December 2023\nToday Date: " + day + "\n\n<|eot_id|>"));
  EXPECT_THAT(t.format("hi", "", "26 Jul 2024"), HasSubstr("Today Date: 26 Jul 2024\n\n"));
}

TEST(ChatTemplateTest, PythonStripRemovesWhatStrIsspaceCallsWhitespace) {
  EXPECT_EQ(python_strip(" \t\n\v\f\r\x1c\x1d\x1e\x1f a b \n"), "a b");
  // U+0085, U+00A0, U+1680, U+2000…U+200A, U+2028, U+2029, U+202F, U+205F, U+3000
  EXPECT_EQ(python_strip("\u0085\u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000x"
                         "\u3000\u00a0\u0085"),
            "x");
  // Not whitespace to Python: U+200B, U+FEFF, U+180E; nor "Å" (0xc3 0x85), whose second byte is
  // U+0085's value; nor a lone byte 0xa0 or 0x85, which is no UTF-8.
  for (const char* kept :
       {"\u200bx\u200b", "\ufeffx", "x\u180e", "\u00c5", "x\xa0", "\x85x", "\xe3\x80", "😀"})
    EXPECT_EQ(python_strip(kept), kept) << kept;
  EXPECT_EQ(python_strip(" 😀 "), "😀");
  EXPECT_EQ(python_strip(""), "");
  EXPECT_EQ(python_strip("\u3000 \n"), "");
}

TEST(ChatTemplateTest, OtherFamiliesAndNoTemplateAreRefused) {
  const std::string not_known =
      "its chat template is not one of: ChatML (<|im_start|>), Llama 3 (<|start_header_id|>), "
      "Gemma (<start_of_turn>), Mistral ([INST]), Llama 2 ([INST] <<SYS>>), Phi-3 (<|user|> … "
      "<|end|>); qkv writes only those families";
  for (const char* jinja :
       {// Zephyr's (TinyLlama-1.1B-Chat): <|user|> without Phi-3's <|end|>
        "{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + "
        "message['content'] + eos_token }}{% endif %}{% endfor %}",
        // Phi-4's ChatML with <|im_sep|>
        "{{'<|im_start|>' + message['role'] + '<|im_sep|>' + message['content'] + "
        "'<|im_end|>'}}",
        // Mistral's v7, with [SYSTEM_PROMPT]
        "{{ '[SYSTEM_PROMPT] ' + s + '[/SYSTEM_PROMPT]' }}{{ '[INST] ' + u + '[/INST]' }}",
        // One ChatML marker without the other
        "{{ '<|im_start|>' + m }}"}) {
    const ChatTemplate t = ChatTemplate::parse(jinja);
    EXPECT_EQ(t.family(), ChatTemplate::Family::other) << jinja;
    EXPECT_EQ(format_error(t), not_known);
  }
  const ChatTemplate none = ChatTemplate::parse("");
  EXPECT_EQ(none.family(), ChatTemplate::Family::none);
  EXPECT_EQ(format_error(none),
            "it has no chat template (tokenizer.chat_template); expected one of the families qkv "
            "writes (ChatML, Llama 3, Gemma, Mistral, Llama 2, Phi-3)");
}

// A template past 1 MiB (real ones are under 20 KB) is not read: --chat is refused with its size,
// and the model runs without it.
TEST(ChatTemplateTest, ATemplateTooLargeIsRefusedWithItsSize) {
  std::string big = kSmolTemplate;
  big += std::string(10 * 1024 * 1024 - big.size(), ' ');
  const ChatTemplate t = ChatTemplate::parse(big);
  EXPECT_EQ(t.family(), ChatTemplate::Family::none);
  EXPECT_EQ(format_error(t),
            "its chat template (tokenizer.chat_template) is 10485760 bytes; expected at most "
            "1048576 (real ones are under 20 KB)");
  // At the limit it is read.
  big.resize(ChatTemplate::kMaxTemplateBytes);
  EXPECT_EQ(ChatTemplate::parse(big).family(), ChatTemplate::Family::chatml);
}

TEST(ChatTemplateTest, EachFamilyFramesOneTurnAsItsTemplateDoes) {
  // Short templates in each family's style (the real ones are compared above).
  EXPECT_EQ(ChatTemplate::parse("{{ bos_token }}{{ '<start_of_turn>user\\n' }}{{ "
                                "'<end_of_turn>\\n' }}{{ first_user_prefix }}")
                .format(" hi ", "sys "),
            "<start_of_turn>user\nsys \n\nhi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(ChatTemplate::parse("{{ bos_token + '[INST] ' + '<<SYS>>\\n' + ' [/INST]' }}")
                .format(" hi \n", " sys"),
            "[INST] <<SYS>>\n sys\n<</SYS>>\n\n hi [/INST]");
  const ChatTemplate phi = ChatTemplate::parse(
      "{{'<|system|>\\n'}}{{'<|user|>\\n'}}{{'<|end|>\\n'}}"
      "{{ '<|assistant|>\\n' }}");
  EXPECT_EQ(phi.format(" hi ", "sys"),
            "<|system|>\nsys<|end|>\n<|user|>\n hi <|end|>\n<|assistant|>\n");
  EXPECT_FALSE(phi.writes_bos());
  EXPECT_EQ(
      error_of(ChatTemplate::parse("{{ '<start_of_turn>' }}{{ '<end_of_turn>' }}"), "hi", "sys"),
      "its chat template (Gemma) takes no system message (Hugging Face's raises an error on "
      "one); expected the user's message alone");
  EXPECT_EQ(
      error_of(ChatTemplate::parse("{{ '<|user|>' + '<|end|>' + '<|assistant|>' }}"), "hi", "sys"),
      "its chat template (Phi-3) takes no system message (Hugging Face's drops it unsaid); "
      "expected the user's message alone");
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
                  std::string(": its chat template is not one of: ChatML (<|im_start|>)")},
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

// ---- Each family's markers against a vocabulary ----

// The tiny Llama GGUF (tests/models/tiny_llama_gguf.h) with another family's template: its
// vocabulary has ChatML's markers only, so --chat is refused naming the family's; given the
// markers as control tokens, the prompt is accepted.
TEST(ChatTemplateMarkers, EachFamilysMarkersMustBeControlTokens) {
  const test::ScratchDir dir("qkv-chat-markers");
  struct Case {
    const char* file;
    std::vector<std::string> markers;
    const char* expected;
  };
  for (const Case& c : std::vector<Case>{
           {"llama-3.1-8b-instruct.jinja",
            {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
            "Llama 3's markers <|start_header_id|>, <|end_header_id|> and <|eot_id|>"},
           {"gemma-3-it.jinja",
            {"<start_of_turn>", "<end_of_turn>"},
            "Gemma's markers <start_of_turn> and <end_of_turn>"},
           {"phi-3.5-mini-instruct.jinja",
            {"<|system|>", "<|user|>", "<|end|>", "<|assistant|>"},
            "Phi-3's markers <|system|>, <|user|>, <|end|> and <|assistant|>"}}) {
    test::TinyLlamaGguf g = test::tiny_llama_gguf().set("tokenizer.chat_template",
                                                        test::gguf_str(read_template(c.file)));
    try {
      CausalLM::open(g.write(dir.path("tiny.gguf"))).chat_prompt("hello");
      ADD_FAILURE() << c.file << ": accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(),
                  HasSubstr(std::string("tiny.gguf: its chat template uses ") + c.markers[0] +
                            " but its vocabulary has no such token; "
                            "expected " +
                            c.expected + " as control tokens of its vocabulary"));
    }
    // The markers as control tokens in place of letters: accepted, and each one id.
    std::vector<std::string> tokens = test::tiny_llama_tokens();
    std::vector<int32_t> types(tokens.size(), 1);
    types[0] = types[1] = types[2] = 3;
    for (std::size_t i = 0; i < c.markers.size(); ++i) {
      tokens[24 + i] = c.markers[i];  // 'v', 'w', 'x', 'y': in no merge, nor in "hello"
      types[24 + i] = 3;
    }
    const CausalLM m = CausalLM::open(g.set("tokenizer.ggml.tokens", test::gguf_strings(tokens))
                                          .set("tokenizer.ggml.token_type", test::gguf_i32s(types))
                                          .write(dir.path("marked.gguf")));
    const std::string prompt = m.chat_prompt("hello");
    // The letters the markers replaced, and the template's capitals and digits, are dropped.
    const std::vector<int32_t> ids = m.tokenize(prompt, {.drop_unspelled = true});
    for (std::size_t i = 0; i < c.markers.size(); ++i) {
      std::ptrdiff_t written = 0;
      for (std::size_t at = 0; (at = prompt.find(c.markers[i], at)) != std::string::npos; ++at)
        ++written;
      EXPECT_EQ(std::count(ids.begin(), ids.end(), static_cast<int32_t>(24 + i)), written)
          << c.file << ": " << c.markers[i];
    }
    EXPECT_GE(ids.front(), 24) << c.file;  // a marker first: no BOS text before it
  }
}

// A file whose template is 10 MB opens and runs; only its chat prompt is refused, with the size.
TEST(ChatTemplateMarkers, ATenMegabyteTemplateRefusesChatOnly) {
  const test::ScratchDir dir("qkv-chat-large");
  const std::string big = kSmolTemplate + std::string(10'000'000 - kSmolTemplate.size(), ' ');
  const std::string path = test::tiny_llama_gguf()
                               .set("tokenizer.chat_template", test::gguf_str(big))
                               .write(dir.path("large.gguf"));
  const CausalLM m = CausalLM::load(path);
  EXPECT_EQ(m.tokenize("hello"), (std::vector<int32_t>{37}));
  EXPECT_EQ(m.generate({37}, {.max_tokens = 2, .stop_at_eos = false}).size(), 2u);
  try {
    m.chat_prompt("hello");
    ADD_FAILURE() << "chat_prompt was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::runtime);
    EXPECT_EQ(std::string(e.what()),
              path +
                  ": its chat template (tokenizer.chat_template) is 10000000 bytes; expected "
                  "at most 1048576 (real ones are under 20 KB)");
  }
}

}  // namespace
}  // namespace qkv
