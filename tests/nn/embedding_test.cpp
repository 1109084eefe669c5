// nn::Embedding (lookup, scatter-add backward with repeated ids) and sinusoidal_positions.
#include <gtest/gtest.h>

#include <cmath>

#include "nn/compare.h"
#include "nn/gradcheck.h"
#include "qkv/nn.h"

namespace qkv::nn {
namespace {

using test::dot_loss;
using test::gradient_error;
using test::random_f64;

TEST(EmbeddingLayer, LooksUpRows) {
  Rng rng(1);
  Embedding emb("tok", 6, 4, rng, DType::f32);
  const Tensor y = emb.forward({{5, 0, 5}, {2, 3, 1}});
  ASSERT_EQ(y.shape(), (Shape{2, 3, 4}));
  const int32_t ids[] = {5, 0, 5, 2, 3, 1};
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t j = 0; j < 4; ++j)
      EXPECT_EQ(y.value(r * 4 + j), emb.weight.value.value(ids[r] * 4 + j)) << r << ", " << j;
}

TEST(EmbeddingLayer, GradientsMatchFiniteDifferencesWithRepeatedIds) {
  Rng rng(2);
  Embedding emb("tok", 7, 3, rng, DType::f64);
  // Id 4 three times, 1 twice; 0, 5 and 6 never (their gradient must stay exactly 0).
  const std::vector<std::vector<int32_t>> ids = {{4, 1, 4}, {2, 4, 1}, {3, 3, 4}};
  const Tensor r = random_f64({3, 3, 3}, 3);
  emb.forward(ids);
  emb.backward(r);
  const double err = gradient_error(emb.weight.value, emb.weight.grad,
                                    [&] { return dot_loss(r, emb.forward(ids)); });
  EXPECT_LE(err, test::kGradTolerance);
  RecordProperty("error_dweight", test::sci(err));
  for (int32_t unused : {0, 5, 6})
    for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(emb.weight.grad.value(unused * 3 + j), 0.0);
  // Id 4's row collects four dy rows: (0, 0), (0, 2), (1, 1), (2, 2).
  for (int64_t j = 0; j < 3; ++j)
    EXPECT_NEAR(emb.weight.grad.value(4 * 3 + j),
                r.value(0 * 3 + j) + r.value(2 * 3 + j) + r.value(4 * 3 + j) + r.value(8 * 3 + j),
                1e-15);
}

TEST(EmbeddingLayer, GradientCheckRejectsAWrongGradient) {
  Rng rng(2);
  Embedding emb("tok", 5, 2, rng, DType::f64);
  const std::vector<std::vector<int32_t>> ids = {{1, 1, 3}};
  const Tensor r = random_f64({1, 3, 2}, 3);
  emb.forward(ids);
  emb.backward(r);
  emb.weight.grad.data<double>()[2] += 1e-3;  // id 1's first entry
  EXPECT_GT(gradient_error(emb.weight.value, emb.weight.grad,
                           [&] { return dot_loss(r, emb.forward(ids)); }),
            1e-4);
}

TEST(EmbeddingLayer, Float32MatchesFloat64) {
  Rng r32(4), r64(4);
  Embedding e32("tok", 9, 5, r32, DType::f32), e64("tok", 9, 5, r64, DType::f64);
  const std::vector<std::vector<int32_t>> ids = {{8, 0, 8, 3}};
  const Tensor dy = random_f64({1, 4, 5}, 5);
  const Tensor y32 = e32.forward(ids), y64 = e64.forward(ids);
  e32.backward(dy.to(DType::f32));
  e64.backward(dy);
  EXPECT_LE(test::max_abs_diff(y32, y64), 1e-6);  // the float32 table is the rounded float64 one
  EXPECT_LE(test::max_abs_diff(e32.weight.grad, e64.weight.grad), 1e-6);
}

TEST(EmbeddingLayer, RejectsBadIdsAndRaggedBatches) {
  Rng rng(1);
  Embedding emb("tok", 4, 2, rng);
  EXPECT_THROW(emb.forward({{0, 4}}), Error);
  EXPECT_THROW(emb.forward({{-1}}), Error);
  EXPECT_THROW(emb.forward({{0, 1}, {2}}), Error);
  try {
    emb.forward({{0, 1}, {2, 7}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("id 7 at [1, 1]"), std::string::npos) << e.what();
  }
  emb.forward({{0, 1}});
  EXPECT_THROW(emb.backward(Tensor({1, 3, 2}, DType::f32)), Error);
  const Tensor empty = emb.forward({});
  EXPECT_EQ(empty.shape(), (Shape{0, 0, 2}));
}

TEST(SinusoidalPositions, MatchesTheFormula) {
  const Tensor pe = sinusoidal_positions(50, 8, DType::f64);
  ASSERT_EQ(pe.shape(), (Shape{50, 8}));
  for (int64_t p = 0; p < 50; ++p)
    for (int64_t i = 0; i < 4; ++i) {
      const double angle = p / std::pow(10000.0, 2.0 * i / 8);
      EXPECT_DOUBLE_EQ(pe.value(p * 8 + 2 * i), std::sin(angle));
      EXPECT_DOUBLE_EQ(pe.value(p * 8 + 2 * i + 1), std::cos(angle));
    }
  // Hand values: position 0 is [0, 1, 0, 1, ...]; at p = 3, i = 1 the angle is 3/10000^(1/4) = 0.3.
  EXPECT_EQ(pe.value(0), 0.0);
  EXPECT_EQ(pe.value(1), 1.0);
  EXPECT_NEAR(pe.value(3 * 8 + 2), std::sin(0.3), 1e-15);
  EXPECT_NEAR(pe.value(3 * 8 + 3), std::cos(0.3), 1e-15);
}

TEST(SinusoidalPositions, OddWidthAndFloat32) {
  const Tensor odd = sinusoidal_positions(4, 5, DType::f64);
  EXPECT_NEAR(odd.value(2 * 5 + 4), std::sin(2 / std::pow(10000.0, 4.0 / 5)), 1e-15);
  const Tensor f32 = sinusoidal_positions(4, 5);
  EXPECT_EQ(f32.dtype(), DType::f32);
  for (int64_t i = 0; i < odd.numel(); ++i)
    EXPECT_EQ(f32.value(i), static_cast<float>(odd.value(i)));
  EXPECT_EQ(sinusoidal_positions(0, 4).shape(), (Shape{0, 4}));
  EXPECT_THROW(sinusoidal_positions(-1, 4), Error);
}

}  // namespace
}  // namespace qkv::nn
