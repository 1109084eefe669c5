// nn::Linear: backward against float64 finite differences; float32 against float64.
#include <gtest/gtest.h>

#include "nn/gradcheck.h"
#include "qkv/nn.h"

namespace qkv::nn {
namespace {

using test::dot_loss;
using test::gradient_error;
using test::random_f64;

TEST(LinearLayer, GradientsMatchFiniteDifferences) {
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "with bias" : "without bias");
    Rng rng(1);
    Linear layer("l", 7, 5, bias, rng, DType::f64);
    Tensor x = random_f64({2, 3, 7}, 2);
    const Tensor r = random_f64({2, 3, 5}, 3);
    layer.forward(x);
    const Tensor dx = layer.backward(r);
    auto loss = [&] { return dot_loss(r, layer.forward(x)); };
    EXPECT_LE(gradient_error(x, dx, loss), test::kGradTolerance);
    EXPECT_LE(gradient_error(layer.weight.value, layer.weight.grad, loss), test::kGradTolerance);
    if (bias)
      EXPECT_LE(gradient_error(layer.bias.value, layer.bias.grad, loss), test::kGradTolerance);
  }
}

TEST(LinearLayer, GradientCheckRejectsAWrongGradient) {
  Rng rng(1);
  Linear layer("l", 4, 3, true, rng, DType::f64);
  Tensor x = random_f64({5, 4}, 2);
  const Tensor r = random_f64({5, 3}, 3);
  layer.forward(x);
  Tensor dx = layer.backward(r);
  dx.data<double>()[0] += 1e-3;  // one entry off by 1e-3
  EXPECT_GT(gradient_error(x, dx, [&] { return dot_loss(r, layer.forward(x)); }), 1e-4);
}

TEST(LinearLayer, GradientsAccumulateAcrossBackwardCalls) {
  Rng rng(4);
  Linear layer("l", 3, 2, true, rng, DType::f64);
  const Tensor x = random_f64({4, 3}, 5), r = random_f64({4, 2}, 6);
  layer.forward(x);
  layer.backward(r);
  const Tensor once = layer.weight.grad.clone();
  layer.forward(x);
  layer.backward(r);
  for (int64_t i = 0; i < once.numel(); ++i)
    EXPECT_DOUBLE_EQ(layer.weight.grad.data<double>()[i], 2 * once.data<double>()[i]);
}

TEST(LinearLayer, Float32MatchesFloat64) {
  Rng r64(7), r32(7);
  Linear l64("l", 33, 17, true, r64, DType::f64);
  Linear l32("l", 33, 17, true, r32, DType::f32);
  const Tensor x = random_f64({9, 33}, 8), dy = random_f64({9, 17}, 9);
  const Tensor y64 = l64.forward(x), y32 = l32.forward(x.to(DType::f32));
  const Tensor dx64 = l64.backward(dy), dx32 = l32.backward(dy.to(DType::f32));
  for (int64_t i = 0; i < y64.numel(); ++i) EXPECT_NEAR(y32.value(i), y64.value(i), 1e-5);
  for (int64_t i = 0; i < dx64.numel(); ++i) EXPECT_NEAR(dx32.value(i), dx64.value(i), 1e-5);
  for (int64_t i = 0; i < l64.weight.grad.numel(); ++i)
    EXPECT_NEAR(l32.weight.grad.value(i), l64.weight.grad.value(i), 1e-4);
}

}  // namespace
}  // namespace qkv::nn
