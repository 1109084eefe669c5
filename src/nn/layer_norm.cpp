// LayerNorm (Ba et al. 2016) over the last dimension, and its backward.
#include <string>

#include "kernels/cpu/dense.h"
#include "kernels/reference/dense.h"
#include "qkv/nn.h"

namespace qkv::nn {

LayerNorm::LayerNorm(std::string name, int64_t dim, double eps, DType dtype)
    : weight{name + ".weight", Tensor::full({dim}, 1.0, dtype), Tensor::full({dim}, 0.0, dtype)},
      bias{name + ".bias", Tensor::full({dim}, 0.0, dtype), Tensor::full({dim}, 0.0, dtype)},
      eps(eps) {
  if (dim < 1)
    throw Error("LayerNorm " + name + ": dim is " + std::to_string(dim) + ", must be ≥ 1");
  if (!(eps >= 0.0)) throw Error("LayerNorm " + name + ": eps must be ≥ 0");
}

Tensor LayerNorm::forward(const Tensor& x) {
  const int64_t d = weight.value.dim(0);
  if (!x.defined() || x.dtype() != weight.value.dtype() || x.rank() < 1 || x.dim(-1) != d)
    throw Error("LayerNorm " + weight.name + ": x has shape " +
                (x.defined()
                     ? shape_str(x.shape()) + " (" + std::string(dtype_name(x.dtype())) + ")"
                     : std::string("(undefined)")) +
                " but expects [..., " + std::to_string(d) + "] of " +
                std::string(dtype_name(weight.value.dtype())));
  const Tensor input = x.contiguous();
  const int64_t n = x.numel() / d;
  Tensor y(x.shape(), x.dtype());
  xhat_ = Tensor(x.shape(), x.dtype());
  inv_std_ = Tensor({n}, x.dtype());
  if (x.dtype() == DType::f32)
    cpu::layer_norm_forward(y.data<float>(), xhat_.data<float>(), inv_std_.data<float>(),
                            input.data<float>(), weight.value.data<float>(),
                            bias.value.data<float>(), n, d, eps);
  else
    reference::layer_norm_forward(y.data<double>(), xhat_.data<double>(), inv_std_.data<double>(),
                                  input.data<double>(), weight.value.data<double>(),
                                  bias.value.data<double>(), n, d, eps);
  return y;
}

Tensor LayerNorm::backward(const Tensor& dy) {
  if (!xhat_.defined()) throw Error("LayerNorm::backward called before forward");
  if (dy.shape() != xhat_.shape() || dy.dtype() != xhat_.dtype())
    throw Error("LayerNorm " + weight.name + "::backward: dy has shape " + shape_str(dy.shape()) +
                " but the forward's output was " + shape_str(xhat_.shape()));
  const Tensor g = dy.contiguous();
  const int64_t d = weight.value.dim(0), n = dy.numel() / d;
  Tensor dx(dy.shape(), dy.dtype());
  if (dy.dtype() == DType::f32)
    cpu::layer_norm_backward(dx.data<float>(), weight.grad.data<float>(), bias.grad.data<float>(),
                             g.data<float>(), xhat_.data<float>(), inv_std_.data<float>(),
                             weight.value.data<float>(), n, d);
  else
    reference::layer_norm_backward(dx.data<double>(), weight.grad.data<double>(),
                                   bias.grad.data<double>(), g.data<double>(), xhat_.data<double>(),
                                   inv_std_.data<double>(), weight.value.data<double>(), n, d);
  return dx;
}

void LayerNorm::collect(std::vector<Parameter*>& out) {
  out.push_back(&weight);
  out.push_back(&bias);
}

}  // namespace qkv::nn
