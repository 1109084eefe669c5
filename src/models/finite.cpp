// A model's results checked finite (qkv/finite.h).
#include "qkv/finite.h"

#include <cmath>

namespace qkv {
namespace {

constexpr const char* kWhy =
    "; the model computes non-finite numbers (its weights overflow float32 or are corrupt), so "
    "there is no result to show";

std::string spelled(double x) { return std::isnan(x) ? "NaN" : x > 0 ? "+∞" : "−∞"; }

// The flat index of the first non-finite element, or -1.
int64_t first_non_finite(const Tensor& t) {
  if (!t.defined()) return -1;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.value(i))) return i;
  return -1;
}

}  // namespace

void require_finite(double x, const std::string& what) {
  if (!std::isfinite(x)) throw Error(what + " came out " + spelled(x) + kWhy, Error::Kind::runtime);
}

void require_finite(const Tensor& t, const std::string& what) {
  if (const int64_t bad = first_non_finite(t); bad >= 0) require_finite(t.value(bad), what);
}

void require_finite_rows(const Tensor& embeddings,
                         const std::function<std::string(int64_t)>& label) {
  if (const int64_t bad = first_non_finite(embeddings); bad >= 0)
    require_finite(embeddings.value(bad), "the embedding of " + label(bad / embeddings.dim(1)));
}

}  // namespace qkv
