// The dense layers: float32 fast path against the float64 reference (docs/CONVENTIONS.md §1.1:
// max|fast − ref| ≤ 2·max|naive fp32 − ref| + 1e-6), and the reference against hand-worked values.
#include "nn/dense.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cases/naive_fp32.h"
#include "nn/compare.h"
#include "simd_targets.h"

namespace qkv::nn {
namespace {

using test::max_abs_diff;  // +∞ when the shapes differ

Tensor normal(Shape shape, uint32_t seed, double sd = 1.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(0.0, sd);
  Tensor t(std::move(shape), DType::f64);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = d(rng);
  return t.to(DType::f32).to(DType::f64);  // exactly representable in float32
}

QKV_PER_SIMD_TARGET(Dense);

TEST_P(Dense, ReferenceWorkedByHand) {
  // y = x·Wᵀ + b with x = [1, 2], W = [[1, 0], [1, −1], [0.5, 2]], b = [0, 1, −1].
  const LinearWeights layer{Tensor::from({3, 2}, {1.0, 0.0, 1.0, -1.0, 0.5, 2.0}),
                            Tensor::from({3}, {0.0, 1.0, -1.0})};
  const Tensor y = linear(Tensor::from({1, 2}, {1.0, 2.0}), layer);
  EXPECT_EQ(y.value(0), 1.0);
  EXPECT_EQ(y.value(1), 0.0);
  EXPECT_EQ(y.value(2), 3.5);
  // LayerNorm of [1, 2, 3]: mean 2, var 2/3 → [−√1.5, 0, √1.5], then ·γ + β.
  Tensor x = Tensor::from({1, 3}, {1.0, 2.0, 3.0});
  layer_norm(x, {Tensor::from({3}, {1.0, 2.0, 1.0}), Tensor::from({3}, {0.0, 0.0, 1.0}), 0.0});
  EXPECT_NEAR(x.value(0), -std::sqrt(1.5), 1e-15);
  EXPECT_NEAR(x.value(1), 0.0, 1e-15);
  EXPECT_NEAR(x.value(2), std::sqrt(1.5) + 1, 1e-15);
  // GELU(1) = Φ(1) = 0.8413447460685429; GELU(−1) = −(1 − Φ(1)).
  Tensor g = Tensor::from({2}, {1.0, -1.0});
  gelu(g);
  EXPECT_NEAR(g.value(0), 0.8413447460685429, 1e-15);
  EXPECT_NEAR(g.value(1), -0.15865525393145707, 1e-15);
}

// A plain float32 loop: the naive result whose error sets the tolerance.
Tensor naive_linear_f32(const Tensor& x, const LinearWeights& l) {
  const int64_t n = x.dim(0), in = l.in(), out = l.out();
  Tensor y({n, out}, DType::f64);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      float s = static_cast<float>(l.bias.value(o));
      for (int64_t k = 0; k < in; ++k)
        s += static_cast<float>(x.value(i * in + k)) *
             static_cast<float>(l.weight.value(o * in + k));
      y.data<double>()[i * out + o] = s;
    }
  return y;
}

TEST_P(Dense, FastLinearIsWithinTheFp32BoundOfTheReference) {
  for (const auto& [n, in, out] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 1, 1}, {7, 384, 1152}, {17, 1536, 384}, {3, 21, 97}}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n << " in=" << in << " out=" << out);
    const Tensor x = normal({n, in}, 1);
    const LinearWeights l64{normal({out, in}, 2, 0.05), normal({out}, 3)};
    const Tensor ref = linear(x, l64);
    const Tensor fast = linear(x.to(DType::f32), to(l64, DType::f32));
    const double bound =
        cases::rule_tolerance(max_abs_diff(naive_linear_f32(x, l64), ref), cases::kOutputFactor);
    EXPECT_LE(max_abs_diff(fast, ref), bound);
    // The check has teeth: an error of 1e-4 in one output exceeds it.
    Tensor bad = fast.clone();
    bad.data<float>()[0] += 1e-4f;
    EXPECT_GT(max_abs_diff(bad, ref), bound);
  }
}

TEST_P(Dense, FastLayerNormWithResidualAndGeluMatchTheReference) {
  const Tensor x = normal({33, 384}, 4, 3.0), r = normal({33, 384}, 5);
  const NormWeights n64{normal({384}, 6), normal({384}, 7), 1e-12};
  Tensor ref = x.clone();
  layer_norm(ref, n64, r);
  Tensor fast = x.to(DType::f32);
  layer_norm(fast, to(n64, DType::f32), r.to(DType::f32));
  // Each output is (x − mean)·inv·γ + β in float32: a few roundings of values of size ~10.
  EXPECT_LE(max_abs_diff(fast, ref), 1e-5);
  Tensor g64 = normal({5000}, 8, 4.0);
  Tensor g32 = g64.to(DType::f32);
  gelu(g64);
  gelu(g32);
  EXPECT_LE(max_abs_diff(g32, g64), 4e-6);  // |x| ≤ ~16: a few ε of values up to 16
}

TEST_P(Dense, ShapeErrorsNameTheShapes) {
  const LinearWeights l{Tensor({3, 2}), Tensor({3})};
  EXPECT_THAT(
      [&] {
        linear(Tensor({4, 5}), l);
      },
      ::testing::ThrowsMessage<Error>(::testing::HasSubstr("x has shape [4, 5]")));
  EXPECT_THAT(
      [&] {
        linear(Tensor({4, 2}, DType::f64), l);
      },
      ::testing::ThrowsMessage<Error>(::testing::HasSubstr("input's dtype")));
  Tensor x({2, 4});
  EXPECT_THAT(
      [&] {
        layer_norm(x, {Tensor({3}), Tensor({3}), 1e-5});
      },
      ::testing::ThrowsMessage<Error>(::testing::HasSubstr("[4]")));
}

}  // namespace
}  // namespace qkv::nn
