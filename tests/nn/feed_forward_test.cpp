// nn::FeedForward (Linear → ReLU/GELU → dropout → Linear): backward against float64 finite
// differences for both activations, with and without dropout; the activations' derivatives on
// their own; float32 against float64.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/dense.h"
#include "kernels/reference/dense.h"
#include "nn/compare.h"
#include "nn/gradcheck.h"
#include "qkv/nn.h"

namespace qkv::nn {
namespace {

using test::dot_loss;
using test::gradient_error;
using test::random_f64;

const char* name(Activation a) { return a == Activation::relu ? "relu" : "gelu"; }

TEST(FeedForwardLayer, GradientsMatchFiniteDifferences) {
  for (Activation act : {Activation::relu, Activation::gelu})
    for (double p : {0.0, 0.3}) {
      SCOPED_TRACE(std::string(name(act)) + ", dropout " + std::to_string(p));
      Rng init(1);
      FeedForward ffn("ffn", 6, 11, act, p, init, DType::f64);
      for (Parameter* q : ffn.parameters())  // biases ≠ 0 too
        if (q->value.rank() == 1) q->value = random_f64(q->value.shape(), 9, 0.5);
      Tensor x = random_f64({2, 3, 6}, 2);
      const Tensor r = random_f64({2, 3, 6}, 3);
      // Each forward draws the dropout mask from a fresh Rng(5): the loss sees the same mask that
      // the backward used.
      auto run = [&] {
        Rng masks(5);
        return ffn.forward(x, true, masks);
      };
      run();
      const Tensor dx = ffn.backward(r);
      auto loss = [&] { return dot_loss(r, run()); };
      double worst = gradient_error(x, dx, loss);
      for (Parameter* q : ffn.parameters())
        worst = std::max(worst, gradient_error(q->value, q->grad, loss));
      EXPECT_LE(worst, test::kGradTolerance);
      RecordProperty(std::string("error_") + name(act) + (p > 0 ? "_dropout" : ""),
                     test::sci(worst));
    }
}

TEST(FeedForwardLayer, GradientCheckRejectsAWrongGradient) {
  Rng init(1);
  FeedForward ffn("ffn", 4, 8, Activation::gelu, 0.0, init, DType::f64);
  Tensor x = random_f64({5, 4}, 2);
  const Tensor r = random_f64({5, 4}, 3);
  ffn.forward(x, false, init);
  ffn.backward(r);
  ffn.in.weight.grad.data<double>()[3] += 1e-3;
  EXPECT_GT(gradient_error(ffn.in.weight.value, ffn.in.weight.grad,
                           [&] { return dot_loss(r, ffn.forward(x, false, init)); }),
            1e-4);
}

// GELU'(x) = Φ(x) + x·φ(x) against central differences of GELU, both kernels.
TEST(FeedForwardLayer, GeluDerivative) {
  const int64_t n = 401;
  std::vector<double> x(n), ones(n, 1.0), d64(n);
  for (int64_t i = 0; i < n; ++i) x[i] = -10.0 + 0.05 * i;
  reference::gelu_backward(d64.data(), ones.data(), x.data(), n);
  std::vector<float> x32(x.begin(), x.end()), ones32(n, 1.0f), d32(n);
  cpu::gelu_backward(d32.data(), ones32.data(), x32.data(), n);
  const double h = 1e-5;
  for (int64_t i = 0; i < n; ++i) {
    double plus = x[i] + h, minus = x[i] - h;
    reference::gelu(&plus, &plus, 1);
    reference::gelu(&minus, &minus, 1);
    EXPECT_NEAR(d64[i], (plus - minus) / (2 * h), 1e-9) << "x = " << x[i];
    // float32: erfc and exp to a few ulps, the sum of two terms of size ≤ 1.1.
    EXPECT_NEAR(d32[i], d64[i], 1e-6) << "x = " << x[i];
  }
  EXPECT_NEAR(d64[200], 0.5, 1e-15);  // GELU'(0) = Φ(0)
}

TEST(FeedForwardLayer, ReluPassesNaNAndGradientOnlyWherePositive) {
  const double nan = std::nan("");
  std::vector<double> x = {-1.0, 0.0, 2.0, nan}, y(4), dy = {5.0, 5.0, 5.0, 5.0}, dx(4);
  reference::relu(y.data(), x.data(), 4);
  reference::relu_backward(dx.data(), dy.data(), x.data(), 4);
  EXPECT_EQ(y[0], 0.0);
  EXPECT_EQ(y[1], 0.0);
  EXPECT_EQ(y[2], 2.0);
  EXPECT_TRUE(std::isnan(y[3]));
  EXPECT_EQ(dx, (std::vector<double>{0.0, 0.0, 5.0, 0.0}));
  std::vector<float> xf(x.begin(), x.end()), yf(4);
  cpu::relu(yf.data(), xf.data(), 4);
  EXPECT_TRUE(std::isnan(yf[3]));
  EXPECT_EQ(yf[2], 2.0f);
}

TEST(FeedForwardLayer, Float32MatchesFloat64) {
  for (Activation act : {Activation::relu, Activation::gelu}) {
    SCOPED_TRACE(name(act));
    Rng r64(7), r32(7);
    FeedForward f64("ffn", 33, 97, act, 0.2, r64, DType::f64);
    FeedForward f32("ffn", 33, 97, act, 0.2, r32, DType::f32);
    const Tensor x = random_f64({9, 33}, 8), dy = random_f64({9, 33}, 9);
    Rng m64(3), m32(3);  // the same dropout masks
    const Tensor y64 = f64.forward(x, true, m64), y32 = f32.forward(x.to(DType::f32), true, m32);
    const Tensor dx64 = f64.backward(dy), dx32 = f32.backward(dy.to(DType::f32));
    // Each output sums ~100 float32 products of size ≲ 1: a few 1e-6 of rounding.
    EXPECT_LE(test::max_abs_diff(y32, y64), 2e-5);
    EXPECT_LE(test::max_abs_diff(dx32, dx64), 2e-5);
    const auto p64 = f64.parameters(), p32 = f32.parameters();
    ASSERT_EQ(p64.size(), 4u);
    for (std::size_t i = 0; i < p64.size(); ++i)
      EXPECT_LE(test::max_abs_diff(p32[i]->grad, p64[i]->grad), 1e-4) << p64[i]->name;
  }
}

TEST(FeedForwardLayer, ParameterNames) {
  Rng rng(1);
  FeedForward ffn("enc.0.ffn", 4, 8, Activation::relu, 0.0, rng);
  std::vector<std::string> names;
  for (Parameter* p : ffn.parameters()) names.push_back(p->name);
  EXPECT_EQ(names, (std::vector<std::string>{"enc.0.ffn.in.weight", "enc.0.ffn.in.bias",
                                             "enc.0.ffn.out.weight", "enc.0.ffn.out.bias"}));
  EXPECT_EQ(ffn.parameter_count(), 4 * 8 + 8 + 8 * 4 + 4);
}

}  // namespace
}  // namespace qkv::nn
