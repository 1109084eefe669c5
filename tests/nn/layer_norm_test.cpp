// nn::LayerNorm: backward (x, γ, β) against float64 finite differences; float32 against the
// float64 reference within the bound of docs/CONVENTIONS.md §1.1 (a naive float32 LayerNorm sets
// the scale).
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

// γ and β away from 1 and 0, so that a backward that ignored them would fail.
void randomize(LayerNorm& norm, uint64_t seed) {
  const int64_t d = norm.weight.value.dim(0);
  const Tensor g = random_f64({d}, seed, 0.5), b = random_f64({d}, seed + 1);
  for (int64_t j = 0; j < d; ++j) {
    norm.weight.value.data<double>()[j] = 1.0 + g.value(j);
    norm.bias.value.data<double>()[j] = b.value(j);
  }
}

TEST(LayerNormLayer, WorkedByHand) {
  // [1, 2, 3]: mean 2, var 2/3, so x̂ = [−√1.5, 0, √1.5].
  LayerNorm norm("n", 3, 0.0, DType::f64);
  const Tensor y = norm.forward(Tensor::from({1, 3}, {1.0, 2.0, 3.0}));
  EXPECT_NEAR(y.value(0), -std::sqrt(1.5), 1e-15);
  EXPECT_EQ(y.value(1), 0.0);
  EXPECT_NEAR(y.value(2), std::sqrt(1.5), 1e-15);
}

TEST(LayerNormLayer, GradientsMatchFiniteDifferences) {
  for (int64_t d : {1, 2, 6, 17}) {
    SCOPED_TRACE("d = " + std::to_string(d));
    LayerNorm norm("n", d, 1e-5, DType::f64);
    randomize(norm, 10 + d);
    Tensor x = random_f64({2, 3, d}, 2, 2.0);
    const Tensor r = random_f64({2, 3, d}, 3);
    norm.forward(x);
    const Tensor dx = norm.backward(r);
    auto loss = [&] { return dot_loss(r, norm.forward(x)); };
    const double ex = gradient_error(x, dx, loss);
    const double eg = gradient_error(norm.weight.value, norm.weight.grad, loss);
    const double eb = gradient_error(norm.bias.value, norm.bias.grad, loss);
    EXPECT_LE(ex, test::kGradTolerance);
    EXPECT_LE(eg, test::kGradTolerance);
    EXPECT_LE(eb, test::kGradTolerance);
    RecordProperty("error_dx_d" + std::to_string(d), test::sci(ex));
    RecordProperty("error_dgamma_d" + std::to_string(d), test::sci(eg));
    RecordProperty("error_dbeta_d" + std::to_string(d), test::sci(eb));
  }
}

TEST(LayerNormLayer, GradientCheckRejectsAWrongGradient) {
  LayerNorm norm("n", 5, 1e-5, DType::f64);
  randomize(norm, 1);
  Tensor x = random_f64({4, 5}, 2);
  const Tensor r = random_f64({4, 5}, 3);
  norm.forward(x);
  Tensor dx = norm.backward(r);
  norm.weight.grad.data<double>()[2] += 1e-3;
  dx.data<double>()[7] += 1e-3;
  auto loss = [&] { return dot_loss(r, norm.forward(x)); };
  EXPECT_GT(gradient_error(x, dx, loss), 1e-4);
  EXPECT_GT(gradient_error(norm.weight.value, norm.weight.grad, loss), 1e-4);
}

// The plain float32 LayerNorm and its backward, one row at a time: the "naive fp32" N of
// docs/CONVENTIONS.md §1.1.
struct NaiveFloat32 {
  Tensor y, dx;
  NaiveFloat32(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& beta,
               float eps) {
    const int64_t d = x.dim(-1), n = x.numel() / d;
    y = Tensor(x.shape(), DType::f32);
    dx = Tensor(x.shape(), DType::f32);
    for (int64_t i = 0; i < n; ++i) {
      float mean = 0, var = 0, mg = 0, mgh = 0;
      for (int64_t j = 0; j < d; ++j) mean += static_cast<float>(x.value(i * d + j));
      mean /= d;
      for (int64_t j = 0; j < d; ++j) {
        const float c = static_cast<float>(x.value(i * d + j)) - mean;
        var += c * c;
      }
      const float inv = 1.0f / std::sqrt(var / d + eps);
      for (int64_t j = 0; j < d; ++j) {
        const float h = (static_cast<float>(x.value(i * d + j)) - mean) * inv;
        const float g = static_cast<float>(dy.value(i * d + j) * gamma.value(j));
        y.data<float>()[i * d + j] =
            h * static_cast<float>(gamma.value(j)) + static_cast<float>(beta.value(j));
        mg += g;
        mgh += g * h;
      }
      mg /= d;
      mgh /= d;
      for (int64_t j = 0; j < d; ++j) {
        const float h = (static_cast<float>(x.value(i * d + j)) - mean) * inv;
        const float g = static_cast<float>(dy.value(i * d + j) * gamma.value(j));
        dx.data<float>()[i * d + j] = inv * (g - mg - h * mgh);
      }
    }
  }
};

TEST(LayerNormLayer, Float32MatchesFloat64) {
  for (int64_t d : {1, 17, 97, 267}) {
    SCOPED_TRACE("d = " + std::to_string(d));
    LayerNorm n64("n", d, 1e-5, DType::f64);
    randomize(n64, 5);
    LayerNorm n32("n", d, 1e-5, DType::f32);
    n32.weight.value = n64.weight.value.to(DType::f32);
    n32.bias.value = n64.bias.value.to(DType::f32);
    // Inputs exactly representable in float32, shifted ×5 off zero (the mean must cancel).
    Tensor x = random_f64({9, d}, 6, 5.0);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<double>()[i] += 5.0;
    x = x.to(DType::f32).to(DType::f64);
    const Tensor dy = random_f64({9, d}, 7).to(DType::f32).to(DType::f64);
    const Tensor y64 = n64.forward(x), dx64 = n64.backward(dy);
    const Tensor y32 = n32.forward(x.to(DType::f32)), dx32 = n32.backward(dy.to(DType::f32));
    const NaiveFloat32 naive(x, dy, n64.weight.value, n64.bias.value, 1e-5f);
    using test::max_abs_diff;
    EXPECT_LE(max_abs_diff(y32, y64), 2 * max_abs_diff(naive.y, y64) + 1e-6);
    EXPECT_LE(max_abs_diff(dx32, dx64), 4 * max_abs_diff(naive.dx, dx64) + 1e-6);
    // Parameter gradients are sums over rows of exact float32 products.
    EXPECT_LE(max_abs_diff(n32.weight.grad, n64.weight.grad), 1e-5);
    EXPECT_LE(max_abs_diff(n32.bias.grad, n64.bias.grad), 1e-5);
  }
}

TEST(LayerNormLayer, RejectsAWrongShapeOrDtype) {
  LayerNorm norm("enc.norm", 4);
  EXPECT_THROW(norm.forward(Tensor({2, 5}, DType::f32)), Error);
  EXPECT_THROW(norm.forward(Tensor({2, 4}, DType::f64)), Error);
  EXPECT_THROW(norm.backward(Tensor({2, 4}, DType::f32)), Error);  // before forward
  norm.forward(Tensor({2, 4}, DType::f32));
  EXPECT_THROW(norm.backward(Tensor({3, 4}, DType::f32)), Error);
}

}  // namespace
}  // namespace qkv::nn
