// The bf16 and fp16 kernels (tensor cores, tensor_core_forward.cuh and
// tensor_core_backward.cuh): what flash_forward and flash_backward call for Element::bf16 and
// Element::f16. Same contracts as flash_cuda.h.
#pragma once

#include "kernels/cuda/flash_cuda.h"

namespace qkv::cuda::detail {

void tensor_core_forward(const Problem& p, Strided out, float* logsumexp, SoftmaxRows rows);
void tensor_core_backward(const Problem& p, Strided out, SoftmaxRows rows, Strided dout, Strided dq,
                          Strided dk, Strided dv);

}  // namespace qkv::cuda::detail
