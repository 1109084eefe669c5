#include "qkv/json.h"

#include <cmath>

#include "qkv/files.h"

namespace qkv {
namespace {

// Dimension d of t from row-major position `pos` on, as nested arrays.
nlohmann::json nested_json(const Tensor& t, int d, int64_t& pos) {
  if (d == t.rank()) return number_json(t.value(pos++));
  nlohmann::json a = nlohmann::json::array();
  for (int64_t i = 0; i < t.dim(d); ++i) a.push_back(nested_json(t, d + 1, pos));
  return a;
}

}  // namespace

nlohmann::json number_json(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  return x;
}

nlohmann::json tensor_json(const Tensor& t) {
  if (!t.defined()) return nullptr;
  int64_t pos = 0;
  return nested_json(t, 0, pos);
}

void check_json_depth(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character, a quote included, cannot end the string
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        throw JsonError("nests arrays and objects more than " + std::to_string(max_depth) +
                            " deep (at byte " + std::to_string(i) + "); expected at most " +
                            std::to_string(max_depth) + " levels",
                        JsonError::Reason::too_deep, i);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

std::string path_json(const std::string& path) {
  std::string shown;
  std::string_view rest = path;
  for (std::size_t at; (at = invalid_utf8_at(rest)) != std::string_view::npos;) {
    shown.append(rest.substr(0, at)).append("\xEF\xBF\xBD");  // U+FFFD
    rest.remove_prefix(at + 1);
  }
  return shown.append(rest);
}

}  // namespace qkv
