#include "nn/finite.h"

#include <cmath>
#include <cstdio>

#include "kernels/cpu/vec_ops.h"

namespace qkv {
namespace {

// The index of the first non-finite element of contiguous data, or -1.
template <class T>
int64_t first_non_finite(const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return i;
  return -1;
}

// "[3, 17]": the multi-index of flat element `k` of a row-major `shape`.
std::string index_str(const Shape& shape, int64_t k) {
  Shape index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] > 0 ? k % shape[d] : 0;
    k = shape[d] > 0 ? k / shape[d] : 0;
  }
  return shape_str(index);
}

}  // namespace

void require_finite_tensor(const std::string& path, const std::string& name, const Tensor& t) {
  if (t.dtype() != DType::f32 && t.dtype() != DType::f64) return;
  const Tensor c = t.contiguous();
  int64_t bad = -1;
  double value = 0;
  if (c.dtype() == DType::f32) {
    // The vector pass answers "all finite?" for the common case; only a bad tensor is walked.
    if (cpu::all_finite_row(c.data<float>(), c.numel())) return;
    bad = first_non_finite(c.data<float>(), c.numel());
    if (bad >= 0) value = c.data<float>()[bad];
  } else {
    bad = first_non_finite(c.data<double>(), c.numel());
    if (bad >= 0) value = c.data<double>()[bad];
  }
  if (bad < 0) return;
  const char* what = std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf";
  throw Error(path + ": tensor \"" + name + "\" holds " + what + " at " +
                  index_str(t.shape(), bad) + " of " + shape_str(t.shape()) +
                  "; expected finite weights (the file is corrupt, or saved from a model whose "
                  "training diverged)",
              Error::Kind::runtime);
}

}  // namespace qkv
