// The GPU backend of a build without CUDA (no nvcc, or QKV_CUDA=OFF): each call says so. With
// CUDA, device.cu defines gpu_backend() and this file is empty.
#include "kernels/cuda/backend.h"

#if !defined(QKV_WITH_CUDA)
#include "qkv/tensor.h"

namespace qkv::cuda {
namespace {

constexpr const char* kWhy =
    "qkv was built without CUDA (no nvcc was found, or QKV_CUDA=OFF): rebuild with the CUDA "
    "toolkit to use Path::cuda";

[[noreturn]] void refuse() { throw Error(kWhy, Error::Kind::runtime); }

}  // namespace

bool built_with_cuda() { return false; }

const Backend& gpu_backend() {
  static const Backend absent{
      .name = "none",
      .device_present =
          [](std::string* why) {
            if (why) *why = kWhy;
            return false;
          },
      .allocate = [](std::size_t) -> void* { refuse(); },
      .release = [](void*) noexcept {},
      .to_device = [](void*, const void*, std::size_t, void*) { refuse(); },
      .to_host = [](void*, const void*, std::size_t, void*) { refuse(); },
      .fill_zero = [](void*, std::size_t, void*) { refuse(); },
      .synchronize = [](void*) { refuse(); },
      .is_device_memory = [](const void*) { return false; },
      .forward = [](const Problem&, Strided, float*, SoftmaxRows) { refuse(); },
      .backward = [](const Problem&, Strided, SoftmaxRows, Strided, Strided, Strided,
                     Strided) { refuse(); },
      .rows_from_logsumexp = [](const float*, int64_t, SoftmaxRows, void*) { refuse(); },
  };
  return absent;
}

}  // namespace qkv::cuda
#endif
