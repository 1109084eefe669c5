// The words the CUDA kernels are written in, so that one source compiles twice: by nvcc for the
// GPU, and by the host compiler for the tests that run the same kernels on a machine without one
// (tests/kernels/cuda/simt_emulator.h supplies threadIdx, __syncthreads, the warp shuffles, the
// launch and the device memory there). Kernels use CUDA's own names for what the emulator models
// (threadIdx, blockIdx, blockDim, gridDim, __syncthreads, __syncwarp, __shfl_xor_sync,
// __shfl_sync, __shared__) and the macros below for the rest.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_runtime.h>

#define QKV_DEVICE __device__ __forceinline__
#define QKV_HOST_DEVICE __host__ __device__ __forceinline__
#define QKV_KERNEL __global__
#define QKV_LAUNCH_BOUNDS(threads, blocks) __launch_bounds__(threads, blocks)
// Dynamic shared memory (beyond the 48 KB a block gets statically), 16-byte aligned.
#define QKV_DYNAMIC_SHARED(type, name)                               \
  extern __shared__ __align__(16) unsigned char qkv_dynamic_smem_[]; \
  type* name = reinterpret_cast<type*>(qkv_dynamic_smem_)
#define QKV_UNROLL _Pragma("unroll")
#define QKV_RESTRICT __restrict__
// The kernels' code lives in qkv::cuda::kernel::QKV_SIMT_NAMESPACE (an inline namespace: the
// source names no part of it), `gpu` here and `emulated` in the host compiler's build, so that a
// program linking both (the tests, which also link the library) never merges a kernel of one
// with its namesake of the other.
#define QKV_SIMT_NAMESPACE gpu

namespace qkv::simt {
// kernel<<<grid, block, shared bytes, stream>>>(args...), raising the kernel's dynamic shared
// memory limit first where it needs more than 48 KB.
template <class... Params, class... Args>
inline cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared,
                          void* stream, Args&&... args) {
  if (shared > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(shared));
    if (e != cudaSuccess) return e;
  }
  kernel<<<grid, block, shared, static_cast<cudaStream_t>(stream)>>>(static_cast<Params>(args)...);
  return cudaGetLastError();
}

// Stream-ordered scratch for a launcher (the backward's D rows, partials).
inline cudaError_t device_alloc(void** p, std::size_t bytes, void* stream) {
  return cudaMallocAsync(p, bytes, static_cast<cudaStream_t>(stream));
}
inline cudaError_t device_free(void* p, void* stream) {
  return cudaFreeAsync(p, static_cast<cudaStream_t>(stream));
}
inline cudaError_t device_zero(void* p, std::size_t bytes, void* stream) {
  return cudaMemsetAsync(p, 0, bytes, static_cast<cudaStream_t>(stream));
}
inline const char* error_string(cudaError_t e) { return cudaGetErrorString(e); }
inline constexpr cudaError_t kSuccess = cudaSuccess;
}  // namespace qkv::simt

#else  // the host compiler: the tests' emulator
#include "kernels/cuda/simt_emulator.h"
#endif
