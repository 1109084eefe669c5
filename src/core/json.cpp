#include "core/json.h"

#include <cmath>

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

}  // namespace qkv
