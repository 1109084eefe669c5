// The Highway row operations of the fused kernels against plain loops, over lengths around the
// vector width and every misalignment of a 64-byte line, and the accuracy of their exp2.
#include "kernels/cpu/vec_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "simd_targets.h"

namespace qkv::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Lengths 0..67 cover every tail of 4-, 8- and 16-lane vectors; offsets 0..15 floats every
// alignment within a cache line.
template <class F>
void for_each_length_and_offset(F&& f) {
  for (int64_t n = 0; n <= 67; ++n)
    for (int64_t offset = 0; offset < 16; offset += (n < 20 ? 1 : 5)) f(n, offset);
}

std::vector<float> normal(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> x(n);
  for (float& v : x) v = 3 * d(rng);
  return x;
}

QKV_PER_SIMD_TARGET(VecOps);

// Relative error of exp2_approx against std::exp2 in float64, in units of float's epsilon.
TEST_P(VecOps, Exp2IsWithinTwoUlpOverTheSoftmaxRange) {
  double worst = 0;
  float worst_x = 0;
  for (float x = -126.0f; x <= 0.0f; x += 1.0f / 1024) {  // s − max ≤ 0 in the softmax
    const double exact = std::exp2(static_cast<double>(x));
    const double rel = std::abs(exp2_approx(x) - exact) / exact;
    if (rel > worst) worst = rel, worst_x = x;
  }
  const double ulps = worst / std::numeric_limits<float>::epsilon();
  RecordProperty("exp2_max_error_ulp", std::to_string(ulps));
  EXPECT_LE(ulps, 2.0) << "worst at x = " << worst_x;
}

// GELU(x) = x·Φ(x) against float64 erfc, relative to |GELU(x)|. erfc(z) = t·exp(y) with
// y ≈ −z² = −x²/2: rounding y costs |y|·ε relative, so the bound grows with x². Measured worst:
// 1.6e-5 (≈ 133 ε) at x ≈ −11.6, where GELU(x) ≈ 1e-30; within |x| < 3, 6e-7.
double gelu_bound(double x) { return (8 + x * x) * std::numeric_limits<float>::epsilon(); }

double gelu_exact(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }

TEST_P(VecOps, GeluRowMatchesFloat64Erfc) {
  std::vector<float> xs;
  for (float x = -12.0f; x <= 12.0f; x += 1.0f / 512) xs.push_back(x);
  std::vector<float> y = xs;
  gelu_row(y.data(), static_cast<int64_t>(y.size()));
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double exact = gelu_exact(xs[i]);
    if (exact == 0) continue;
    ASSERT_LE(std::abs(y[i] - exact) / std::abs(exact), gelu_bound(xs[i])) << "x = " << xs[i];
  }
  // Every tail and misalignment: each lane and the scalar tail meet the same bound.
  for_each_length_and_offset([](int64_t n, int64_t offset) {
    const std::vector<float> x = normal(n + offset, static_cast<uint32_t>(n));
    std::vector<float> y = x;
    gelu_row(y.data() + offset, n);
    for (int64_t j = 0; j < n; ++j) {
      const double exact = gelu_exact(x[offset + j]);
      ASSERT_LE(std::abs(y[offset + j] - exact), gelu_bound(x[offset + j]) * std::abs(exact))
          << "n=" << n << " offset=" << offset << " j=" << j;
    }
  });
  // NaN passes through; +∞ stays +∞.
  std::vector<float> special = {std::numeric_limits<float>::quiet_NaN(), kInf, 0.0f};
  gelu_row(special.data(), 3);
  EXPECT_TRUE(std::isnan(special[0]));
  EXPECT_EQ(special[1], kInf);
  EXPECT_EQ(special[2], 0.0f);
}

TEST_P(VecOps, Exp2GivesExactZeroBelowTheNormalRangeAndOneAtZero) {
  EXPECT_EQ(exp2_approx(0.0f), 1.0f);
  EXPECT_EQ(exp2_approx(-126.5f), 0.0f);
  EXPECT_EQ(exp2_approx(-1000.0f), 0.0f);
  EXPECT_EQ(exp2_approx(-kInf), 0.0f);
  EXPECT_FLOAT_EQ(exp2_approx(-1.0f), 0.5f);
  EXPECT_FLOAT_EQ(exp2_approx(10.0f), 1024.0f);
}

TEST_P(VecOps, ExpSubRowMatchesThePolynomialLaneByLaneAndSums) {
  for_each_length_and_offset([](int64_t n, int64_t offset) {
    SCOPED_TRACE("n=" + std::to_string(n) + " offset=" + std::to_string(offset));
    std::vector<float> buf(n + 16), out(n + 16, -1.0f);
    const std::vector<float> x = normal(n, 11 + n);
    std::copy(x.begin(), x.end(), buf.begin() + offset);
    if (n > 3) buf[offset + 2] = -kInf;  // a masked score
    const float m = 2.5f;
    const float sum = exp_sub_row(buf.data() + offset, out.data() + offset, n, m);
    double want_sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      const float want = exp2_approx((buf[offset + j] - m) * 1.44269504088896340736f);
      ASSERT_EQ(out[offset + j], want) << "j=" << j;
      want_sum += want;
    }
    EXPECT_NEAR(sum, want_sum, 1e-6 * (1 + want_sum));
    if (offset > 0) EXPECT_EQ(out[offset - 1], -1.0f);  // nothing written outside the row
    EXPECT_EQ(out[offset + n], -1.0f);
  });
}

