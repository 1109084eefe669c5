// Linear: y = x·Wᵀ + b, and its backward.
#include <cmath>

#include "kernels/cpu/dense.h"
#include "kernels/reference/dense.h"
#include "nn/dense.h"
#include "qkv/nn.h"

namespace qkv::nn {

Linear::Linear(std::string name, int64_t in, int64_t out, bool bias, Rng& rng, DType dtype)
    : weight(make_parameter(name + ".weight", {out, in}, 1.0 / std::sqrt(static_cast<double>(in)),
                            rng, dtype)) {
  if (bias) this->bias = make_parameter(name + ".bias", {out}, 0.0, rng, dtype);
}

Tensor Linear::forward(const Tensor& x) {
  x_ = x.contiguous();
  return linear(x_, {weight.value, bias.value});
}

Tensor Linear::backward(const Tensor& dy) {
  if (!x_.defined()) throw Error("Linear::backward called before forward");
  const Tensor g = dy.contiguous();
  if (g.dtype() != x_.dtype() ||
      g.numel() / std::max<int64_t>(out(), 1) != x_.numel() / std::max<int64_t>(in(), 1))
    throw Error("Linear::backward: dy does not match the forward's output");
  const int64_t n = in() == 0 ? 0 : x_.numel() / in();
  Tensor dx(x_.shape(), x_.dtype());
  const bool has_bias = bias.value.defined();
  if (x_.dtype() == DType::f32)
    cpu::linear_backward(dx.data<float>(), weight.grad.data<float>(),
                         has_bias ? bias.grad.data<float>() : nullptr, g.data<float>(),
                         x_.data<float>(), weight.value.data<float>(), n, in(), out());
  else
    reference::linear_backward(dx.data<double>(), weight.grad.data<double>(),
                               has_bias ? bias.grad.data<double>() : nullptr, g.data<double>(),
                               x_.data<double>(), weight.value.data<double>(), n, in(), out());
  return dx;
}

void Linear::collect(std::vector<Parameter*>& out) {
  out.push_back(&weight);
  if (bias.value.defined()) out.push_back(&bias);
}

}  // namespace qkv::nn
