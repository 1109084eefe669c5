// emulated_backend.h: allocations tracked so that is_device_memory tells them from host memory
// (as cudaPointerGetAttributes tells cudaMalloc's), copies as memcpy, and the kernels through the
// emulator.
#include "kernels/cuda/emulated_backend.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "kernels/cuda/emulated_kernels.h"
#include "qkv/tensor.h"

namespace qkv_test {
namespace {

std::mutex lock;
std::map<const char*, std::size_t>& live() {
  static std::map<const char*, std::size_t> m;
  return m;
}

void* allocate(std::size_t bytes) {
  void* p = std::malloc(bytes);
  if (p == nullptr)
    throw qkv::Error(
        "CUDA (emulated): cudaMalloc of " + std::to_string(bytes) + " bytes failed: out of memory",
        qkv::Error::Kind::runtime);
  std::lock_guard<std::mutex> guard(lock);
  live()[static_cast<const char*>(p)] = bytes;
  return p;
}
void release(void* p) noexcept {
  {
    std::lock_guard<std::mutex> guard(lock);
    live().erase(static_cast<const char*>(p));
  }
  std::free(p);
}
bool is_device_memory(const void* p) {
  std::lock_guard<std::mutex> guard(lock);
  const char* c = static_cast<const char*>(p);
  auto it = live().upper_bound(c);
  if (it == live().begin()) return false;
  --it;
  return c < it->first + it->second;
}

}  // namespace

const qkv::cuda::Backend& emulated_backend() {
  static const qkv::cuda::Backend b{
      .name = "emulated",
      .device_present =
          [](std::string* why) {
            if (why) *why = "the SIMT emulator on the CPU (tests/kernels/cuda)";
            return true;
          },
      .allocate = allocate,
      .release = release,
      .to_device = [](void* d, const void* h, std::size_t n, void*) { std::memcpy(d, h, n); },
      .to_host = [](void* h, const void* d, std::size_t n, void*) { std::memcpy(h, d, n); },
      .fill_zero = [](void* d, std::size_t n, void*) { std::memset(d, 0, n); },
      .synchronize = [](void*) {},
      .is_device_memory = is_device_memory,
      .forward = emulated::flash_forward,
      .backward = emulated::flash_backward,
      .rows_from_logsumexp = emulated::rows_from_logsumexp,
  };
  return b;
}

CudaOrEmulator::CudaOrEmulator() : emulated_(!qkv::cuda::gpu_backend().device_present(nullptr)) {
  if (emulated_) qkv::cuda::set_backend(&emulated_backend());
}
CudaOrEmulator::~CudaOrEmulator() {
  if (emulated_) qkv::cuda::set_backend(nullptr);
}

}  // namespace qkv_test
