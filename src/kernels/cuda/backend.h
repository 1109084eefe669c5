// Where the functions of flash_cuda.h and device_memory.h run: on the GPU (the .cu files; in a
// build without CUDA, absent.cpp's functions that say so), or on a stand-in a test installs — the
// SIMT emulator of tests/kernels/cuda, which runs the same kernel source on the CPU with host
// memory as device memory. Through it the attention layer's Path::cuda (its checks, uploads,
// launches and copies back) is tested end to end on a machine without a GPU.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/cuda/flash_cuda.h"

namespace qkv::cuda {

struct Backend {
  const char* name;
  bool (*device_present)(std::string* description_or_why);
  void* (*allocate)(std::size_t bytes);  // throws qkv::Error (Kind::runtime) on failure
  void (*release)(void* p) noexcept;
  void (*to_device)(void* device, const void* host, std::size_t bytes, void* stream);
  void (*to_host)(void* host, const void* device, std::size_t bytes, void* stream);
  void (*fill_zero)(void* device, std::size_t bytes, void* stream);
  void (*synchronize)(void* stream);
  bool (*is_device_memory)(const void* p);
  void (*forward)(const Problem& p, Strided out, float* logsumexp, SoftmaxRows rows);
  void (*backward)(const Problem& p, Strided out, SoftmaxRows rows, Strided dout, Strided dq,
                   Strided dk, Strided dv);
  void (*rows_from_logsumexp)(const float* lse, int64_t n, SoftmaxRows rows, void* stream);
};

// The GPU's own (device.cu), or absent.cpp's in a build without CUDA.
const Backend& gpu_backend();
// The one in force: the GPU's unless a test has installed another. Not thread-safe to change
// while attention runs; tests set it around a suite.
const Backend& backend();
void set_backend(const Backend* stand_in);  // null: back to the GPU's

}  // namespace qkv::cuda
