// The dense layer on packed weights (kernels/cpu/packed_linear.h): every output is b + S₀ + S₁ + …
// with Sⱼ one multiply-add chain over the j-th 128 inputs, bit for bit, on every SIMD target,
// whatever the rows (register blocks of 6 and their remainders), the output columns (whole and
// partial panels), the row strides or the thread count; GELU in the epilogue is gelu_row of those
// bits; and the error against float64 is within the rule of docs/CONVENTIONS.md §1.1.
#include "kernels/cpu/packed_linear.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/kernel_samples.h"
#include "kernels/cpu/vec_ops.h"
#include "qkv/tensor.h"
#include "simd_targets.h"

namespace qkv::cpu {
namespace {

using qkv_test::normal;
using qkv_test::same_bits;
using qkv_test::target_has_fma;

struct Case {
  int64_t n, in, out;
};

// y[i, o] as packed_linear.h promises it, in float: fma on targets with FMA, else a multiply and
// an add.
float chained(const float* x, const float* w, float b, int64_t in, bool fma) {
  float total = b;
  for (int64_t k0 = 0; k0 < in; k0 += 128) {
    float s = 0;
    for (int64_t k = k0; k < std::min(in, k0 + 128); ++k)
      s = fma ? std::fma(x[k], w[k], s) : x[k] * w[k] + s;
    total += s;
  }
  return total;
}

QKV_PER_SIMD_TARGET(PackedLinearKernel);

TEST_P(PackedLinearKernel, EachOutputIsTheBiasPlusChunkedChainsInOrder) {
  const bool fma = target_has_fma(GetParam());
  for (const Case c : {Case{1, 1, 1}, Case{1, 384, 1152}, Case{2, 17, 15}, Case{7, 128, 33},
                       Case{13, 129, 100}, Case{97, 257, 17}, Case{193, 40, 64}}) {
    // Row strides other than the minimum, as a caller with views passes them.
    const int64_t ldx = c.in + 3, ldy = c.out + 5;
    const auto x = normal(c.n * ldx, 1 + c.n, 1), w = normal(c.out * c.in, 2 + c.in, 0.1f);
    const auto b = normal(c.out, 3 + c.out, 1);
    const PackedLinear p = pack_linear(w.data(), b.data(), c.out, c.in);
    const auto y0 = normal(c.n * ldy, 4, 1);
    for (int threads : {1, 2, 3}) {
      auto y = y0;
      packed_linear(y.data(), ldy, x.data(), ldx, c.n, p, Activation::none, threads);
      for (int64_t i = 0; i < c.n; ++i) {
        for (int64_t o = 0; o < c.out; ++o) {
          const float want = chained(x.data() + i * ldx, w.data() + o * c.in, b[o], c.in, fma);
          ASSERT_TRUE(same_bits(y[i * ldy + o], want))
              << "n=" << c.n << " in=" << c.in << " out=" << c.out << " threads=" << threads << " ("
              << i << ", " << o << "): " << y[i * ldy + o] << " vs " << want;
        }
        // Past out, between rows: untouched.
        for (int64_t o = c.out; o < ldy; ++o)
          ASSERT_TRUE(same_bits(y[i * ldy + o], y0[i * ldy + o])) << "n=" << c.n << " padding";
      }
    }
  }
}

TEST_P(PackedLinearKernel, NoBiasIsZeroBias) {
  const int64_t n = 5, in = 200, out = 40;
  const auto x = normal(n * in, 5, 1), w = normal(out * in, 6, 0.1f);
  const std::vector<float> zeros(out, 0.0f);
  std::vector<float> a(n * out), b(n * out);
  packed_linear(a.data(), out, x.data(), in, n, pack_linear(w.data(), nullptr, out, in));
  packed_linear(b.data(), out, x.data(), in, n, pack_linear(w.data(), zeros.data(), out, in));
  for (int64_t i = 0; i < n * out; ++i) ASSERT_TRUE(same_bits(a[i], b[i])) << i;
}

TEST_P(PackedLinearKernel, GeluInTheEpilogueIsGeluRowOfTheSameSums) {
  for (const Case c : {Case{12, 384, 1536}, Case{31, 50, 70}}) {
    const auto x = normal(c.n * c.in, 7, 1), w = normal(c.out * c.in, 8, 0.1f);
    const auto b = normal(c.out, 9, 1);
    const PackedLinear p = pack_linear(w.data(), b.data(), c.out, c.in);
    std::vector<float> plain(c.n * c.out), fused(c.n * c.out);
    packed_linear(plain.data(), c.out, x.data(), c.in, c.n, p, Activation::none, 2);
    for (int64_t i = 0; i < c.n; ++i) gelu_row(plain.data() + i * c.out, c.out);
    packed_linear(fused.data(), c.out, x.data(), c.in, c.n, p, Activation::gelu, 2);
    for (int64_t i = 0; i < c.n * c.out; ++i)
      ASSERT_TRUE(same_bits(fused[i], plain[i])) << "n=" << c.n << " at " << i;
  }
}

// docs/CONVENTIONS.md §1.1: max|X − R| ≤ 2·max|N − R| + 1e-6 against float64, N the naive float32
// loop (one chain over all of k), on inputs ×5 too; the chunks make X more accurate than N at
// in = 1536.
TEST_P(PackedLinearKernel, WithinTheToleranceOfFloat64) {
  for (float sd : {1.0f, 5.0f}) {
    const int64_t n = 20, in = 1536, out = 48;
    const auto x = normal(n * in, 10, sd), w = normal(out * in, 11, 0.05f);
    const auto b = normal(out, 12, sd);
    std::vector<float> y(n * out);
    packed_linear(y.data(), out, x.data(), in, n, pack_linear(w.data(), b.data(), out, in));
    double err = 0, naive_err = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t o = 0; o < out; ++o) {
        double r = b[o];
        float naive = b[o];
        for (int64_t k = 0; k < in; ++k) {
          r += static_cast<double>(x[i * in + k]) * w[o * in + k];
          naive += x[i * in + k] * w[o * in + k];
        }
        err = std::max(err, std::abs(y[i * out + o] - r));
        naive_err = std::max(naive_err, std::abs(naive - r));
      }
    EXPECT_LE(err, 2 * naive_err + 1e-6) << "sd=" << sd << " naive " << naive_err;
  }
}

TEST_P(PackedLinearKernel, WeightsPackedForAnotherWidthAreRefused) {
  const std::vector<float> w(16, 1.0f), x(4, 1.0f);
  PackedLinear p = pack_linear(w.data(), nullptr, 4, 4);
  p.width *= 2;
  std::vector<float> y(4);
  EXPECT_THROW(packed_linear(y.data(), 4, x.data(), 4, 1, p), Error);
}

}  // namespace
}  // namespace qkv::cpu
