#include "nn/dense.h"

#include <algorithm>
#include <string>

#include "core/dispatch.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/dense.h"
#include "kernels/reference/dense.h"
#include "qkv/memory.h"

namespace qkv::nn {
namespace {

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void require(bool ok, const std::string& what) {
  if (!ok) throw Error(what);
}

void check_floating(const Tensor& x, const char* name) {
  require(x.defined() && (x.dtype() == DType::f32 || x.dtype() == DType::f64),
          std::string(name) + " must be a float32 or float64 tensor");
}

template <class T>
Tensor merge_heads_as(const Tensor& heads_first) {
  const Tensor o = heads_first.contiguous();
  const int64_t batch = o.dim(0), heads = o.dim(1), length = o.dim(2), d = o.dim(3);
  Tensor out({batch, length, heads * d}, o.dtype());
  const T* src = o.data<T>();
  T* dst = out.data<T>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t l = 0; l < length; ++l)
        std::copy_n(src + ((b * heads + h) * length + l) * d, d,
                    dst + ((b * length + l) * heads + h) * d);
  return out;
}

}  // namespace

Tensor merge_heads(const Tensor& heads_first) {
  check_floating(heads_first, "merge_heads: the input");
  require(heads_first.rank() == 4, "merge_heads: expected a [B, H, L, D] tensor");
  return dispatch_float(heads_first.dtype(),
                        [&]<class T>(T) { return merge_heads_as<T>(heads_first); });
}

namespace {

// y = act(x·Wᵀ + b): the packed kernel when the layer has packed weights for this target, else
// OpenBLAS (float32) or the reference (float64), then the activation as a pass of its own.
Tensor linear_as(const Tensor& x, const LinearWeights& layer, cpu::Activation act) {
  check_floating(x, "linear: x");
  require(layer.weight.defined() && layer.weight.rank() == 2 && layer.weight.dtype() == x.dtype(),
          "linear: the weight must be a [out, in] tensor of the input's dtype");
  require(x.rank() >= 1 && x.dim(-1) == layer.in(),
          "linear: x has shape " + shape_str(x.shape()) + " but the weight " +
              shape_str(layer.weight.shape()) + " expects a last dimension of " +
              std::to_string(layer.in()));
  const bool has_bias = layer.bias.defined();
  require(!has_bias || (layer.bias.rank() == 1 && layer.bias.dim(0) == layer.out() &&
                        layer.bias.dtype() == x.dtype()),
          "linear: the bias must be a [out] tensor of the input's dtype");
  const Tensor input = x.contiguous();
  Shape shape = x.shape();
  shape.back() = layer.out();
  Tensor y(shape, x.dtype());
  int64_t rows = 1;  // every dimension but the last
  for (int i = 0; i + 1 < x.rank(); ++i) rows *= x.dim(i);
  if (x.dtype() == DType::f32 && layer.bf16 != nullptr) {
    cpu::bf16_linear(y.data<float>(), layer.out(), input.data<float>(), layer.in(), rows,
                     *layer.bf16, act);
    return y;
  }
  if (x.dtype() == DType::f32 && layer.packed != nullptr &&
      layer.packed->width == cpu::packed_linear_width()) {
    cpu::packed_linear(y.data<float>(), layer.out(), input.data<float>(), layer.in(), rows,
                       *layer.packed, act);
    return y;
  }
  const Tensor w = layer.weight.contiguous();
  const Tensor b = has_bias ? layer.bias.contiguous() : Tensor();
  if (x.dtype() == DType::f32)
    cpu::linear(y.data<float>(), input.data<float>(), w.data<float>(),
                has_bias ? b.data<float>() : nullptr, rows, layer.in(), layer.out());
  else
    reference::linear(y.data<double>(), input.data<double>(), w.data<double>(),
                      has_bias ? b.data<double>() : nullptr, rows, layer.in(), layer.out());
  if (act == cpu::Activation::gelu) gelu(y);
  return y;
}

}  // namespace

Tensor linear(const Tensor& x, const LinearWeights& layer) {
  return linear_as(x, layer, cpu::Activation::none);
}

Tensor linear_gelu(const Tensor& x, const LinearWeights& layer) {
  return linear_as(x, layer, cpu::Activation::gelu);
}

