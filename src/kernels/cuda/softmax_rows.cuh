// The softmax rows of a forward that kept only its logsumexp (the device API's backward takes
// FlashAttention's own input), as one kernel: nvcc compiles it into device.cu's backend and the
// host compiler into the tests' emulated one. Included by one translation unit of each (its
// kernel is not a template: a second .cu would define it twice).
#pragma once

#include <cstdint>

#include "kernels/cuda/flash_common.cuh"

namespace qkv::cuda::kernel {
inline namespace QKV_SIMT_NAMESPACE {

// max = lse and log_sum = 0, so that max + log_sum = lse. A row that saw no key (lse = −∞) or a
// NaN keeps that value in both, as the forward's own rows would.
QKV_KERNEL void rows_from_logsumexp_kernel(const float* lse, int64_t n, float* max,
                                           float* log_sum) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float x = lse[i];
  max[i] = x;
  log_sum[i] = x >= -3.40282347e38f ? 0.0f : x;  // −FLT_MAX: false for −∞ and for NaN
}

inline void rows_from_logsumexp(const float* lse, int64_t n, SoftmaxRows rows, void* stream) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  check_launch(qkv::simt::launch(rows_from_logsumexp_kernel, dim3(blocks), dim3(kThreads), 0,
                                 stream, lse, n, rows.max, rows.log_sum),
               "the logsumexp's conversion to softmax rows");
}

}  // namespace QKV_SIMT_NAMESPACE
}  // namespace qkv::cuda::kernel
