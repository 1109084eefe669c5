// qkv/device.h: device tensors, the device's description and DeviceArray, on the calls of
// device_memory.h (which say "built without CUDA" in a build without it).
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/flash_cuda.h"
#include "qkv/device.h"

namespace qkv {
namespace {

// float → IEEE half, round to nearest, ties to even; overflow to ±∞, NaN kept NaN (quiet),
// subnormal halves kept. The tensor cores read fp16 subnormals, so nothing flushes.
uint16_t to_f16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const float a = std::fabs(x);
  if (std::isnan(x)) return static_cast<uint16_t>(sign | 0x7e00u);
  if (a >= 65520.0f) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past the largest
  if (a < 6.103515625e-05f) {
    // Subnormal halves are multiples of 2⁻²⁴: nearrint rounds ties to even in the default mode.
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f)));
  }
  const uint32_t abits = std::bit_cast<uint32_t>(a);
  // Keep 10 of float's 23 fraction bits: add half an ulp of the half, minus one unless the kept
  // part is odd (ties to even), then rebias the exponent from 127 to 15.
  const uint32_t rounded = abits + 0x0fffu + ((abits >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - (112u << 23)) >> 13));
}

float from_f16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const int exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    const float m = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -m : m;
  }
  return std::bit_cast<float>(sign | static_cast<uint32_t>(exponent + 112) << 23 | mantissa << 13);
}

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
      const uint16_t h = dtype == DeviceDType::bf16 ? cpu::to_bf16(x[i]) : to_f16(x[i]);
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
    y[i] = dtype_ == DeviceDType::bf16 ? cpu::from_bf16(h) : from_f16(h);
  }
  return t;
}

DeviceTensor DeviceArray::view() const {
  return DeviceTensor{data_, dtype_, shape_, contiguous_strides(shape_)};
}

}  // namespace qkv
