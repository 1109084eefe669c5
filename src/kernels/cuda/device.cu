// The device, its memory and the copies: the host side of Path::cuda (device_memory.h,
// flash_cuda.h's built_with_cuda and device_present).
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/flash_cuda.h"

namespace qkv::cuda {

bool built_with_cuda() { return true; }

bool device_present(std::string* why) {
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

DeviceBuffer::DeviceBuffer(std::size_t bytes) : size_(bytes) {
  if (bytes > 0)
    check(cudaMalloc(&data_, bytes), "cudaMalloc of " + std::to_string(bytes) + " bytes");
}
DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr, other.size_ = 0;
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = other.data_, size_ = other.size_;
    other.data_ = nullptr, other.size_ = 0;
  }
  return *this;
}

void copy_to_device(void* device, const void* host, std::size_t bytes, void* stream) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice,
                        static_cast<cudaStream_t>(stream)),
        "cudaMemcpyAsync to the device");
}
void copy_to_host(void* host, const void* device, std::size_t bytes, void* stream) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost,
                        static_cast<cudaStream_t>(stream)),
        "cudaMemcpyAsync to the host");
  synchronize(stream);
}
void fill_zero(void* device, std::size_t bytes, void* stream) {
  if (bytes == 0) return;
  check(cudaMemsetAsync(device, 0, bytes, static_cast<cudaStream_t>(stream)), "cudaMemsetAsync");
}
void synchronize(void* stream) {
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "the GPU's work");
}
bool is_device_memory(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

}  // namespace qkv::cuda
