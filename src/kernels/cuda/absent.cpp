// The CUDA kernels' host functions in a build without CUDA (no nvcc, or QKV_CUDA=OFF): each says
// so. With CUDA, the .cu files beside this one define them and this file is empty.
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/flash_cuda.h"

#if !defined(QKV_WITH_CUDA)
#include "qkv/tensor.h"

namespace qkv::cuda {
namespace {
constexpr const char* kWhy =
    "qkv was built without CUDA (no nvcc was found, or QKV_CUDA=OFF): rebuild with the CUDA "
    "toolkit to use Path::cuda";
}  // namespace

void flash_forward(const Problem&, Strided, float*, SoftmaxRows) {
  throw Error(kWhy, Error::Kind::runtime);
}
void flash_backward(const Problem&, Strided, SoftmaxRows, Strided, Strided, Strided, Strided) {
  throw Error(kWhy, Error::Kind::runtime);
}
bool built_with_cuda() { return false; }

DeviceBuffer::DeviceBuffer(std::size_t bytes) : size_(bytes) {
  if (bytes > 0) throw Error(kWhy, Error::Kind::runtime);
}
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr, other.size_ = 0;
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  data_ = other.data_, size_ = other.size_;
  other.data_ = nullptr, other.size_ = 0;
  return *this;
}
void copy_to_device(void*, const void*, std::size_t, void*) {
  throw Error(kWhy, Error::Kind::runtime);
}
void copy_to_host(void*, const void*, std::size_t, void*) {
  throw Error(kWhy, Error::Kind::runtime);
}
void fill_zero(void*, std::size_t, void*) { throw Error(kWhy, Error::Kind::runtime); }
void synchronize(void*) { throw Error(kWhy, Error::Kind::runtime); }
bool is_device_memory(const void*) { return false; }
bool device_present(std::string* why) {
  if (why) *why = kWhy;
  return false;
}

}  // namespace qkv::cuda
#endif
