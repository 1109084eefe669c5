// flash_cuda.h's and device_memory.h's functions, through the backend in force (backend.h).
#include <atomic>

#include "kernels/cuda/backend.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/flash_cuda.h"

namespace qkv::cuda {
namespace {
std::atomic<const Backend*> stand_in{nullptr};
}  // namespace

const Backend& backend() {
  const Backend* b = stand_in.load(std::memory_order_acquire);
  return b != nullptr ? *b : gpu_backend();
}
void set_backend(const Backend* b) { stand_in.store(b, std::memory_order_release); }

void flash_forward(const Problem& p, Strided out, float* logsumexp, SoftmaxRows rows) {
  backend().forward(p, out, logsumexp, rows);
}
void flash_backward(const Problem& p, Strided out, SoftmaxRows rows, Strided dout, Strided dq,
                    Strided dk, Strided dv) {
  backend().backward(p, out, rows, dout, dq, dk, dv);
}
void rows_from_logsumexp(const float* lse, int64_t n, SoftmaxRows rows, void* stream) {
  backend().rows_from_logsumexp(lse, n, rows, stream);
}
bool device_present(std::string* why) { return backend().device_present(why); }

DeviceBuffer::DeviceBuffer(std::size_t bytes) : size_(bytes) {
  if (bytes > 0) data_ = backend().allocate(bytes);
}
DeviceBuffer::~DeviceBuffer() {
  if (data_) backend().release(data_);
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr, other.size_ = 0;
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) backend().release(data_);
    data_ = other.data_, size_ = other.size_;
    other.data_ = nullptr, other.size_ = 0;
  }
  return *this;
}

void copy_to_device(void* device, const void* host, std::size_t bytes, void* stream) {
  if (bytes > 0) backend().to_device(device, host, bytes, stream);
}
void copy_to_host(void* host, const void* device, std::size_t bytes, void* stream) {
  if (bytes > 0) backend().to_host(host, device, bytes, stream);
}
void fill_zero(void* device, std::size_t bytes, void* stream) {
  if (bytes > 0) backend().fill_zero(device, bytes, stream);
}
void synchronize(void* stream) { backend().synchronize(stream); }
bool is_device_memory(const void* p) { return backend().is_device_memory(p); }

}  // namespace qkv::cuda
