// tests/kernels/cpu/kernel_samples.h — inputs and bit comparisons shared by the kernel tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace qkv_test {

// n draws of N(0, sd²), the same for the same seed.
inline std::vector<float> normal(int64_t n, uint32_t seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, sd);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

// a and b are the same float, bit for bit (−0 is not 0; a NaN equals the same NaN).
inline bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace qkv_test
