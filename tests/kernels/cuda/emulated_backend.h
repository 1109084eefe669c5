// The CUDA kernels' backend (src/kernels/cuda/backend.h) on the SIMT emulator: host memory as
// device memory, and the kernels' own source compiled by the host compiler (emulated_kernels.cpp).
// Installed by a test, it lets Path::cuda — the attention layer's checks, uploads, launches and
// copies back — run end to end on a machine without a GPU.
#pragma once

#include "kernels/cuda/backend.h"

namespace qkv_test {

const qkv::cuda::Backend& emulated_backend();

// Installs the emulator for its lifetime where no GPU is present (the GPU's own backend stays
// where one is: a test then runs on the real thing). `emulated()` says which.
class CudaOrEmulator {
 public:
  CudaOrEmulator();
  ~CudaOrEmulator();
  CudaOrEmulator(const CudaOrEmulator&) = delete;
  CudaOrEmulator& operator=(const CudaOrEmulator&) = delete;
  bool emulated() const { return emulated_; }

 private:
  bool emulated_;
};

}  // namespace qkv_test
