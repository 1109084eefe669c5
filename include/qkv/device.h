// qkv/device.h — tensors in GPU memory, for attention on the GPU (Path::cuda, qkv/attention.h).
//
// A DeviceTensor is a view of device memory someone else owns (a PyTorch or CuPy array, a
// DeviceArray): a pointer, an element type, a shape and strides in elements. qkv never frees it.
// A DeviceArray owns device memory and copies to and from host Tensors.
//
// Which builds have a GPU path: those compiled with the CUDA toolkit (QKV_CUDA, on when nvcc is
// found). cuda_device() says whether this build has it and whether a GPU is present; without one,
// every call that needs one throws qkv::Error (Kind::runtime) with the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "qkv/tensor.h"

namespace qkv {

// Element types of device tensors: float32, bfloat16, float16 and bool (one byte, nonzero true).
enum class DeviceDType { f32, bf16, f16, b8 };
std::string_view to_string(DeviceDType dtype);  // "float32", "bfloat16", "float16", "bool"
std::size_t element_size(DeviceDType dtype);    // 4, 2, 2, 1

struct DeviceTensor {
  void* data = nullptr;
  DeviceDType dtype = DeviceDType::f32;
  Shape shape;
  Shape strides;  // in elements, one per dimension; empty means contiguous (row-major)
  bool defined() const { return data != nullptr || !shape.empty(); }
  int64_t numel() const;
};

// What the build and the machine offer. `built`: the CUDA kernels were compiled in. `present`: a
// GPU is visible. `description`: "NVIDIA H200, sm_90, 132 SMs, 139.8 GiB" where present, else why
// not ("qkv was built without CUDA ...", "no CUDA device: <the driver's words>"). Never throws.
struct CudaDevice {
  bool built = false;
  bool present = false;
  std::string description;
};
CudaDevice cuda_device();

// Device memory qkv allocates (cudaMalloc) and frees; copies share it (as Tensor's storage).
// Zero-filled on creation.
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(Shape shape, DeviceDType dtype);
  // A device copy of a host tensor (float32 or float64, or bool for b8), converted to `dtype`
  // (bf16 and f16 round to nearest, ties to even).
  static DeviceArray from_host(const Tensor& host, DeviceDType dtype);
  // A host copy: float32 for the float types (bf16 and f16 widen exactly), bool for b8.
  Tensor to_host() const;
  DeviceTensor view() const;
  const Shape& shape() const { return shape_; }
  DeviceDType dtype() const { return dtype_; }

 private:
  void* data_ = nullptr;
  std::shared_ptr<void> owned_;  // frees the memory with the last copy of this array
  Shape shape_;
  DeviceDType dtype_ = DeviceDType::f32;
};

// Waits for the work queued on `stream` (a cudaStream_t; null: the default stream). A kernel's
// failure surfaces here as qkv::Error (Kind::runtime).
void cuda_synchronize(void* stream = nullptr);

}  // namespace qkv