int64_t resident_bytes(const LinearWeights& layer) {
  int64_t bytes = tensor_bytes(layer.weight) + tensor_bytes(layer.bias);
  if (layer.packed) {
    for (const auto* buffer : {layer.packed->data.get(), layer.packed->bias.get()})
      if (buffer != nullptr) bytes += static_cast<int64_t>(buffer->size() * sizeof(float));
  }
  if (layer.bf16) bytes += cpu::bf16_linear_bytes(layer.out(), layer.in());
  return bytes;
}

int64_t packed_resident_bytes(int64_t out, int64_t in) {
  return out * in * static_cast<int64_t>(sizeof(float)) + cpu::packed_linear_bytes(out, in);
}

void pack(LinearWeights& layer) {
  if (!layer.weight.defined() || layer.weight.dtype() != DType::f32) return;
  const Tensor w = layer.weight.contiguous();
  const Tensor b = layer.bias.defined() ? layer.bias.contiguous() : Tensor();
  layer.packed = std::make_shared<const cpu::PackedLinear>(cpu::pack_linear(
      w.data<float>(), b.defined() ? b.data<float>() : nullptr, layer.out(), layer.in()));
}

void layer_norm(Tensor& x, const NormWeights& norm, const Tensor& residual) {
  check_floating(x, "layer_norm: x");
  require(x.is_contiguous() && x.rank() >= 1, "layer_norm: x must be contiguous");
  const int64_t d = x.dim(-1);
  for (const Tensor* p : {&norm.weight, &norm.bias})
    require(p->defined() && p->rank() == 1 && p->dim(0) == d && p->dtype() == x.dtype(),
            "layer_norm: weight and bias must be [" + std::to_string(d) +
                "] tensors of the input's dtype");
  const bool has_residual = residual.defined();
  require(!has_residual || (residual.shape() == x.shape() && residual.dtype() == x.dtype()),
          "layer_norm: the residual must have the input's shape and dtype");
  const Tensor r = has_residual ? residual.contiguous() : Tensor();
  int64_t n = 1;
  for (int i = 0; i + 1 < x.rank(); ++i) n *= x.dim(i);
  if (x.dtype() == DType::f32) {
    float* data = x.data<float>();
    cpu::layer_norm(data, data, has_residual ? r.data<float>() : nullptr,
                    norm.weight.contiguous().data<float>(), norm.bias.contiguous().data<float>(), n,
                    d, norm.eps);
  } else {
    double* data = x.data<double>();
    if (has_residual)
      for (int64_t i = 0; i < x.numel(); ++i) data[i] += r.data<double>()[i];
    reference::layer_norm(data, data, norm.weight.contiguous().data<double>(),
                          norm.bias.contiguous().data<double>(), n, d, norm.eps);
  }
}

void gelu(Tensor& x) {
  check_floating(x, "gelu: x");
  require(x.is_contiguous(), "gelu: x must be contiguous");
  if (x.dtype() == DType::f32)
    cpu::gelu(x.data<float>(), x.numel());
  else
    reference::gelu(x.data<double>(), x.data<double>(), x.numel());
}

LinearWeights to(const LinearWeights& layer, DType dtype) {
  return {layer.weight.to(dtype), layer.bias.defined() ? layer.bias.to(dtype) : Tensor()};
}

NormWeights to(const NormWeights& norm, DType dtype) {
  return {norm.weight.to(dtype), norm.bias.to(dtype), norm.eps};
}

Tensor round_to_bf16(const Tensor& x) {
  Tensor r = x.clone();  // contiguous, its own storage
  dispatch_float(r.dtype(), [&]<class T>(T) {
    T* p = r.data<T>();
    for (int64_t i = 0; i < r.numel(); ++i)
      p[i] = static_cast<T>(cpu::round_bf16(static_cast<float>(p[i])));
  });
  return r;
}

LinearWeights round_to_bf16(const LinearWeights& layer) {
  LinearWeights rounded{round_to_bf16(layer.weight), layer.bias};
  if (rounded.weight.dtype() == DType::f32) {
    const Tensor w = rounded.weight.contiguous();
    const Tensor b = layer.bias.defined() ? layer.bias.contiguous() : Tensor();
    rounded.bf16 = std::make_shared<const cpu::Bf16Linear>(cpu::pack_linear_bf16(
        w.data<float>(), b.defined() ? b.data<float>() : nullptr, layer.out(), layer.in()));
  }
  return rounded;
}

}  // namespace qkv::nn
