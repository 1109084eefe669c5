// The GPU backend (backend.h): the device, its memory and the copies, and the kernels of flash.cu.
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "kernels/cuda/backend.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/gpu.h"
#include "kernels/cuda/softmax_rows.cuh"

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
                           kernel::rows_from_logsumexp};
  return gpu;
}

}  // namespace qkv::cuda
