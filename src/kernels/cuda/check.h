// CUDA's errors as qkv::Error (Kind::runtime): "CUDA: cudaMalloc of 1024 bytes failed: out of
// memory". For the .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "qkv/tensor.h"

namespace qkv::cuda {

inline void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess)
    throw Error("CUDA: " + what + " failed: " + cudaGetErrorString(e), Error::Kind::runtime);
}

}  // namespace qkv::cuda
