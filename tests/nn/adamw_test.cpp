// nn::AdamW and nn::clip_grad_norm: updates against hand-computed ones, weight decay only on
// matrices, linear warmup, clipping, and a small regression fitted to 1/100 of its first loss.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numbers>

#include "nn/compare.h"
#include "nn/gradcheck.h"
#include "qkv/nn.h"

namespace qkv::nn {
namespace {

Parameter param(std::string name, Shape shape, std::vector<double> value,
                std::vector<double> grad) {
  return {std::move(name), Tensor::from(shape, value), Tensor::from(shape, grad)};
}

void set(Tensor& t, const std::vector<double>& values) {
  for (std::size_t i = 0; i < values.size(); ++i) t.data<double>()[i] = values[i];
}

TEST(AdamWOptimizer, TwoStepsMatchTheHandComputedUpdate) {
  const double lr = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
  Parameter w = param("w", {2, 2}, {1.0, -2.0, 0.5, 3.0}, {0.2, -0.1, 0.0, 4.0});
  AdamW opt({&w}, {.lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps, .weight_decay = wd});
  const std::vector<double> theta0 = {1.0, -2.0, 0.5, 3.0}, g1 = {0.2, -0.1, 0.0, 4.0},
                            g2 = {-0.3, 0.1, 1.0, 4.0};
  opt.step();
  std::vector<double> theta1(4), m(4), v(4);
  for (int i = 0; i < 4; ++i) {
    // Step 1: m̂ = g, v̂ = g², so the Adam step is lr·g/(|g| + ε) ≈ lr·sign(g).
    m[i] = (1 - b1) * g1[i];
    v[i] = (1 - b2) * g1[i] * g1[i];
    theta1[i] = theta0[i] - lr * wd * theta0[i] -
                lr * (m[i] / (1 - b1)) / (std::sqrt(v[i] / (1 - b2)) + eps);
    EXPECT_NEAR(w.value.value(i), theta1[i], 1e-15) << "step 1, entry " << i;
  }
  set(w.grad, g2);
  opt.step();
  for (int i = 0; i < 4; ++i) {
    m[i] = b1 * m[i] + (1 - b1) * g2[i];
    v[i] = b2 * v[i] + (1 - b2) * g2[i] * g2[i];
    const double mhat = m[i] / (1 - b1 * b1), vhat = v[i] / (1 - b2 * b2);
    const double theta2 = theta1[i] - lr * wd * theta1[i] - lr * mhat / (std::sqrt(vhat) + eps);
    EXPECT_NEAR(w.value.value(i), theta2, 1e-15) << "step 2, entry " << i;
  }
  EXPECT_EQ(opt.steps(), 2);
}

TEST(AdamWOptimizer, HandCheckRejectsAWrongUpdate) {
  // The 1e-15 tolerance above is tight enough to see a missing bias correction of β2.
  Parameter w = param("w", {1, 1}, {1.0}, {0.5});
  AdamW opt({&w}, {.lr = 0.1, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0});
  opt.step();
  const double without_correction = 1.0 - 0.1 * 0.5 / (std::sqrt(0.001 * 0.25) + 1e-8);
  EXPECT_GT(std::abs(w.value.value(0) - without_correction), 1e-3);
}

TEST(AdamWOptimizer, WeightDecaySkipsRankOneParameters) {
  // Zero gradients: the Adam part is 0/(0 + ε) = 0, so only the decay moves anything.
  Parameter matrix = param("w", {1, 2}, {2.0, -4.0}, {0.0, 0.0});
  Parameter bias = param("b", {2}, {2.0, -4.0}, {0.0, 0.0});
  AdamW opt({&matrix, &bias}, {.lr = 0.5, .weight_decay = 0.1});
  opt.step();
  EXPECT_DOUBLE_EQ(matrix.value.value(0), 2.0 * (1 - 0.5 * 0.1));
  EXPECT_DOUBLE_EQ(matrix.value.value(1), -4.0 * (1 - 0.5 * 0.1));
  EXPECT_EQ(bias.value.value(0), 2.0);
  EXPECT_EQ(bias.value.value(1), -4.0);
}

TEST(AdamWOptimizer, LinearWarmupThenConstant) {
  Parameter w = param("w", {1, 1}, {0.0}, {1.0});
  AdamW opt({&w}, {.lr = 0.2, .eps = 0.0, .weight_decay = 0.0, .warmup_steps = 4});
  const double expected[] = {0.05, 0.1, 0.15, 0.2, 0.2, 0.2};
  double before = 0;
  for (double lr : expected) {
    EXPECT_DOUBLE_EQ(opt.learning_rate(), lr);
    opt.step();
    // A constant gradient keeps m̂/√v̂ = 1: each step moves by exactly its learning rate.
    EXPECT_NEAR(before - w.value.value(0), lr, 1e-15);
    before = w.value.value(0);
  }
  AdamW flat({&w}, {.lr = 0.2});
  EXPECT_EQ(flat.learning_rate(), 0.2);
}

// warmup 2, cosine to 0.1·lr at step 6: lr·(0.1 + 0.9·½(1 + cos(π·(s − 2)/4))) for 2 ≤ s ≤ 6.
TEST(AdamWOptimizer, CosineDecayAfterWarmupToTheFloor) {
  Parameter w = param("w", {1, 1}, {0.0}, {1.0});
  AdamW opt({&w}, {.lr = 1.0, .warmup_steps = 2, .decay_steps = 6, .min_lr_ratio = 0.1});
  const double expected[] = {0.5,
                             1.0,
                             0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi / 4)),
                             0.55,
                             0.1 + 0.9 * 0.5 * (1 + std::cos(3 * std::numbers::pi / 4)),
                             0.1,
                             0.1,
                             0.1};
  for (double lr : expected) {
    EXPECT_NEAR(opt.learning_rate(), lr, 1e-15);
    opt.step();
  }
  EXPECT_THROW(AdamW({&w}, {.min_lr_ratio = 1.5}), Error);
  EXPECT_THROW(AdamW({&w}, {.decay_steps = -1}), Error);
}

