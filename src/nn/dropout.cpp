// Dropout: inverted dropout (Srivastava et al. 2014), the mask kept for the backward.
#include <cmath>
#include <string>

#include "core/dispatch.h"
#include "qkv/nn.h"

namespace qkv::nn {
namespace {

template <class T>
void fill_mask(T* mask, int64_t n, double p, Rng& rng) {
  const T keep = static_cast<T>(1.0 / (1.0 - p));
  for (int64_t i = 0; i < n; ++i) mask[i] = rng.uniform() < p ? T(0) : keep;
}

template <class T>
void multiply(T* y, const T* x, const T* mask, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * mask[i];
}

}  // namespace

// Training with p > 0 draws one uniform number per entry, in row-major order, from `rng`: the
// same seed gives the same mask. Otherwise (evaluation, or p = 0) nothing is drawn and x itself is
// returned, not a copy.
Tensor Dropout::forward(const Tensor& x, bool training, Rng& rng) {
  if (!(p_ >= 0.0 && p_ < 1.0))
    throw Error("Dropout: p is " + std::to_string(p_) + " but must be in [0, 1)");
  if (!training || p_ == 0.0) {
    mask_ = Tensor();
    return x;
  }
  if (x.dtype() != DType::f32 && x.dtype() != DType::f64)
    throw Error("Dropout: x must be a float32 or float64 tensor");
  const Tensor input = x.contiguous();
  mask_ = Tensor(x.shape(), x.dtype());
  Tensor y(x.shape(), x.dtype());
  dispatch_float(x.dtype(), [&]<class T>(T) {
    fill_mask(mask_.data<T>(), x.numel(), p_, rng);
    multiply(y.data<T>(), input.data<T>(), mask_.data<T>(), x.numel());
  });
  return y;
}

// Forward was y = x ⊙ mask, so dx = dy ⊙ mask (the identity when the forward was).
Tensor Dropout::backward(const Tensor& dy) {
  if (!mask_.defined()) return dy;
  if (dy.shape() != mask_.shape() || dy.dtype() != mask_.dtype())
    throw Error("Dropout::backward: dy has shape " + shape_str(dy.shape()) + " (" +
                std::string(dtype_name(dy.dtype())) + ") but the forward's output was " +
                shape_str(mask_.shape()) + " (" + std::string(dtype_name(mask_.dtype())) + ")");
  const Tensor g = dy.contiguous();
  Tensor dx(dy.shape(), dy.dtype());
  dispatch_float(dy.dtype(), [&]<class T>(T) {
    multiply(dx.data<T>(), g.data<T>(), mask_.data<T>(), dy.numel());
  });
  return dx;
}

}  // namespace qkv::nn
