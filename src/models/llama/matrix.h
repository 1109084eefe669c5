// models/llama/matrix.h — one weight matrix of the GGUF decoder, [out, in], as the model keeps it:
// float32 and packed (WeightFormat::float32, or a tensor the file stores as F32), or the file's own
// blocks (WeightFormat::file: Q4_1, Q4_K, … as stored, kernels/cpu/quant_linear.h multiplying on
// them), with its bias where it has one.
#pragma once

#include <cstdint>
#include <string>

#include "core/gguf.h"
#include "kernels/cpu/quant_linear.h"
#include "nn/dense.h"
#include "qkv/causal_lm.h"
#include "qkv/tensor.h"

namespace qkv {

struct LlamaMatrix {
  nn::LinearWeights dense;  // the float32 matrix (packed) and bias; its weight undefined for blocks
  cpu::QuantMatrix blocks;  // the blocks, where blocks.data is set
  Tensor bias;              // [out] or undefined (blocks; dense keeps its own)
  bool quantized() const { return blocks.data != nullptr; }
  int64_t out() const { return quantized() ? blocks.out : dense.out(); }
  int64_t in() const { return quantized() ? blocks.in : dense.in(); }
};

// The tensor `name` as float32, of `shape` (which read_llama_config checked), every value finite:
// a norm's gain, a bias, or a matrix to keep as float32. Errors name the file and the tensor.
Tensor read_llama_tensor(const GgufFile& file, const std::string& name, const Shape& shape);

// `name`.weight [out, in] (and `name`.bias [out] with `bias`), read as `format` says; the file's
// F32 tensors are kept as float32 either way. Packed for the float32 path unless `packed` is false
// (an embedding that is not also the output is only ever read a row at a time).
LlamaMatrix read_llama_matrix(const GgufFile& file, const std::string& name, int64_t out,
                              int64_t in, bool bias, WeightFormat format, bool packed = true);

// Rows of x at most this many run int8 when asked (decode, and the few rows of a short prompt);
// more run float32 on dequantized panels, whose dequantization is then shared by many rows.
inline constexpr int64_t kInt8Rows = 4;

// y = x·Wᵀ + b: x [..., in] float32 (any strides), y [..., out] contiguous. A matrix kept as
// blocks multiplies in `product` when x has at most kInt8Rows rows, else in float32 (the bits of
// the float32 path); a float32 matrix is nn::linear.
Tensor llama_matmul(const Tensor& x, const LlamaMatrix& m,
                    cpu::QuantProduct product = cpu::QuantProduct::float32);

// The bias [out], or undefined.
inline const Tensor& llama_bias(const LlamaMatrix& m) {
  return m.quantized() ? m.bias : m.dense.bias;
}

// The same for several matrices of x's width at once ({q, k, v}, {gate, up}): with int8 on
// blocks, one job for all (quant_linears); else one llama_matmul each.
std::vector<Tensor> llama_matmuls(const Tensor& x, const std::vector<const LlamaMatrix*>& ms,
                                  cpu::QuantProduct product = cpu::QuantProduct::float32);

// Row o of W as float32 (dequantized from its blocks): an embedding's row.
void llama_matrix_row(const LlamaMatrix& m, int64_t o, float* out);
// W as a float32 tensor [out, in]: the matrix itself, or its blocks dequantized now (the lens's
// circuits read a layer's W_Q, W_K, W_V, W_O whole).
Tensor llama_dense(const LlamaMatrix& m);

// The bytes such a matrix keeps, from its type and sizes alone: its blocks, or float32 and the
// packed copy (packed_resident_bytes), or float32 alone where not packed; and the bias.
int64_t llama_matrix_bytes(uint32_t file_type, int64_t out, int64_t in, bool bias,
                           WeightFormat format, bool packed = true);

}  // namespace qkv
