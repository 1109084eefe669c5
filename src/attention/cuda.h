// Path::cuda in the attention layer: device tensors checked and handed to kernels/cuda, and host
// tensors that asked for the GPU copied there and back.
#pragma once

#include "attention/validate.h"

namespace qkv::attention_detail {

// Host tensors on the GPU: q, k, v (and dout) copied as float32, or bf16 with
// Precision::bf16; results copied back as float32. Needs a GPU (else qkv::Error, Kind::runtime).
AttentionResult cuda_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                               const AttentionOptions& options, const Dims& dims);
AttentionGrads cuda_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                       const Tensor& v, const AttentionOptions& options,
                                       const Dims& dims);

}  // namespace qkv::attention_detail
