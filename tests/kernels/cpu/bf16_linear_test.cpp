// tests/kernels/cpu/bf16_linear_test.cpp — the bf16 dense layer (kernels/cpu/bf16_linear.h)
// against a float64 product of the bf16-rounded x and W, on every SIMD target: within the float32
// accumulation bound γ_k·Σ|terms| (k additions; Higham, Accuracy and Stability, §3.1) plus the
// bias's one rounding; the same bits for any thread count and whether a row runs alone or in a
// batch; and a result that skipped the rounding of x is rejected by that bound.
#include "kernels/cpu/bf16_linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "simd_targets.h"

namespace qkv_test {
namespace {

using namespace qkv::cpu;

std::vector<float> normal(int64_t n, uint64_t seed, float scale = 1) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> x(static_cast<size_t>(n));
  for (float& e : x) e = scale * dist(rng);
  return x;
}

// The largest |y − R| / bound over the outputs, R = Σ_k x̃_k w̃_k + b in float64 (x̃, w̃ rounded to
// bf16), the bound γ_(in+1)·(Σ_k |x̃_k w̃_k| + |b|) + u·|R| for the sums and the final rounding
// (in pairs the additions are in + 1 at most).
double worst_ratio(const std::vector<float>& y, const std::vector<float>& x,
                   const std::vector<float>& w, const std::vector<float>& b, int64_t n, int64_t in,
                   int64_t out) {
  const double u = 0x1p-24, k = static_cast<double>(in + 1), gamma = k * u / (1 - k * u);
  double worst = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double exact = b[o], magnitude = std::abs(b[o]);
      for (int64_t c = 0; c < in; ++c) {
        const double t = static_cast<double>(round_bf16(x[i * in + c])) * round_bf16(w[o * in + c]);
        exact += t, magnitude += std::abs(t);
      }
      const double bound = gamma * magnitude + u * std::abs(exact) + 1e-30;
      worst = std::max(worst, std::abs(y[i * out + o] - exact) / bound);
    }
  return worst;
}

QKV_PER_SIMD_TARGET(Bf16LinearKernel);

TEST_P(Bf16LinearKernel, MatchesTheRoundedProductWithinFloat32Accumulation) {
  for (const auto [n, in, out] : {std::array<int64_t, 3>{1, 384, 384},
                                  {13, 384, 1536},
                                  {70, 37, 200},
                                  {5, 1, 3},
                                  {130, 65, 97}}) {
    SCOPED_TRACE("n " + std::to_string(n) + " in " + std::to_string(in) + " out " +
                 std::to_string(out));
    const std::vector<float> x = normal(n * in, 1), w = normal(out * in, 2, 0.05f),
                             b = normal(out, 3);
    const Bf16Linear packed = pack_linear_bf16(w.data(), b.data(), out, in);
    std::vector<float> y(n * out);
    bf16_linear(y.data(), out, x.data(), in, n, packed, Activation::none, 2);
    EXPECT_LE(worst_ratio(y, x, w, b, n, in, out), 1.0);
  }
}

TEST_P(Bf16LinearKernel, TheBoundRejectsAnUnroundedX) {
  // The product of the float32 x (not rounded) with the rounded W: what a kernel that forgot to
  // round x would give. Its error against the rounded product is x's rounding, far past the bound.
  const int64_t n = 4, in = 256, out = 64;
  const std::vector<float> x = normal(n * in, 4), w = normal(out * in, 5), b(out, 0.0f);
  std::vector<float> y(n * out);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double sum = 0;
      for (int64_t c = 0; c < in; ++c)
        sum += static_cast<double>(x[i * in + c]) * round_bf16(w[o * in + c]);
      y[i * out + o] = static_cast<float>(sum);
    }
  EXPECT_GT(worst_ratio(y, x, w, b, n, in, out), 10.0);
}

TEST_P(Bf16LinearKernel, ThreadsAndBatchesGiveTheSameBits) {
  const int64_t n = 150, in = 200, out = 300;
  const std::vector<float> x = normal(n * in, 6), w = normal(out * in, 7, 0.1f), b = normal(out, 8);
  const Bf16Linear packed = pack_linear_bf16(w.data(), b.data(), out, in);
  std::vector<float> one(n * out);
  bf16_linear(one.data(), out, x.data(), in, n, packed, Activation::gelu, 1);
  for (int threads : {2, 3, 8}) {
    std::vector<float> many(n * out);
    bf16_linear(many.data(), out, x.data(), in, n, packed, Activation::gelu, threads);
    EXPECT_EQ(std::memcmp(many.data(), one.data(), many.size() * sizeof(float)), 0)
        << "threads " << threads;
  }
  // Row 77 alone, into a strided output.
  std::vector<float> alone(out + 5);
  bf16_linear(alone.data(), out + 5, x.data() + 77 * in, in, 1, packed, Activation::gelu, 2);
  EXPECT_EQ(std::memcmp(alone.data(), one.data() + 77 * out, out * sizeof(float)), 0);
}

}  // namespace
}  // namespace qkv_test
