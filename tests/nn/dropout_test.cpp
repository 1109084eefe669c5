// nn::Dropout: inverted dropout's mask, its statistics, and its backward.
#include <gtest/gtest.h>

#include "nn/gradcheck.h"
#include "qkv/nn.h"

namespace qkv::nn {
namespace {

TEST(DropoutLayer, KeepsAboutOneMinusPAndScalesTheRest) {
  for (double p : {0.1, 0.3, 0.5, 0.9}) {
    SCOPED_TRACE("p = " + std::to_string(p));
    Dropout drop(p);
    Rng rng(11);
    const int64_t n = 100000;
    const Tensor x = Tensor::full({n}, 2.0, DType::f32);
    const Tensor y = drop.forward(x, true, rng);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (y.value(i) == 0) continue;
      ++kept;
      EXPECT_FLOAT_EQ(y.value(i), 2.0 / (1.0 - p)) << "entry " << i;
    }
    // Binomial(n, 1 − p): 5 standard deviations is ≤ 0.008 for every p here.
    const double sd = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - p, 5 * sd);
  }
}

TEST(DropoutLayer, BackwardUsesTheForwardMask) {
  Dropout drop(0.4);
  Rng rng(3);
  const Tensor x = test::random_f64({4, 5, 6}, 1);
  const Tensor y = drop.forward(x, true, rng);
  const Tensor dy = test::random_f64({4, 5, 6}, 2);
  const Tensor dx = drop.backward(dy);
  int64_t dropped = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double scale = y.value(i) / x.value(i);  // 0 or 1/(1 − p)
    dropped += scale == 0;
    EXPECT_DOUBLE_EQ(dx.value(i), dy.value(i) * scale) << "entry " << i;
  }
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, x.numel());
}

TEST(DropoutLayer, EvaluationAndZeroPAreTheIdentityAndDrawNothing) {
  const Tensor x = test::random_f64({3, 7}, 4);
  for (auto [p, training] : {std::pair{0.5, false}, std::pair{0.0, true}}) {
    Dropout drop(p);
    Rng rng(9), untouched(9);
    const Tensor y = drop.forward(x, training, rng);
    EXPECT_EQ(rng.next(), untouched.next()) << "no random numbers drawn";
    for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(y.value(i), x.value(i));
    const Tensor dy = test::random_f64({3, 7}, 5);
    const Tensor dx = drop.backward(dy);
    for (int64_t i = 0; i < dy.numel(); ++i) EXPECT_EQ(dx.value(i), dy.value(i));
  }
}

TEST(DropoutLayer, SameSeedSameMaskOtherSeedOtherMask) {
  const Tensor x = Tensor::full({1000}, 1.0, DType::f32);
  Dropout drop(0.5);
  Rng a(21), b(21), c(22);
  const Tensor ya = drop.forward(x, true, a), yb = drop.forward(x, true, b),
               yc = drop.forward(x, true, c);
  int64_t same_ab = 0, same_ac = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    same_ab += ya.value(i) == yb.value(i);
    same_ac += ya.value(i) == yc.value(i);
  }
  EXPECT_EQ(same_ab, x.numel());
  EXPECT_LT(same_ac, x.numel() * 6 / 10);  // independent masks agree on about half the entries
}

TEST(DropoutLayer, RejectsABadPOrABadGradient) {
  Rng rng(1);
  const Tensor x = Tensor::full({4}, 1.0, DType::f32);
  for (double p : {-0.1, 1.0, std::nan("")}) EXPECT_THROW(Dropout(p).forward(x, true, rng), Error);
  Dropout drop(0.5);
  drop.forward(x, true, rng);
  EXPECT_THROW(drop.backward(Tensor::full({5}, 1.0, DType::f32)), Error);
}

}  // namespace
}  // namespace qkv::nn
