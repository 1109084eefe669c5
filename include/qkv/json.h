// qkv/json.h — JSON in and out. In: the one way qkv parses JSON that comes from a file or from
// the user: safetensors headers, a BERT model's config.json, a trained model's metadata, inline
// matrices, the built-in examples. Every nlohmann::json::parse of such text goes through
// parse_json. Out: number_json and tensor_json, the one writer of numbers every JSON output of qkv
// uses (the command's --json, the report's data, Python's dicts), so that NaN and ±∞ are spelled
// one way everywhere.
//
// Why a bound on nesting: nlohmann's parser keeps its own stack, but what walks the value
// afterwards — dump() for a message, a reader's recursion — takes a stack frame a level. A
// safetensors header of 100,000 nested '[' (200 KB) overflowed the stack and killed the process,
// a Python interpreter included (issue 26). So the depth is measured on the text first, before
// anything is parsed, and text nested deeper than any file qkv reads is refused.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "qkv/tensor.h"

namespace qkv {

// Far above the deepest JSON qkv reads: a safetensors header and a config nest 3 levels, an
// inline matrix at most 3, the examples 5.
inline constexpr int kMaxJsonDepth = 64;

// Why parse_json refused a text. The message is a predicate for the caller to put after what it
// names (a file, "the header", an option): "nests arrays and objects more than 64 deep (at byte
// 64); expected at most 64 levels", or "is not valid JSON: " and nlohmann's own description of
// the syntax error or the number out of range.
class JsonError : public Error {
 public:
  enum class Reason { too_deep, syntax, out_of_range };
  JsonError(const std::string& message, Reason reason, std::size_t byte)
      : Error(message), reason_(reason), byte_(byte) {}
  Reason reason() const noexcept { return reason_; }
  // Where the parse stopped: the opening bracket one level too deep, or (nlohmann's convention)
  // one past the character a syntax error found; 0 for a number out of range.
  std::size_t byte() const noexcept { return byte_; }

 private:
  Reason reason_;
  std::size_t byte_;
};

// Throws JsonError when `text` nests arrays and objects more than `max_depth` deep. Brackets
// inside strings do not count; nothing else is checked (the parser does that).
void check_json_depth(std::string_view text, int max_depth = kMaxJsonDepth);

// nlohmann's description of a failure without its "[json.exception.parse_error.101] " tag, which
// means nothing to whoever reads the message.
inline std::string json_failure(const char* what) {
  const std::string_view w = what;
  const std::size_t tag_end = w.rfind("[json.exception.", 0) == 0 ? w.find("] ") : w.npos;
  return std::string(tag_end == w.npos ? w : w.substr(tag_end + 2));
}

// check_json_depth, then nlohmann's parse (with `callback`, as Json::parse takes it). Every failure
// is a JsonError.
template <class Json = nlohmann::json>
Json parse_json(std::string_view text, typename Json::parser_callback_t callback = nullptr,
                int max_depth = kMaxJsonDepth) {
  check_json_depth(text, max_depth);
  try {
    return Json::parse(text.begin(), text.end(), callback);
  } catch (const typename Json::parse_error& e) {
    throw JsonError("is not valid JSON: " + json_failure(e.what()), JsonError::Reason::syntax,
                    e.byte);
  } catch (const typename Json::exception& e) {  // out_of_range: a number such as 1e999
    throw JsonError("is not valid JSON: " + json_failure(e.what()), JsonError::Reason::out_of_range,
                    0);
  }
}

// ---- writing ----
// A number as JSON: finite values as JSON numbers; the three values JSON has no number for as the
// strings Python's json module and JavaScript print for them: "NaN", "Infinity", "-Infinity"
// (never null, which reads as "missing").
nlohmann::json number_json(double x);
// A tensor as nested arrays in C order, each element through number_json; undefined is null.
nlohmann::json tensor_json(const Tensor& t);
// A file name as JSON shows it. JSON holds only UTF-8, and a Linux file name is bytes: one that is
// not UTF-8 (qkv train --out $'\xff.st' --json) made the writer throw after the work was done.
// Its bytes that are not UTF-8 become U+FFFD (�) here; messages and the file keep them.
std::string path_json(const std::string& path);

}  // namespace qkv
