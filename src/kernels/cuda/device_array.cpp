// qkv/device.h: device tensors, the device's description and DeviceArray, on the calls of
// device_memory.h (which say "built without CUDA" in a build without it).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/flash_cuda.h"
#include "qkv/device.h"

namespace qkv {
namespace {

Shape contiguous_strides(const Shape& shape) {
  Shape s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

int64_t count(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

std::string_view to_string(DeviceDType dtype) {
  switch (dtype) {
    case DeviceDType::f32:
      return "float32";
    case DeviceDType::bf16:
      return "bfloat16";
    case DeviceDType::f16:
      return "float16";
    case DeviceDType::b8:
      return "bool";
  }
  return "?";
}

std::size_t element_size(DeviceDType dtype) {
  switch (dtype) {
    case DeviceDType::f32:
      return 4;
    case DeviceDType::bf16:
    case DeviceDType::f16:
      return 2;
    case DeviceDType::b8:
      return 1;
  }
  return 1;
}

int64_t DeviceTensor::numel() const { return count(shape); }

CudaDevice cuda_device() {
  CudaDevice d;
  d.built = cuda::built_with_cuda();
  d.present = cuda::device_present(&d.description);
  return d;
}

void cuda_synchronize(void* stream) { cuda::synchronize(stream); }

DeviceArray::DeviceArray(Shape shape, DeviceDType dtype) : shape_(std::move(shape)), dtype_(dtype) {
  for (int64_t d : shape_)
    if (d < 0) throw Error("DeviceArray: shape " + shape_str(shape_) + "; expected sizes ≥ 0");
  const std::size_t bytes = static_cast<std::size_t>(count(shape_)) * element_size(dtype_);
  cuda::DeviceBuffer buffer(bytes);
  cuda::fill_zero(buffer.data(), bytes, nullptr);
  // The buffer's memory passes to this array, which frees it through another buffer of it.
  data_ = buffer.data();
  owned_ = std::make_shared<cuda::DeviceBuffer>(std::move(buffer));
}

DeviceArray DeviceArray::from_host(const Tensor& host, DeviceDType dtype) {
  if (!host.defined()) throw Error("DeviceArray::from_host: the tensor is undefined");
  if ((dtype == DeviceDType::b8) != (host.dtype() == DType::b8))
    throw Error("DeviceArray::from_host: a " + std::string(dtype_name(host.dtype())) +
                " tensor as " + std::string(to_string(dtype)) +
                "; expected bool for bool and a float tensor for the float types");
  DeviceArray a(host.shape(), dtype);
  const Tensor c = dtype == DeviceDType::b8 ? host.contiguous() : host.to(DType::f32);
  const int64_t n = c.numel();
  std::vector<unsigned char> bytes(static_cast<std::size_t>(n) * element_size(dtype));
  if (dtype == DeviceDType::b8) {
    for (int64_t i = 0; i < n; ++i) bytes[i] = c.data<bool>()[i] ? 1 : 0;
  } else {
    const float* x = c.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      if (dtype == DeviceDType::f32) {
        std::memcpy(&bytes[4 * i], &x[i], 4);
        continue;
      }
      const uint16_t h = dtype == DeviceDType::bf16 ? float_to_bf16(x[i]) : float_to_half(x[i]);
      std::memcpy(&bytes[2 * i], &h, 2);
    }
  }
  cuda::copy_to_device(a.data_, bytes.data(), bytes.size(), nullptr);
  return a;
}

Tensor DeviceArray::to_host() const {
  const int64_t n = count(shape_);
  std::vector<unsigned char> bytes(static_cast<std::size_t>(n) * element_size(dtype_));
  cuda::copy_to_host(bytes.data(), data_, bytes.size(), nullptr);
  if (dtype_ == DeviceDType::b8) {
    Tensor t(shape_, DType::b8);
    for (int64_t i = 0; i < n; ++i) t.data<bool>()[i] = bytes[i] != 0;
    return t;
  }
  Tensor t(shape_, DType::f32);
  float* y = t.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    if (dtype_ == DeviceDType::f32) {
      std::memcpy(&y[i], &bytes[4 * i], 4);
      continue;
    }
    uint16_t h;
    std::memcpy(&h, &bytes[2 * i], 2);
    y[i] = dtype_ == DeviceDType::bf16 ? bf16_to_float(h) : half_to_float(h);
  }
  return t;
}

DeviceTensor DeviceArray::view() const {
  return DeviceTensor{data_, dtype_, shape_, contiguous_strides(shape_)};
}

}  // namespace qkv
