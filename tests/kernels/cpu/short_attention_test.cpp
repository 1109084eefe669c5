// Short-sequence attention from a fused Q|K|V projection (kernels/cpu/short_attention.h), on every
// SIMD target: within the tolerance of docs/CONVENTIONS.md §1.1 against float64
// (2·max|N − R| + 1e-6, N the naive float32 loop of the same formula), over awkward lengths, head
// dims and scales; padding rows zero and padding keys never read; NaN rows where NaN comes in; the
// same bits for any thread count.
#include "kernels/cpu/short_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/kernel_samples.h"
#include "qkv/tensor.h"
#include "simd_targets.h"

namespace qkv::cpu {
namespace {

using qkv_test::normal;
using qkv_test::same_bits;

// B sequences of L tokens, H heads of D, stored as one projection's rows [q | k | v | 1 spare].
struct Sample {
  int64_t B, L, H, D;
  float scale;
  std::vector<int64_t> lengths;
  std::vector<float> qkv;
  int64_t ld() const { return 3 * H * D + 1; }
  const float* q() const { return qkv.data(); }
  const float* k() const { return qkv.data() + H * D; }
  const float* v() const { return qkv.data() + 2 * H * D; }
  float at(const float* base, int64_t b, int64_t i, int64_t h, int64_t x) const {
    return base[(b * L + i) * ld() + h * D + x];
  }
};

Sample sample(int64_t B, int64_t L, int64_t H, int64_t D, float sd, uint32_t seed) {
  Sample s{B, L, H, D, 1.0f / std::sqrt(static_cast<float>(D)), {}, {}};
  for (int64_t b = 0; b < B; ++b) s.lengths.push_back(std::max<int64_t>(1, L - (b * 7) % L));
  s.qkv = normal(B * L * s.ld(), seed, sd);
  return s;
}

// out (ldo = H·D + 2) through the kernel.
std::vector<float> run(const Sample& s, int threads) {
  const int64_t ldo = s.H * s.D + 2;
  std::vector<float> out(s.B * s.L * ldo, -7.0f);
  short_attention({.B = s.B,
                   .L = s.L,
                   .H = s.H,
                   .D = s.D,
                   .scale = s.scale,
                   .q = s.q(),
                   .k = s.k(),
                   .v = s.v(),
                   .ld = s.ld(),
                   .out = out.data(),
                   .ldo = ldo,
                   .lengths = s.lengths.data()},
                  threads);
  return out;
}

// The formula in T: softmax_j(scale·q_i·k_j) over the real keys, then Σ_j P_ij v_j.
template <class T>
std::vector<T> direct(const Sample& s, int64_t b, int64_t i, int64_t h) {
  const int64_t n = s.lengths[b];
  std::vector<T> x(n);
  for (int64_t j = 0; j < n; ++j) {
    T dot = 0;
    for (int64_t d = 0; d < s.D; ++d)
      dot += static_cast<T>(s.at(s.q(), b, i, h, d)) * static_cast<T>(s.at(s.k(), b, j, h, d));
    x[j] = static_cast<T>(s.scale) * dot;
  }
  const T m = *std::max_element(x.begin(), x.end());
  T sum = 0;
  for (T& e : x) sum += (e = std::exp(e - m));
  std::vector<T> o(s.D, 0);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t d = 0; d < s.D; ++d) o[d] += x[j] / sum * static_cast<T>(s.at(s.v(), b, j, h, d));
  return o;
}

QKV_PER_SIMD_TARGET(ShortAttentionKernel);

TEST_P(ShortAttentionKernel, WithinTheToleranceOfFloat64AndZeroPastEachLength) {
  for (int64_t L : {1, 2, 17, 64})
    for (int64_t D : {1, 8, 21, 32, 64})
      for (float sd : {1.0f, 5.0f}) {
        const Sample s = sample(3, L, 2, D, sd, static_cast<uint32_t>(L * 100 + D));
        const auto out = run(s, 2);
        const int64_t ldo = s.H * s.D + 2;
        double err = 0, naive_err = 0;
        for (int64_t b = 0; b < s.B; ++b)
          for (int64_t i = 0; i < s.L; ++i) {
            const float* row = out.data() + (b * s.L + i) * ldo;
            for (int64_t x = s.H * s.D; x < ldo; ++x)
              ASSERT_EQ(row[x], -7.0f) << "past H·D: L=" << L << " D=" << D;
            for (int64_t h = 0; h < s.H; ++h) {
              if (i >= s.lengths[b]) {
                for (int64_t d = 0; d < s.D; ++d)
                  ASSERT_EQ(row[h * s.D + d], 0.0f) << "padding row: L=" << L << " D=" << D;
                continue;
              }
              const auto r = direct<double>(s, b, i, h);
              const auto naive = direct<float>(s, b, i, h);
              for (int64_t d = 0; d < s.D; ++d) {
                err = std::max(err, std::abs(row[h * s.D + d] - r[d]));
                naive_err = std::max(naive_err, std::abs(naive[d] - r[d]));
              }
            }
          }
        EXPECT_LE(err, 2 * naive_err + 1e-6)
            << "L=" << L << " D=" << D << " sd=" << sd << " (naive " << naive_err << ")";
      }
}

TEST_P(ShortAttentionKernel, TheSameBitsForAnyThreadCount) {
  const Sample s = sample(5, 40, 3, 32, 1, 3);
  const auto one = run(s, 1);
  for (int threads : {2, 3}) {
    const auto many = run(s, threads);
    for (std::size_t x = 0; x < one.size(); ++x)
      ASSERT_TRUE(same_bits(one[x], many[x])) << threads << " threads, at " << x;
  }
}

// Keys past a sequence's length are never read: NaN there changes nothing.
TEST_P(ShortAttentionKernel, PaddingKeysAreNeverRead) {
  Sample s = sample(2, 20, 2, 16, 1, 4);
  s.lengths = {20, 9};
  const auto clean = run(s, 1);
  for (int64_t j = 9; j < 20; ++j)
    for (int64_t x = 0; x < s.ld(); ++x)
      s.qkv[(1 * s.L + j) * s.ld() + x] = std::numeric_limits<float>::quiet_NaN();
  const auto dirty = run(s, 1);
  for (std::size_t x = 0; x < clean.size(); ++x)
    ASSERT_TRUE(same_bits(clean[x], dirty[x])) << "at " << x;
}

// A NaN in one key of sequence 0, head 1 makes every real row of that sequence and head NaN, and
// nothing else.
TEST_P(ShortAttentionKernel, NaNInAKeyMakesItsRowsNaN) {
  Sample s = sample(2, 10, 2, 8, 1, 5);
  s.qkv[(0 * s.L + 3) * s.ld() + s.H * s.D + 1 * s.D + 2] = std::numeric_limits<float>::quiet_NaN();
  const auto out = run(s, 1);
  const int64_t ldo = s.H * s.D + 2;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t i = 0; i < s.lengths[b]; ++i)
      for (int64_t h = 0; h < s.H; ++h)
        for (int64_t d = 0; d < s.D; ++d)
          EXPECT_EQ(std::isnan(out[(b * s.L + i) * ldo + h * s.D + d]), b == 0 && h == 1)
              << "b=" << b << " i=" << i << " h=" << h;
}

TEST_P(ShortAttentionKernel, LongerSequencesAndBadLengthsAreRefused) {
  Sample s = sample(1, 4, 1, 4, 1, 6);
  s.lengths = {5};
  EXPECT_THROW(run(s, 1), Error);
  Sample longer = sample(1, kShortAttentionMaxLength + 1, 1, 4, 1, 7);
  EXPECT_THROW(run(longer, 1), Error);
}

}  // namespace
}  // namespace qkv::cpu
