// ChatTemplate (models/text/chat_template.h): a Jinja chat template's family and default system
// message, read from its string literals; ChatML prompts written as Hugging Face writes them.
#include "models/text/chat_template.h"

#include "qkv/tensor.h"

namespace qkv {
namespace {

constexpr std::string_view kStart = "<|im_start|>", kEnd = "<|im_end|>";
constexpr std::string_view kSystemOpen = "<|im_start|>system\n";

// A backslash escape of a Jinja string literal, as Python reads it; an unknown one stays as
// written (backslash and character), as Python keeps it.
std::string unescape(char c) {
  switch (c) {
    case 'n':
      return "\n";
    case 't':
      return "\t";
    case 'r':
      return "\r";
    case '\\':
      return "\\";
    case '\'':
      return "'";
    case '"':
      return "\"";
    default:
      return std::string{'\\', c};
  }
}

}  // namespace

std::vector<std::string> jinja_string_literals(std::string_view jinja) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (true) {
    const std::size_t open = jinja.find('{', i);
    if (open == std::string_view::npos || open + 1 >= jinja.size()) return out;
    const char kind = jinja[open + 1];
    if (kind == '#') {  // a comment: its quotes are prose, not literals
      const std::size_t end = jinja.find("#}", open + 2);
      if (end == std::string_view::npos) return out;
      i = end + 2;
      continue;
    }
    if (kind != '{' && kind != '%') {  // a brace in the template's plain text
      i = open + 1;
      continue;
    }
    // Inside a tag until "}}" or "%}" outside a literal.
    const char closing = kind == '{' ? '}' : '%';
    std::size_t j = open + 2;
    bool closed = false;
    while (j < jinja.size() && !closed) {
      const char c = jinja[j];
      if (c == '\'' || c == '"') {
        std::string literal;
        std::size_t k = j + 1;
        while (k < jinja.size() && jinja[k] != c) {
          if (jinja[k] == '\\' && k + 1 < jinja.size()) {
            literal += unescape(jinja[k + 1]);
            k += 2;
          } else {
            literal += jinja[k++];
          }
        }
        if (k >= jinja.size()) return out;  // unterminated
        out.push_back(std::move(literal));
        j = k + 1;
      } else if (c == closing && j + 1 < jinja.size() && jinja[j + 1] == '}') {
        closed = true;
        j += 2;
      } else {
        ++j;
      }
    }
    if (!closed) return out;
    i = j;
  }
}

ChatTemplate ChatTemplate::parse(std::string_view jinja) {
  ChatTemplate t;
  if (jinja.empty()) return t;
  // ChatML writes both markers; a template without them frames messages some other way
  // ([INST], <start_of_turn>, <|user|>, ...), which qkv does not imitate.
  const bool chatml =
      jinja.find(kStart) != std::string_view::npos && jinja.find(kEnd) != std::string_view::npos;
  t.family_ = chatml ? Family::chatml : Family::other;
  if (!chatml) return t;
  // The default system message is a whole system turn written as one literal; a literal that
  // opens the system turn and then stops (the template appends messages[0]['content']) frames the
  // caller's own system message instead.
  for (const std::string& literal : jinja_string_literals(jinja)) {
    const std::size_t open = literal.find(kSystemOpen);
    if (open == std::string::npos) continue;
    const std::size_t begin = open + kSystemOpen.size();
    const std::size_t end = literal.find(kEnd, begin);
    if (end == std::string::npos) continue;
    t.default_system_ = literal.substr(begin, end - begin);
    break;
  }
  return t;
}

std::string ChatTemplate::format(std::string_view user, std::string_view system) const {
  if (family_ == Family::none)
    throw Error(
        "it has no chat template (tokenizer.chat_template); expected a ChatML one "
        "(<|im_start|>role … <|im_end|>)",
        Error::Kind::runtime);
  if (family_ != Family::chatml)
    throw Error(
        "its chat template is not ChatML (<|im_start|>role … <|im_end|>); qkv knows only "
        "that family",
        Error::Kind::runtime);
  auto turn = [](std::string_view role, std::string_view content) {
    return std::string(kStart) + std::string(role) + "\n" + std::string(content) +
           std::string(kEnd) + "\n";
  };
  std::string prompt;
  if (!system.empty()) {
    prompt += turn("system", system);
  } else if (default_system_) {
    prompt += turn("system", *default_system_);
  }
  return prompt + turn("user", user) + std::string(kStart) + "assistant\n";
}

}  // namespace qkv
