// The GPU backend's kernel entry points (src/kernels/cuda/gpu.h, device.cu) compiled by the host
// compiler from the same .cuh sources, running on the SIMT emulator (emulated_kernels.cpp).
#pragma once

#include "kernels/cuda/flash_cuda.h"

namespace qkv_test::emulated {

void flash_forward(const qkv::cuda::Problem& p, qkv::cuda::Strided out, float* logsumexp,
                   qkv::cuda::SoftmaxRows rows);
void flash_backward(const qkv::cuda::Problem& p, qkv::cuda::Strided out,
                    qkv::cuda::SoftmaxRows rows, qkv::cuda::Strided dout, qkv::cuda::Strided dq,
                    qkv::cuda::Strided dk, qkv::cuda::Strided dv);
void rows_from_logsumexp(const float* lse, int64_t n, qkv::cuda::SoftmaxRows rows, void* stream);

}  // namespace qkv_test::emulated
