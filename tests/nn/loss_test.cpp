// nn::cross_entropy: worked values, ∂loss/∂logits against float64 finite differences (label
// smoothing, ignored rows), stability at large logits, argmax counting, float32 against float64.
#include <gtest/gtest.h>

#include <cmath>

#include "nn/compare.h"
#include "nn/gradcheck.h"
#include "qkv/nn.h"

namespace qkv::nn {
namespace {

using test::gradient_error;
using test::random_f64;

TEST(CrossEntropy, WorkedByHand) {
  // Row 0: logits [0, ln 3] → p = [1/4, 3/4], target 1. Row 1 ignored.
  const Tensor logits = Tensor::from({2, 2}, {0.0, std::log(3.0), 5.0, -5.0});
  const CrossEntropy plain = cross_entropy(logits, {1, -1});
  EXPECT_NEAR(plain.loss, -std::log(0.75), 1e-15);
  EXPECT_EQ(plain.count, 1);
  EXPECT_EQ(plain.correct, 1);
  EXPECT_NEAR(plain.dlogits.value(0), 0.25, 1e-15);  // p − one-hot
  EXPECT_NEAR(plain.dlogits.value(1), -0.25, 1e-15);
  EXPECT_EQ(plain.dlogits.value(2), 0.0);
  EXPECT_EQ(plain.dlogits.value(3), 0.0);
  // ε = 0.5 over V = 2: q = [0.25, 0.75] = p, so the gradient vanishes and the loss is H(q).
  const CrossEntropy smooth = cross_entropy(logits, {1, -1}, 0.5);
  EXPECT_NEAR(smooth.loss, -0.25 * std::log(0.25) - 0.75 * std::log(0.75), 1e-15);
  EXPECT_NEAR(smooth.dlogits.value(0), 0.0, 1e-15);
  EXPECT_NEAR(smooth.dlogits.value(1), 0.0, 1e-15);
}

TEST(CrossEntropy, GradientMatchesFiniteDifferences) {
  for (double eps : {0.0, 0.1, 1.0}) {
    SCOPED_TRACE("label_smoothing = " + std::to_string(eps));
    Tensor logits = random_f64({6, 7}, 1, 3.0);
    const std::vector<int32_t> targets = {3, -1, 0, 6, -1, 3};
    const CrossEntropy ce = cross_entropy(logits, targets, eps);
    EXPECT_EQ(ce.count, 4);
    const double err = gradient_error(logits, ce.dlogits,
                                      [&] { return cross_entropy(logits, targets, eps).loss; });
    EXPECT_LE(err, test::kGradTolerance);
    RecordProperty("error_eps_" + std::to_string(static_cast<int>(eps * 10)), test::sci(err));
    for (int64_t j = 0; j < 7; ++j) {  // ignored rows: exactly zero
      EXPECT_EQ(ce.dlogits.value(1 * 7 + j), 0.0);
      EXPECT_EQ(ce.dlogits.value(4 * 7 + j), 0.0);
    }
  }
}

TEST(CrossEntropy, GradientCheckRejectsAWrongGradient) {
  Tensor logits = random_f64({3, 4}, 1);
  const std::vector<int32_t> targets = {0, 1, 2};
  CrossEntropy ce = cross_entropy(logits, targets, 0.1);
  ce.dlogits.data<double>()[5] += 1e-3;
  EXPECT_GT(
      gradient_error(logits, ce.dlogits, [&] { return cross_entropy(logits, targets, 0.1).loss; }),
      1e-4);
}

TEST(CrossEntropy, StableAtLargeLogitsAndShiftInvariant) {
  const Tensor base = random_f64({3, 5}, 2);
  Tensor shifted = base.clone();
  for (int64_t i = 0; i < shifted.numel(); ++i) shifted.data<double>()[i] += i < 5 ? 1e4 : -1e4;
  const std::vector<int32_t> targets = {1, 4, 0};
  const CrossEntropy a = cross_entropy(base, targets, 0.2),
                     b = cross_entropy(shifted, targets, 0.2);
  ASSERT_TRUE(std::isfinite(b.loss));
  EXPECT_NEAR(a.loss, b.loss, 1e-11);  // the shift costs ~1e4·ε_f64 of the inputs' precision
  EXPECT_LE(test::max_abs_diff(a.dlogits, b.dlogits), 1e-11);
  // float32 at ±1000: no overflow in exp.
  const Tensor big = Tensor::from({1, 3}, {1000.0f, -1000.0f, 999.0f});
  const CrossEntropy c = cross_entropy(big, {2});
  EXPECT_NEAR(c.loss, std::log1p(std::exp(1.0)), 1e-6);  // −log(e⁻¹/(1 + e⁻¹))
}

TEST(CrossEntropy, CountsArgmaxHitsAndHandlesNothingToCount) {
  const Tensor logits = Tensor::from({4, 3}, {0.0, 2.0, 1.0,  //
                                              5.0, 5.0, 1.0,  // tie: the first maximum, 0
                                              0.0, 0.0, 9.0,  //
                                              1.0, 0.0, 0.0});
  const CrossEntropy ce = cross_entropy(logits, {1, 0, 1, -1});
  EXPECT_EQ(ce.count, 3);
  EXPECT_EQ(ce.correct, 2);
  const CrossEntropy none = cross_entropy(logits, {-1, -1, -1, -1}, 0.1);
  EXPECT_EQ(none.count, 0);
  EXPECT_EQ(none.loss, 0.0);
  EXPECT_EQ(test::max_abs(none.dlogits), 0.0);
}

TEST(CrossEntropy, Float32MatchesFloat64) {
  const Tensor logits = random_f64({17, 97}, 3, 4.0);
  std::vector<int32_t> targets;
  for (int i = 0; i < 17; ++i) targets.push_back(i % 5 == 4 ? -1 : (i * 13) % 97);
  const CrossEntropy c64 = cross_entropy(logits, targets, 0.1);
  const CrossEntropy c32 = cross_entropy(logits.to(DType::f32), targets, 0.1);
  // Computed in float64 from float32-rounded logits (relative error 6e-8 of |x| ≤ 20).
  EXPECT_NEAR(c32.loss, c64.loss, 1e-5);
  EXPECT_LE(test::max_abs_diff(c32.dlogits, c64.dlogits), 1e-7);
  EXPECT_EQ(c32.correct, c64.correct);
}

TEST(CrossEntropy, RejectsBadArguments) {
  const Tensor logits({2, 3}, DType::f32);
  EXPECT_THROW(cross_entropy(logits, {0}), Error);
  EXPECT_THROW(cross_entropy(logits, {0, 3}), Error);
  EXPECT_THROW(cross_entropy(logits, {0, -2}), Error);
  EXPECT_THROW(cross_entropy(logits, {0, 1}, 1.5), Error);
  EXPECT_THROW(cross_entropy(Tensor({6}, DType::f32), {0}), Error);
}

}  // namespace
}  // namespace qkv::nn
