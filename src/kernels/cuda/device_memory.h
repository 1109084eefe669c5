// Device memory for the attention layer's Path::cuda: an owning buffer, copies both ways, and the
// question "is this pointer device memory?". Plain C++ (no CUDA headers); every failure is a
// qkv::Error (Kind::runtime) naming the CUDA call and the driver's words.
#pragma once

#include <cstddef>

namespace qkv::cuda {

// cudaMalloc'd bytes, freed by the destructor; move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

// Stream-ordered copies (stream: a cudaStream_t, null for the default stream); copy_to_host
// waits for the stream before it returns.
void copy_to_device(void* device, const void* host, std::size_t bytes, void* stream);
void copy_to_host(void* host, const void* device, std::size_t bytes, void* stream);
void fill_zero(void* device, std::size_t bytes, void* stream);
// Waits for the stream's work; a kernel's failure (an illegal address, say) surfaces here.
void synchronize(void* stream);
// True for memory the GPU can read as device memory (cudaMalloc'd or managed); false for host
// memory and for anything CUDA does not know.
bool is_device_memory(const void* p);

}  // namespace qkv::cuda
