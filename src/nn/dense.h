// nn/dense.h — the dense layers of a transformer block, on tensors: Linear, LayerNorm, GELU.
// float32 tensors run the fast kernels (kernels/cpu/dense.h); float64 tensors run the float64
// reference (kernels/reference/dense.h), so a whole model can run either way.
#pragma once

#include <memory>

#include "kernels/cpu/bf16_linear.h"
#include "kernels/cpu/packed_linear.h"
#include "qkv/tensor.h"

namespace qkv::nn {

// y = x·Wᵀ + b, PyTorch's nn.Linear.
struct LinearWeights {
  Tensor weight;  // [out, in]
  Tensor bias;    // [out], or undefined for none
  // float32 weight and bias packed once for cpu::packed_linear (see pack), shared by copies; null:
  // linear runs OpenBLAS SGEMM.
  std::shared_ptr<const cpu::PackedLinear> packed;
  // Precision::bf16: the float32 weight rounded and packed as bf16 panels (round_to_bf16 makes
  // them); linear then runs cpu::bf16_linear, which rounds x's rows itself.
  std::shared_ptr<const cpu::Bf16Linear> bf16;
  int64_t in() const { return weight.dim(1); }
  int64_t out() const { return weight.dim(0); }
};

// y = (x − mean) / √(var + eps) · weight + bias over the last dimension, PyTorch's nn.LayerNorm.
struct NormWeights {
  Tensor weight;  // [D]
  Tensor bias;    // [D]
  double eps = 1e-5;
};

// x: [..., in] → [..., out]; x of any strides, the result contiguous, of x's dtype (the layer's
// tensors must have it too).
Tensor linear(const Tensor& x, const LinearWeights& layer);
// y = GELU(x·Wᵀ + b), the FFN's first layer: with packed weights the GELU runs on each block of
// outputs as the product leaves it (the same bits as linear, then gelu).
Tensor linear_gelu(const Tensor& x, const LinearWeights& layer);
// The bytes the layer holds: its weight and bias, and their packed copy when there is one.
int64_t resident_bytes(const LinearWeights& layer);
// The same for a float32 [out, in] layer without bias once pack() has run, from its sizes alone.
int64_t packed_resident_bytes(int64_t out, int64_t in);
// Packs a float32 layer's weights for the SIMD target running now (a float64 layer is left as it
// is). Packed weights that a later target cannot use (tests switch targets) are ignored.
void pack(LinearWeights& layer);
// x ← LayerNorm(x + residual) in place; x contiguous [..., D]; residual of x's shape or undefined.
void layer_norm(Tensor& x, const NormWeights& norm, const Tensor& residual = {});
// x ← GELU(x) = x·Φ(x) in place; x contiguous.
void gelu(Tensor& x);

// [B, H, L, D] → [B, L, H·D]: the heads side by side again, as W_O expects them (contiguous; rows
// of D are copied whole — Tensor::contiguous's element-wise gather is several times slower).
Tensor merge_heads(const Tensor& heads_first);

// Precision::bf16's dense layer (qkv/attention_types.h): its input rows and weights rounded to
// bfloat16 (kernels/cpu/bf16.h's round_bf16; a float64 value through float32), products
// accumulated in float32. x: a contiguous copy, rounded, of x's dtype. The layer: its weight
// rounded, its bias kept; a float32 layer also gets its bf16 panels (LinearWeights::bf16), so
// that linear multiplies on bf16 tiles (kernels/cpu/bf16_linear.h) and needs no rounded x — its
// float32 panels are dropped, as nothing multiplies by them then.
Tensor round_to_bf16(const Tensor& x);
LinearWeights round_to_bf16(const LinearWeights& layer);

// The same layer with its tensors converted to `dtype` (float64 for the reference run).
LinearWeights to(const LinearWeights& layer, DType dtype);
NormWeights to(const NormWeights& norm, DType dtype);

}  // namespace qkv::nn
