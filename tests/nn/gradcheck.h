// Finite-difference gradient checks for the nn layers, in float64 (docs/CONVENTIONS.md §1.3).
//
// A layer's output y is reduced to the loss L = Σ r ⊙ y with a fixed random r, so ∂L/∂y = r is
// what backward receives. Each analytic gradient is compared with the central difference
// (L(x + h) − L(x − h)) / 2h, entry by entry (all of them, or an evenly spread sample).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "qkv/nn.h"

namespace qkv::test {

// N(0, 1) float64 values from a seed.
inline Tensor random_f64(Shape shape, uint64_t seed, double scale = 1.0) {
  nn::Rng rng(seed);
  Tensor t(std::move(shape), DType::f64);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = scale * rng.normal();
  return t;
}

// Σ r ⊙ y.
inline double dot_loss(const Tensor& r, const Tensor& y) {
  const Tensor a = r.contiguous(), b = y.contiguous();
  EXPECT_EQ(a.shape(), b.shape());
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += a.data<double>()[i] * b.data<double>()[i];
  return s;
}

// The worst |analytic − numeric| / max(1, |numeric|) over the checked entries of `x` (float64,
// contiguous, perturbed in place and restored). `loss` recomputes L from scratch.
inline double gradient_error(Tensor& x, const Tensor& analytic, const std::function<double()>& loss,
                             int64_t max_entries = 64, double h = 1e-6) {
  EXPECT_EQ(x.shape(), analytic.shape());
  const int64_t n = x.numel();
  const int64_t step = std::max<int64_t>(1, n / max_entries);
  double worst = 0;
  for (int64_t i = 0; i < n; i += step) {
    double& xi = x.data<double>()[i];
    const double saved = xi;
    xi = saved + h;
    const double plus = loss();
    xi = saved - h;
    const double minus = loss();
    xi = saved;
    const double numeric = (plus - minus) / (2 * h);
    const double a = analytic.contiguous().data<double>()[i];
    worst = std::max(worst, std::abs(a - numeric) / std::max(1.0, std::abs(numeric)));
  }
  return worst;
}

// Central differences of a smooth float64 function lose about h² · f''' + ε·|L|/h; with h = 1e-6
// and |L| ≲ 100 that is ≲ 1e-8. Analytic gradients of correct code land near 1e-9.
constexpr double kGradTolerance = 1e-6;

}  // namespace qkv::test