// The softmax's exp takes exponents ≤ 0 only and skips Exp2's clamps: exactly 0 far below the
// normal range and for −∞, a subnormal at most just below it, exp2_approx's bits above (vector
// lanes and the scalar tail alike).
TEST_P(VecOps, ExpSubRowIsZeroBelowTheNormalRangeAndExp2Above) {
  const std::vector<float> s = {-kInf,   -1e30f,  -1000.0f, -127.0f, -126.75f, -126.2f,
                                -126.0f, -100.0f, -1.0f,    -0.25f,  0.0f,     -126.9f,
                                -127.5f, -3.0f,   -kInf,    -126.0f, -0.5f};
  std::vector<float> p(s.size(), -1.0f);
  const float sum = exp_sub_row(s.data(), p.data(), static_cast<int64_t>(s.size()), 0.0f, 1.0f);
  double want_sum = 0;
  for (size_t j = 0; j < s.size(); ++j) {
    SCOPED_TRACE("s=" + std::to_string(s[j]));
    if (s[j] < -126.5f)
      EXPECT_EQ(p[j], 0.0f);
    else if (s[j] < -126.0f)
      EXPECT_LT(p[j], 0x1.0p-126f);  // 0 or subnormal
    else
      EXPECT_EQ(p[j], exp2_approx(s[j]));
    want_sum += p[j];
  }
  EXPECT_EQ(p[10], 1.0f);
  EXPECT_NEAR(sum, want_sum, 1e-6);
}

TEST_P(VecOps, ScaleAddBiasMaxAndDotMatchPlainLoops) {
  for_each_length_and_offset([](int64_t n, int64_t offset) {
    SCOPED_TRACE("n=" + std::to_string(n) + " offset=" + std::to_string(offset));
    const std::vector<float> a = normal(n, 3 + n), b = normal(n, 5 + n);
    std::vector<float> x(n + 16), bias(n + 16);
    std::copy(a.begin(), a.end(), x.begin() + offset);
    std::copy(b.begin(), b.end(), bias.begin() + offset);
    if (n > 5) bias[offset + 4] = -kInf;

    std::vector<float> want(a);
    for (int64_t j = 0; j < n; ++j) want[j] *= 0.75f;
    scale_row(x.data() + offset, n, 0.75f);
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(x[offset + j], want[j]);

    // The vector lanes fuse the multiply-add, a scalar tail may not (Debug builds): allow one
    // rounding of each term, ε·(|x| + |1.5·bias|), rather than ulps of a result that may cancel.
    std::vector<float> bound(n);
    for (int64_t j = 0; j < n; ++j) {
      bound[j] = 1.2e-7f * (std::abs(want[j]) + std::abs(1.5f * bias[offset + j]));
      want[j] = std::fma(bias[offset + j], 1.5f, want[j]);  // −∞ where the bias is −∞
    }
    EXPECT_FALSE(add_bias_row(x.data() + offset, bias.data() + offset, n, 1.5f));
    for (int64_t j = 0; j < n; ++j) {
      if (std::isinf(want[j]))
        ASSERT_EQ(x[offset + j], want[j]) << "j=" << j;
      else
        ASSERT_NEAR(x[offset + j], want[j], bound[j]) << "j=" << j;
    }

    float want_max = -kInf;
    uint32_t want_seen = 0, seen = 0;
    for (int64_t j = 0; j < n; ++j) {  // of the row as it now is
      want_max = std::max(want_max, x[offset + j]);
      if (x[offset + j] == -kInf) want_seen |= kSawMinusInf;
    }
    EXPECT_EQ(max_row(x.data() + offset, n, &seen), want_max);
    EXPECT_EQ(seen, want_seen);

    double want_dot = 0;
    for (int64_t j = 0; j < n; ++j) want_dot += static_cast<double>(a[j]) * b[j];
    std::vector<float> a2(n + 16), b2(n + 16);
    std::copy(a.begin(), a.end(), a2.begin() + offset);
    std::copy(b.begin(), b.end(), b2.begin() + offset);
    EXPECT_NEAR(dot_row(a2.data() + offset, b2.data() + offset, n), want_dot, 1e-4 * (1 + n));
  });
}

