// qkv/field_error.h — a usage error about the value of a named field (`steps`, `batch_size`,
// `d_model`, ...), so that each front end names the field as its users spell it: the command its
// flag (--steps), Python its argument (steps). The library never names a front end's option.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "qkv/tensor.h"

namespace qkv {

// The message is a template in which every field it names appears as {field}, or as
// {field=value} where it says a setting to use, e.g. "{d_model} 30 is not divisible by {heads} 4"
// or "expected {model=perceiver}". what() names each field by itself ("d_model 30 ...", "model
// perceiver"); message() by the caller's spelling (the command: "--d-model", "--model perceiver";
// Python: "d_model", "model='perceiver'").
class FieldError : public Error {
 public:
  // The spelling of a field, with the value of a {field=value} (empty for a bare {field}).
  using Namer = std::function<std::string(std::string_view field, std::string_view value)>;
  FieldError(std::string field, std::string text, Kind kind = Kind::invalid_argument)
      : Error(render(text,
                     [](std::string_view f, std::string_view v) {
                       return std::string(f) + (v.empty() ? "" : " ") + std::string(v);
                     }),
              kind),
        field_(std::move(field)),
        text_(std::move(text)) {}
  // The field whose value is wrong (the first the message names).
  const std::string& field() const noexcept { return field_; }
  // The message with every {field} replaced by name(field, ""), every {field=value} by
  // name(field, value).
  std::string message(const Namer& name) const { return render(text_, name); }

  // `text` as a part of a message that renders as itself: every '{' doubled.
  static std::string literal(std::string_view text) {
    std::string out;
    for (const char c : text) out += c == '{' ? "{{" : std::string(1, c);
    return out;
  }

  static std::string render(const std::string& text, const Namer& name) {
    std::string out;
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t open = text.find('{', at);
      if (open == std::string::npos) {
        out += text.substr(at);
        break;
      }
      if (open + 1 < text.size() && text[open + 1] == '{') {  // "{{": one '{', from literal()
        out += text.substr(at, open + 1 - at);
        at = open + 2;
        continue;
      }
      const std::size_t close = text.find('}', open);
      const std::string_view inside =
          close == std::string::npos ? std::string_view()
                                     : std::string_view(text).substr(open + 1, close - open - 1);
      const std::size_t equals = inside.find('=');
      if (!is_field(inside.substr(0, equals)) ||
          inside.find_first_of("{ ") != std::string_view::npos) {  // text, not a field: as is
        out += text.substr(at, open + 1 - at);
        at = open + 1;
        continue;
      }
      out += text.substr(at, open - at);
      out += equals == std::string_view::npos
                 ? name(inside, {})
                 : name(inside.substr(0, equals), inside.substr(equals + 1));
      at = close + 1;
    }
    return out;
  }

 private:
  // A field's name: lower-case letters, digits and '_', beginning with a letter.
  static bool is_field(std::string_view name) {
    if (name.empty() || name[0] < 'a' || name[0] > 'z') return false;
    for (const char c : name)
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    return true;
  }

  std::string field_, text_;
};

}  // namespace qkv
