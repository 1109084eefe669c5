// The GPU backend (backend.h): the device, its memory and the copies, and the kernels of flash.cu.
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "kernels/cuda/backend.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/gpu.h"

namespace qkv::cuda {
namespace {

cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

bool present(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    if (why)
      *why = std::string("no CUDA device: ") +
             (e != cudaSuccess ? cudaGetErrorString(e) : "the driver sees none");
    cudaGetLastError();  // clear the sticky error of a machine without a GPU
    return false;
  }
  if (why) {
    int device = 0;
    cudaGetDevice(&device);
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, device);
    char text[256];
    std::snprintf(text, sizeof text, "%s, sm_%d%d, %d SMs, %.1f GiB", prop.name, prop.major,
                  prop.minor, prop.multiProcessorCount,
                  static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
    *why = text;
  }
  return true;
}

void* allocate(std::size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc of " + std::to_string(bytes) + " bytes");
  return p;
}
void release(void* p) noexcept { cudaFree(p); }

void to_device(void* device, const void* host, std::size_t bytes, void* stream) {
  check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, as_stream(stream)),
        "cudaMemcpyAsync to the device");
}
void synchronize(void* stream) {
  check(cudaStreamSynchronize(as_stream(stream)), "the GPU's work");
}
void to_host(void* host, const void* device, std::size_t bytes, void* stream) {
  check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, as_stream(stream)),
        "cudaMemcpyAsync to the host");
  synchronize(stream);
}
void fill_zero(void* device, std::size_t bytes, void* stream) {
  check(cudaMemsetAsync(device, 0, bytes, as_stream(stream)), "cudaMemsetAsync");
}
bool is_device_memory(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

// rows.max = lse, rows.log_sum = 0 (−∞ for a row that sees no key, NaN for NaN).
__global__ void rows_from_logsumexp_kernel(const float* lse, int64_t n, float* max,
                                           float* log_sum) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float x = lse[i];
  max[i] = x;
  log_sum[i] = x == -__int_as_float(0x7f800000) ? x : (x != x ? x : 0.0f);
}

void rows_from_lse(const float* lse, int64_t n, SoftmaxRows rows, void* stream) {
  if (n == 0) return;
  const int64_t blocks = (n + 255) / 256;
  rows_from_logsumexp_kernel<<<static_cast<unsigned>(blocks), 256, 0, as_stream(stream)>>>(
      lse, n, rows.max, rows.log_sum);
  check(cudaGetLastError(), "the logsumexp's conversion to softmax rows");
}

}  // namespace

bool built_with_cuda() { return true; }

const Backend& gpu_backend() {
  static const Backend gpu{"cuda",
                           present,
                           allocate,
                           release,
                           to_device,
                           to_host,
                           fill_zero,
                           synchronize,
                           is_device_memory,
                           gpu::flash_forward,
                           gpu::flash_backward,
                           rows_from_lse};
  return gpu;
}

}  // namespace qkv::cuda