// Every position of every length, so both the vector body and the scalar tail are seen to look.
TEST_P(VecOps, MaxRowSeesNaNPlusAndMinusInfinityAnywhere) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n = 1; n <= 40; ++n) {
    const std::vector<float> clean = normal(n, 7 + n);
    uint32_t seen = 1234;
    max_row(clean.data(), n, &seen);
    EXPECT_EQ(seen, 0u) << "n=" << n;
    // Huge but finite values are no alarm (a sum of them would overflow).
    std::vector<float> big(n, 3e38f);
    max_row(big.data(), n, &seen);
    EXPECT_EQ(seen, 0u) << "n=" << n;
    for (int64_t at = 0; at < n; ++at) {
      for (const auto& [bad, want] :
           {std::pair{nan, uint32_t{kSawNaNOrPlusInf}}, std::pair{kInf, uint32_t{kSawNaNOrPlusInf}},
            std::pair{-kInf, uint32_t{kSawMinusInf}}}) {
        std::vector<float> x = clean;
        x[at] = bad;
        max_row(x.data(), n, &seen);
        ASSERT_EQ(seen, want) << "n=" << n << " x[" << at << "] = " << bad;
      }
      std::vector<float> both = clean;  // +∞ next to −∞
      both[at] = kInf;
      both[(at + 1) % n] = -kInf;
      max_row(both.data(), n, &seen);
      if (n > 1) ASSERT_EQ(seen, uint32_t{kSawNaNOrPlusInf | kSawMinusInf}) << "n=" << n;
    }
  }
}

// add_bias_row says when a sum with a bias above −∞ came out ±∞ — an overflow that would
// otherwise pass for a mask — and only then.
TEST_P(VecOps, AddBiasRowReportsOverflowNotMasks) {
  for (int64_t n = 1; n <= 40; ++n)
    for (int64_t at = 0; at < n; ++at) {
      std::vector<float> x(n, 1.0f), bias(n, 0.5f);
      bias[at] = -kInf;  // a mask: not an overflow
      EXPECT_FALSE(add_bias_row(x.data(), bias.data(), n, 1.0f)) << "n=" << n;
      EXPECT_EQ(x[at], -kInf);
      std::vector<float> y(n, 1.0f), huge(n, 0.0f);
      y[at] = -3e38f;
      huge[at] = -3e38f;  // −6e38: beyond float32, −∞
      EXPECT_TRUE(add_bias_row(y.data(), huge.data(), n, 1.0f)) << "n=" << n << " at " << at;
      EXPECT_EQ(y[at], -kInf);
    }
}

TEST_P(VecOps, SoftmaxGradRowIsExactlyZeroWhereMaskedAndPassesNaNWhereVisible) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  for_each_length_and_offset([](int64_t n, int64_t offset) {
    SCOPED_TRACE("n=" + std::to_string(n) + " offset=" + std::to_string(offset));
    std::vector<float> p = normal(n, 17 + n), x = normal(n, 19 + n), dp = normal(n, 21 + n);
    std::vector<float> raw = normal(n, 23 + n);
    for (int64_t j = 0; j < n; j += 3) p[j] = 0, x[j] = -kInf, raw[j] = kNaN;  // masked
    if (n > 0) dp[0] = kNaN;
    const bool underflow = n > 2;  // j = 1: visible, weight underflowed, NaN passes through
    if (underflow) p[1] = 0, dp[1] = kNaN;
    std::vector<float> pb(n + 16), xb(n + 16), rb(n + 16), ds(n + 16);
    std::copy(p.begin(), p.end(), pb.begin() + offset);
    std::copy(x.begin(), x.end(), xb.begin() + offset);
    std::copy(raw.begin(), raw.end(), rb.begin() + offset);
    std::copy(dp.begin(), dp.end(), ds.begin() + offset);
    const float got_sum = softmax_grad_row(pb.data() + offset, xb.data() + offset,
                                           rb.data() + offset, ds.data() + offset, n, 0.25f, -2);
    double want_sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      const float g = x[j] == -kInf ? 0.0f : p[j] * (dp[j] - 0.25f);
      if (x[j] != -kInf) want_sum += static_cast<double>(g) * raw[j];
      if (std::isnan(g))
        ASSERT_TRUE(std::isnan(ds[offset + j])) << "j=" << j;
      else
        ASSERT_EQ(ds[offset + j], -2 * g) << "j=" << j;
    }
    if (underflow)
      EXPECT_TRUE(std::isnan(got_sum));
    else
      EXPECT_NEAR(got_sum, want_sum, 1e-4 * (1 + std::abs(want_sum)));
  });
}

TEST_P(VecOps, AllFiniteRowFindsEveryKindOfNonFiniteAtEveryPosition) {
  for (int64_t n = 1; n <= 40; ++n)
    for (int64_t at = 0; at < n; ++at)
      for (float bad : {kInf, -kInf, std::numeric_limits<float>::quiet_NaN()}) {
        std::vector<float> x = normal(n, 23);
        EXPECT_TRUE(all_finite_row(x.data(), n));
        x[at] = bad;
        ASSERT_FALSE(all_finite_row(x.data(), n)) << "n=" << n << " at=" << at << " " << bad;
      }
  std::vector<float> huge(33, 3e38f);  // large but finite: no overflow alarm
  EXPECT_TRUE(all_finite_row(huge.data(), 33));
}

}  // namespace
}  // namespace qkv::cpu