TEST(AdamWOptimizer, ClipGradNormScalesToMaxNorm) {
  Parameter a = param("a", {2}, {0, 0}, {3.0, 0.0});
  Parameter b = param("b", {1, 1}, {0}, {4.0});
  EXPECT_DOUBLE_EQ(clip_grad_norm({&a, &b}, 10.0), 5.0);  // under: untouched
  EXPECT_EQ(a.grad.value(0), 3.0);
  EXPECT_DOUBLE_EQ(clip_grad_norm({&a, &b}, 1.0), 5.0);
  EXPECT_DOUBLE_EQ(a.grad.value(0), 0.6);
  EXPECT_DOUBLE_EQ(b.grad.value(0), 0.8);
  EXPECT_NEAR(clip_grad_norm({&a, &b}, 1.0), 1.0, 1e-15);
  // Through the optimizer: step() returns the norm before clipping and clips in place.
  set(a.grad, {30.0, 0.0});
  set(b.grad, {40.0});
  AdamW opt({&a, &b}, {.clip_norm = 2.0});
  EXPECT_DOUBLE_EQ(opt.step(), 50.0);
  EXPECT_DOUBLE_EQ(a.grad.value(0), 1.2);
  EXPECT_DOUBLE_EQ(b.grad.value(0), 1.6);
  // A non-finite norm leaves the gradients as they are.
  set(b.grad, {INFINITY});
  EXPECT_TRUE(std::isinf(clip_grad_norm({&a, &b}, 1.0)));
  EXPECT_EQ(a.grad.value(0), 1.2);
  EXPECT_THROW(clip_grad_norm({&a}, 0.0), Error);
}

// y = x·W*ᵀ + b* with noise-free targets, fitted by Linear + AdamW on the mean squared error.
struct Regression {
  Tensor x, target;
  Regression() {
    Rng rng(42);
    Linear truth("truth", 8, 3, true, rng, DType::f32);
    for (int64_t i = 0; i < 3; ++i) truth.bias.value.data<float>()[i] = 0.5f * (i + 1);
    x = test::random_f64({64, 8}, 43).to(DType::f32);
    target = truth.forward(x);
  }
  // Fits for `steps` steps; returns the losses.
  std::vector<double> fit(Linear& model, int steps) const {
    AdamW opt(model.parameters(), {.lr = 0.05, .beta2 = 0.99, .weight_decay = 0.0});
    std::vector<double> losses;
    for (int s = 0; s < steps; ++s) {
      model.zero_grad();
      const Tensor y = model.forward(x);
      Tensor dy(y.shape(), DType::f32);
      double loss = 0;
      for (int64_t i = 0; i < y.numel(); ++i) {
        const double e = y.value(i) - target.value(i);
        loss += e * e / y.numel();
        dy.data<float>()[i] = static_cast<float>(2 * e / y.numel());
      }
      losses.push_back(loss);
      model.backward(dy);
      opt.step();
    }
    return losses;
  }
};

TEST(AdamWOptimizer, FitsALinearRegressionDeterministically) {
  const Regression task;
  Rng r1(7), r2(7);
  Linear a("model", 8, 3, true, r1), b("model", 8, 3, true, r2);
  const std::vector<double> losses = task.fit(a, 200);
  RecordProperty("loss_first", test::sci(losses.front()));
  RecordProperty("loss_last", test::sci(losses.back()));
  EXPECT_LT(losses.back(), losses.front() / 100)
      << "first " << losses.front() << ", last " << losses.back();
  task.fit(b, 200);
  EXPECT_EQ(std::memcmp(a.weight.value.data<float>(), b.weight.value.data<float>(),
                        a.weight.value.numel() * sizeof(float)),
            0);
}

TEST(AdamWOptimizer, RejectsBadOptions) {
  Parameter w = param("w", {1}, {0.0}, {0.0});
  EXPECT_THROW(AdamW({&w}, {.lr = -1.0}), Error);
  EXPECT_THROW(AdamW({&w}, {.beta1 = 1.0}), Error);
  EXPECT_THROW(AdamW({&w}, {.beta2 = -0.1}), Error);
  EXPECT_THROW(AdamW({&w}, {.weight_decay = NAN}), Error);
  EXPECT_THROW(AdamW({&w}, {.warmup_steps = -1}), Error);
  EXPECT_THROW(AdamW({&w}, {.clip_norm = -1.0}), Error);
  Parameter bad{"bad", Tensor({2}, DType::f64), Tensor({3}, DType::f64)};
  EXPECT_THROW(AdamW({&bad}, {}), Error);
}

}  // namespace
}  // namespace qkv::nn
