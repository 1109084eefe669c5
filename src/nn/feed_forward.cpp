// The position-wise feed-forward network (Vaswani et al. 2017 §3.3): Linear → ReLU or GELU →
// dropout → Linear, and its backward.
#include <string>

#include "kernels/cpu/dense.h"
#include "kernels/reference/dense.h"
#include "nn/dense.h"
#include "qkv/nn.h"

namespace qkv::nn {

FeedForward::FeedForward(std::string name, int64_t dim, int64_t hidden, Activation activation,
                         double dropout, Rng& rng, DType dtype)
    : in(name + ".in", dim, hidden, true, rng, dtype),
      out(name + ".out", hidden, dim, true, rng, dtype),
      activation(activation),
      dropout_(dropout) {
  if (!(dropout >= 0.0 && dropout < 1.0))
    throw Error("FeedForward " + name + ": dropout is " + std::to_string(dropout) +
                " but must be in [0, 1)");
}

Tensor FeedForward::forward(const Tensor& x, bool training, Rng& rng) {
  pre_activation_ = in.forward(x);
  Tensor a = pre_activation_.clone();
  const int64_t n = a.numel();
  if (activation == Activation::gelu)
    gelu(a);  // nn/dense.h: the fast erf GELU for float32, the reference for float64
  else if (a.dtype() == DType::f32)
    cpu::relu(a.data<float>(), a.data<float>(), n);
  else
    reference::relu(a.data<double>(), a.data<double>(), n);
  return out.forward(dropout_.forward(a, training, rng));
}

// Forward was y = out(dropout(act(h))), h = in(x), so the gradient flows back through each in turn;
// act' is taken at the saved pre-activation h.
Tensor FeedForward::backward(const Tensor& dy) {
  if (!pre_activation_.defined()) throw Error("FeedForward::backward called before forward");
  Tensor g = dropout_.backward(out.backward(dy));  // a fresh tensor: overwritten in place below
  const Tensor& h = pre_activation_;
  const int64_t n = g.numel();
  if (activation == Activation::gelu) {
    if (g.dtype() == DType::f32)
      cpu::gelu_backward(g.data<float>(), g.data<float>(), h.data<float>(), n);
    else
      reference::gelu_backward(g.data<double>(), g.data<double>(), h.data<double>(), n);
  } else if (g.dtype() == DType::f32) {
    cpu::relu_backward(g.data<float>(), g.data<float>(), h.data<float>(), n);
  } else {
    reference::relu_backward(g.data<double>(), g.data<double>(), h.data<double>(), n);
  }
  return in.backward(g);
}

void FeedForward::collect(std::vector<Parameter*>& out) {
  in.collect(out);
  this->out.collect(out);
}

}  // namespace qkv::nn
