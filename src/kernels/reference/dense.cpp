#include "kernels/reference/dense.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace qkv::reference {
namespace {

// The mean of a row and 1/√(var + eps), var the biased variance about that mean (two passes).
void row_mean_inv_std(const double* row, int64_t d, double eps, double& mean, double& inv) {
  mean = 0;
  for (int64_t j = 0; j < d; ++j) mean += row[j];
  mean /= static_cast<double>(d);
  double var = 0;
  for (int64_t j = 0; j < d; ++j) var += (row[j] - mean) * (row[j] - mean);
  var /= static_cast<double>(d);
  inv = 1.0 / std::sqrt(var + eps);
}

}  // namespace

void linear(double* y, const double* x, const double* w, const double* b, int64_t n, int64_t in,
            int64_t out) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double sum = b != nullptr ? b[o] : 0.0;
      for (int64_t k = 0; k < in; ++k) sum += x[i * in + k] * w[o * in + k];
      y[i * out + o] = sum;
    }
}

void linear_backward(double* dx, double* dw, double* db, const double* dy, const double* x,
                     const double* w, int64_t n, int64_t in, int64_t out) {
  if (dx != nullptr) std::fill(dx, dx + n * in, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      const double g = dy[i * out + o];
      if (db != nullptr) db[o] += g;
      for (int64_t k = 0; k < in; ++k) {
        dw[o * in + k] += g * x[i * in + k];
        if (dx != nullptr) dx[i * in + k] += g * w[o * in + k];
      }
    }
}

void layer_norm(double* y, const double* x, const double* gamma, const double* beta, int64_t n,
                int64_t d, double eps) {
  for (int64_t i = 0; i < n; ++i) {
    const double* row = x + i * d;
    double mean, inv;
    row_mean_inv_std(row, d, eps, mean, inv);
    for (int64_t j = 0; j < d; ++j) y[i * d + j] = (row[j] - mean) * inv * gamma[j] + beta[j];
  }
}

void gelu(double* y, const double* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 0.5 * x[i] * std::erfc(-x[i] / std::sqrt(2.0));
}

void layer_norm_forward(double* y, double* xhat, double* inv_std, const double* x,
                        const double* gamma, const double* beta, int64_t n, int64_t d, double eps) {
  for (int64_t i = 0; i < n; ++i) {
    const double* row = x + i * d;
    double mean, inv;
    row_mean_inv_std(row, d, eps, mean, inv);
    inv_std[i] = inv;
    for (int64_t j = 0; j < d; ++j) {
      xhat[i * d + j] = (row[j] - mean) * inv;  // read row[j] before y (which may alias x) is set
      y[i * d + j] = xhat[i * d + j] * gamma[j] + beta[j];
    }
  }
}

void layer_norm_backward(double* dx, double* dgamma, double* dbeta, const double* dy,
                         const double* xhat, const double* inv_std, const double* gamma, int64_t n,
                         int64_t d) {
  for (int64_t i = 0; i < n; ++i) {
    const double* g_row = dy + i * d;
    const double* h = xhat + i * d;
    double mean_g = 0, mean_gh = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double g = g_row[j] * gamma[j];
      mean_g += g;
      mean_gh += g * h[j];
      dgamma[j] += g_row[j] * h[j];
      dbeta[j] += g_row[j];
    }
    mean_g /= static_cast<double>(d);
    mean_gh /= static_cast<double>(d);
    for (int64_t j = 0; j < d; ++j)
      dx[i * d + j] = inv_std[i] * (g_row[j] * gamma[j] - mean_g - h[j] * mean_gh);
  }
}

void relu(double* y, const double* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0 ? 0.0 : x[i];  // NaN < 0 is false: NaN passes
}

void relu_backward(double* dx, const double* dy, const double* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0 ? dy[i] : 0.0;
}

void gelu_backward(double* dx, const double* dy, const double* x, int64_t n) {
  const double inv_sqrt_2pi = 1.0 / std::sqrt(2.0 * std::numbers::pi);
  for (int64_t i = 0; i < n; ++i) {
    const double cdf = 0.5 * std::erfc(-x[i] / std::sqrt(2.0));
    const double pdf = inv_sqrt_2pi * std::exp(-0.5 * x[i] * x[i]);
    dx[i] = dy[i] * (cdf + x[i] * pdf);
  }
}

}  // namespace qkv::reference
