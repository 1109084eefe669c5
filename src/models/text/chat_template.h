// models/text/chat_template.h — a model's chat template (GGUF tokenizer.chat_template, Jinja), as
// far as qkv needs it: which family it belongs to, and the default system message it inserts.
//
// qkv runs no Jinja. It knows one family, ChatML, where every message is framed as
//   <|im_start|>ROLE\nCONTENT<|im_end|>\n
// and add_generation_prompt appends "<|im_start|>assistant\n". A template belongs to it when it
// writes both markers. Many ChatML templates (SmolLM2's, Qwen2.5's) also insert a system message of
// their own when the conversation does not start with one, e.g. SmolLM2's
//   {% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a
//   helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}
// That default is read from the template's string literals: the first one holding
// "<|im_start|>system\n" followed by "<|im_end|>", its text between the two.
//
// format() then writes what Hugging Face's
//   tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
// writes for [system, user] or [user]: the system message given, else the template's default,
// else none.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qkv {

class ChatTemplate {
 public:
  enum class Family {
    none,    // the model has no template
    chatml,  // <|im_start|>role\ncontent<|im_end|>\n
    other,   // a template qkv cannot follow
  };

  // The template's Jinja source; "" means the model has none.
  static ChatTemplate parse(std::string_view jinja);

  Family family() const { return family_; }
  // The system message the template inserts when the conversation has none; nullopt if it
  // inserts none.
  const std::optional<std::string>& default_system() const { return default_system_; }

  // One user message, after `system` (empty: the template's default, if any), then the
  // generation prompt. A template that is not ChatML is a qkv::Error (Kind::runtime) saying so;
  // the caller adds which model it is.
  std::string format(std::string_view user, std::string_view system = {}) const;

 private:
  Family family_ = Family::none;
  std::optional<std::string> default_system_;
};

// The string literals inside the template's {{ … }} and {% … %} tags, in order, their escapes
// (\n, \t, \r, \\, \', \") decoded as Jinja does; text outside tags and {# comments #} is skipped.
// An unterminated literal or tag ends the scan (what was read so far is returned).
std::vector<std::string> jinja_string_literals(std::string_view jinja);

}  // namespace qkv
