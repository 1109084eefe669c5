// The emulator the CUDA kernels' tests run on: barriers, shuffles, early returns, the launch's
// checks, the fragment table of mma.cuh, and the reversed order that exposes a missing barrier.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/simt.h"

namespace qkv::simt {
namespace {

// Each block sums its 128 values through shared memory (a tree with a barrier per level) and the
// last warp's lanes through shuffles.
QKV_KERNEL void block_sums(const float* x, float* sums) {
  __shared__ float tile[128];
  const int t = threadIdx.x;
  tile[t] = x[blockIdx.x * 128 + t];
  __syncthreads();
  for (int half = 64; half >= 32; half /= 2) {
    if (t < half) tile[t] += tile[t + half];
    __syncthreads();
  }
  float v = t < 32 ? tile[t] : 0.0f;
  for (int m = 16; m >= 1; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
  if (t == 0) sums[blockIdx.x] = v;
}

TEST(SimtEmulator, BlocksBarriersAndShufflesSumExactly) {
  std::vector<float> x(3 * 128), sums(3, -1);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7);  // exact sums
  for (Order o : {Order::forward, Order::reverse}) {
    set_order(o);
    ASSERT_EQ(launch(block_sums, dim3(3), dim3(128), 0, nullptr, x.data(), sums.data()), kSuccess);
    for (int b = 0; b < 3; ++b) {
      float expected = 0;
      for (int i = 0; i < 128; ++i) expected += x[b * 128 + i];
      EXPECT_EQ(sums[b], expected) << "block " << b;
    }
  }
  set_order(Order::forward);
}

// Threads that return early leave the barriers: the rest are not held back (sm_70 and later).
QKV_KERNEL void early_return(int* out) {
  __shared__ int seen[64];
  const int t = threadIdx.x;
  if (t >= 40) return;
  seen[t] = t;
  __syncthreads();
  out[t] = seen[39 - t];
}

TEST(SimtEmulator, ThreadsThatReturnLeaveTheBarrier) {
  std::vector<int> out(40, -1);
  ASSERT_EQ(launch(early_return, dim3(1), dim3(64), 0, nullptr, out.data()), kSuccess);
  for (int t = 0; t < 40; ++t) EXPECT_EQ(out[t], 39 - t);
}

// A read of what another thread writes with no barrier between: the result depends on the order
// the threads run in, so the reversed order tells.
QKV_KERNEL void missing_barrier(int* out) {
  __shared__ int slot[32];
  const int t = threadIdx.x;
  slot[t] = t + 1;
  out[t] = slot[(t + 1) % 32];  // a __syncthreads belongs above
}

TEST(SimtEmulator, TheReversedOrderExposesAMissingBarrier) {
  std::vector<int> forward(32), reverse(32);
  set_order(Order::forward);
  ASSERT_EQ(launch(missing_barrier, dim3(1), dim3(32), 0, nullptr, forward.data()), kSuccess);
  set_order(Order::reverse);
  ASSERT_EQ(launch(missing_barrier, dim3(1), dim3(32), 0, nullptr, reverse.data()), kSuccess);
  set_order(Order::forward);
  EXPECT_NE(forward, reverse);
}

TEST(SimtEmulator, RefusesWhatTheGpuRefuses) {
  std::vector<int> out(64);
  EXPECT_EQ(launch(early_return, dim3(1), dim3(2048), 0, nullptr, out.data()),
            kInvalidConfiguration);
  EXPECT_EQ(launch(early_return, dim3(0), dim3(64), 0, nullptr, out.data()), kInvalidConfiguration);
  EXPECT_EQ(launch(early_return, dim3(1), dim3(64), 300 * 1024, nullptr, out.data()),
            kInvalidConfiguration);
}

// One warp multiplies a 16×16 A by a 16×8 B, its fragments loaded by mma.cuh's table.
QKV_KERNEL void mma_once(const uint16_t* A, const uint16_t* B, float* D) {
  const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  auto a_at = [&](int r, int c) { return A[r * 16 + c]; };
  auto b_at = [&](int r, int c) { return B[r * 8 + c]; };
  const uint32_t a[4] = {pack16(a_at(g, 2 * t), a_at(g, 2 * t + 1)),
                         pack16(a_at(g + 8, 2 * t), a_at(g + 8, 2 * t + 1)),
                         pack16(a_at(g, 2 * t + 8), a_at(g, 2 * t + 9)),
                         pack16(a_at(g + 8, 2 * t + 8), a_at(g + 8, 2 * t + 9))};
  const uint32_t b[2] = {pack16(b_at(2 * t, g), b_at(2 * t + 1, g)),
                         pack16(b_at(2 * t + 8, g), b_at(2 * t + 9, g))};
  float d[4] = {1, 1, 1, 1};  // C = 1
  mma_16816<Half16::bf16>(d, a, b);
  D[g * 8 + 2 * t] = d[0], D[g * 8 + 2 * t + 1] = d[1];
  D[(g + 8) * 8 + 2 * t] = d[2], D[(g + 8) * 8 + 2 * t + 1] = d[3];
}

TEST(SimtEmulator, MmaMultipliesByTheFragmentTable) {
  // Small integers are exact in bf16 (their top 16 bits), and so is every sum here.
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-4, 4);
  std::vector<uint16_t> A(256), B(128);
  std::vector<float> a(256), b(128), D(128);
  auto bf16_of = [](float x) { return static_cast<uint16_t>(__float_as_uint(x) >> 16); };
  for (int i = 0; i < 256; ++i) a[i] = static_cast<float>(small(rng)), A[i] = bf16_of(a[i]);
  for (int i = 0; i < 128; ++i) b[i] = static_cast<float>(small(rng)), B[i] = bf16_of(b[i]);
  ASSERT_EQ(launch(mma_once, dim3(1), dim3(32), 0, nullptr, A.data(), B.data(), D.data()),
            kSuccess);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 8; ++c) {
      float expected = 1;
      for (int k = 0; k < 16; ++k) expected += a[r * 16 + k] * b[k * 8 + c];
      EXPECT_EQ(D[r * 8 + c], expected) << "D[" << r << "][" << c << "]";
    }
}

}  // namespace
}  // namespace qkv::simt
