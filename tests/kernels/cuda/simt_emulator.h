// A CPU stand-in for the GPU, so that the CUDA kernels' own source runs in the tests of a machine
// without one (src/kernels/cuda/simt.h includes this file when the host compiler builds a .cuh).
//
// Model: a launch runs its blocks one after another; a block's threads are fibers (ucontext) on
// the calling thread, each with its own stack, switched only where CUDA threads meet —
// __syncthreads, __syncwarp, the warp shuffles and the tensor-core product, which all threads of
// the block (or of the warp) must reach, as on the GPU. `__shared__` arrays are function-static:
// one block runs at a time, so each block sees them as its own. Device memory is host memory.
// What it does not model: timing, the memory model between barriers (a fiber runs alone from one
// barrier to the next), PTX, or anything asynchronous. set_order(Order::reverse) runs a block's
// fibers in the reverse order between barriers: a kernel whose result changes with the order
// reads shared memory some other thread writes without a barrier in between.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <utility>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// The running thread's coordinates, set by the emulator before it resumes a fiber. Kernels read
// them as CUDA's built-ins.
extern dim3 threadIdx, blockIdx, blockDim, gridDim;

#define QKV_DEVICE inline
#define QKV_HOST_DEVICE inline
// inline: a kernel defined in a header is one definition however many test files include it.
#define QKV_KERNEL inline
#define QKV_SIMT_NAMESPACE emulated
#define QKV_LAUNCH_BOUNDS(threads, blocks)
#define QKV_DYNAMIC_SHARED(type, name) \
  type* name = static_cast<type*>(::qkv::simt::dynamic_shared())
#define QKV_UNROLL
#define QKV_RESTRICT __restrict__
#define __shared__ static

namespace qkv::simt {

enum Status { kSuccess = 0, kLaunchFailure = 1, kOutOfMemory = 2, kInvalidConfiguration = 3 };
const char* error_string(Status e);

enum class Order { forward, reverse };
void set_order(Order order);  // for the next launches; forward by default

// The launch's dynamic shared memory (zero-filled at each block's start, 16-byte aligned).
void* dynamic_shared();
void sync_block();
void sync_warp();
// Every lane of the calling warp deposits `value`; each gets back the value lane `source` put.
uint64_t exchange(uint64_t value, int source);
// The linear thread index in the block, its warp and its lane.
int linear_thread();
inline int lane_id() { return linear_thread() % 32; }

// mma.cuh's m16n8k16 on the warp's gathered fragments: D += A·B, products exact, sums in float32.
void emulated_mma_16816(bool bf16, float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]);

// Runs `body` once per thread of every block. Fails (without running) on an empty or oversized
// block (> 1024 threads) or dynamic shared memory over 227 KB, as the GPU would refuse them.
Status run_grid(dim3 grid, dim3 block, std::size_t shared_bytes, const std::function<void()>& body);

template <class... Params, class... Args>
Status launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared,
              void* /*stream*/, Args&&... args) {
  std::tuple<Params...> bound(static_cast<Params>(std::forward<Args>(args))...);
  return run_grid(grid, block, shared, [&] { std::apply(kernel, bound); });
}

Status device_alloc(void** p, std::size_t bytes, void* stream);
Status device_free(void* p, void* stream);
Status device_zero(void* p, std::size_t bytes, void* stream);

// How many launches and blocks ran since the last reset (tests check that a path was taken).
struct Counters {
  int launches = 0;
  long blocks = 0;
};
Counters& counters();

}  // namespace qkv::simt

inline void __syncthreads() { qkv::simt::sync_block(); }
inline void __syncwarp(unsigned = 0xffffffffu) { qkv::simt::sync_warp(); }

template <class T>
T qkv_simt_exchange_(T v, int source) {
  static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = qkv::simt::exchange(bits, source);
  T r;
  std::memcpy(&r, &bits, sizeof(T));
  return r;
}
template <class T>
T __shfl_sync(unsigned, T v, int source, int width = 32) {
  const int lane = qkv::simt::lane_id();
  return qkv_simt_exchange_(v, (lane & ~(width - 1)) + (source & (width - 1)));
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int lane_mask, int width = 32) {
  const int lane = qkv::simt::lane_id();
  return qkv_simt_exchange_(v, (lane & ~(width - 1)) + ((lane ^ lane_mask) & (width - 1)));
}
template <class T>
T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
  const int lane = qkv::simt::lane_id();
  const int in_segment = (lane & (width - 1)) + static_cast<int>(delta);
  return qkv_simt_exchange_(v, in_segment < width ? lane + static_cast<int>(delta) : lane);
}

inline unsigned __float_as_uint(float x) {
  unsigned u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
inline int __float_as_int(float x) {
  int u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float __int_as_float(int u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
// expf, exp2f, logf, fmaxf, ... : the C library's, global as on the device (<math.h>).
#include <math.h>
