// models/text/chat_template.h — a model's chat template (GGUF tokenizer.chat_template, Jinja), as
// far as qkv needs it: which family it belongs to, how that family frames one system message and
// one user message, and the defaults the template inserts.
//
// qkv runs no Jinja. It knows the families of the models people run from GGUF files, told apart
// by the markers each template writes (as llama.cpp's llm_chat_detect_template in
// src/llama-chat.cpp tells them, checked in the same order there: the first that fits wins):
//   ChatML   <|im_start|>ROLE\nCONTENT<|im_end|>\n ... <|im_start|>assistant\n
//            (SmolLM2, Qwen 2 / 2.5 / 3, OpenHermes). The default system message is read from the
//            template's literals: the first that holds a whole "<|im_start|>system\n…<|im_end|>"
//            turn (SmolLM2's, Qwen 2.5's "You are Qwen, created by Alibaba Cloud. …").
//   Llama 3  <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|> ...
//            <|start_header_id|>assistant<|end_header_id|>\n\n, contents trimmed. 3.1 and later
//            (the template writes "Cutting Knowledge Date: …") always open with a system turn:
//            that line, "Today Date: DATE\n\n", then the system message if any. DATE is the
//            caller's, else the template's: 3.2's strftime_now("%d %b %Y") (today, local time,
//            as transformers renders it), 3.1's and 3.3's fixed date_string ("26 Jul 2024").
//   Gemma    <start_of_turn>user\nCONTENT<end_of_turn>\n<start_of_turn>model\n, content trimmed.
//            No system role: Gemma 3's template (first_user_prefix) writes the system message and
//            "\n\n" before the first user message's text; Gemma 2's raises on one.
//   Llama 2  [INST] strip(<<SYS>>\nSYSTEM\n<</SYS>>\n\nUSER) [/INST]
//   Mistral  [INST] … [/INST], the spaces as the template's own literals have them: v0.1/v0.2
//            " [INST] " … " [/INST]", v0.3 "[INST] " … "[/INST]", Nemo "[INST]" … "[/INST]"; a
//            system message goes before the user's text and "\n\n" where the template takes one
//            (system_message), and is refused where it does not (the 2023 template raises).
//   Phi-3    <|system|>\nSYSTEM<|end|>\n<|user|>\nUSER<|end|>\n<|assistant|>\n; a template that
//            writes no <|system|> (Phi-3-mini's of April 2024) drops a system message unsaid in
//            Hugging Face, and qkv refuses it instead.
// A template of another family (Zephyr, Mistral's [SYSTEM_PROMPT], Phi-4's <|im_sep|>, ...) is
// parsed as Family::other, and format() says which families qkv writes.
//
// format() writes what Hugging Face's
//   tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
// writes for [system, user] or [user] — but without the BOS text that Llama 3, Gemma, Mistral,
// Llama 2 and Phi-3-mini templates write first ({{ bos_token }}); writes_bos() says whether the
// template writes it. Why: Hugging Face tokenizes that text with add_special_tokens=False, so the
// template's BOS is the only one; qkv's tokenizer adds BOS itself where the file says so
// (tokenizer.ggml.add_bos_token, true in the GGUF files of those families), and the text's
// "<|begin_of_text|>" would be a second. The prompt's ids then hold exactly one BOS.
//
// A template above kMaxTemplateBytes (real ones are under 20 KB) is parsed as Family::none with
// its size kept, and format() refuses it: the model still runs without a chat template.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qkv {

class ChatTemplate {
 public:
  enum class Family {
    none,     // the model has no template (or one too large to read)
    chatml,   // <|im_start|>role\ncontent<|im_end|>\n
    llama3,   // <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
    gemma,    // <start_of_turn>role\ncontent<end_of_turn>\n
    llama2,   // [INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST]
    mistral,  // [INST] user [/INST]
    phi3,     // <|user|>\ncontent<|end|>\n
    other,    // a template qkv cannot follow
  };
  static constexpr std::size_t kMaxTemplateBytes = std::size_t{1} << 20;

  // The template's Jinja source; "" means the model has none.
  static ChatTemplate parse(std::string_view jinja);

  Family family() const { return family_; }
  // The system message the template inserts when the conversation has none (ChatML only);
  // nullopt if it inserts none.
  const std::optional<std::string>& default_system() const { return default_system_; }
  // Whether the template writes bos_token before the first turn (format() leaves it out).
  bool writes_bos() const { return writes_bos_; }
  // Whether a system message has a place in the template's prompt.
  bool takes_system() const { return takes_system_; }
  // The special tokens the family's prompt is framed with: each must be one token of the model's
  // vocabulary, or the model reads no turns.
  std::vector<std::string> markers() const;

  // One user message, after `system` (empty: none, or the template's default), then the
  // generation prompt; `date` is Llama 3.1+'s date_string ("26 Jul 2024"; empty: the template's
  // own). No template, a too large one, another family's, or a system message the template has no
  // place for: a qkv::Error (Kind::runtime) saying so; the caller adds which model it is.
  std::string format(std::string_view user, std::string_view system = {},
                     std::string_view date = {}) const;

 private:
  std::string format_llama3(std::string_view user, std::string_view system,
                            std::string_view date) const;
  void refuse_unformattable(std::string_view system) const;

  Family family_ = Family::none;
  std::size_t bytes_ = 0;  // the template's size
  std::optional<std::string> default_system_;
  bool writes_bos_ = false;
  bool takes_system_ = true;
  // Llama 3.1+: "Cutting Knowledge Date: December 2023\n" (empty for Llama 3.0), the fixed
  // date_string, or today's date when the template asks strftime_now.
  std::string knowledge_line_, fixed_date_;
  bool date_is_today_ = false;
  // Mistral: the literals that open and close the user's instruction.
  std::string inst_open_, inst_close_;
};

// "ChatML", "Llama 3", ...: the name an error message gives a family.
const char* chat_family_name(ChatTemplate::Family family);

// The string literals inside the template's {{ … }} and {% … %} tags, in order, their escapes
// (\n, \t, \r, \\, \', \") decoded as Jinja does; text outside tags and {# comments #} is skipped.
// An unterminated literal or tag ends the scan (what was read so far is returned).
std::vector<std::string> jinja_string_literals(std::string_view jinja);

// The text without the whitespace Python's str.strip() removes at either end (what Jinja's trim
// filter does): every code point that str.isspace() calls whitespace, U+3000 and U+00A0 among
// them, but not U+200B. Bytes that are not UTF-8 count as text.
std::string_view python_strip(std::string_view text);

}  // namespace qkv
