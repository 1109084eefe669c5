// The GPU's attention kernels as the GPU backend (device.cu) calls them: flash.cu picks the
// float32 (FFMA) or the bf16/fp16 (tensor-core) kernels by the element type. For the .cu files.
#pragma once

#include "kernels/cuda/flash_cuda.h"

namespace qkv::cuda::gpu {

void flash_forward(const Problem& p, Strided out, float* logsumexp, SoftmaxRows rows);
void flash_backward(const Problem& p, Strided out, SoftmaxRows rows, Strided dout, Strided dq,
                    Strided dk, Strided dv);

}  // namespace qkv::cuda::gpu
