#include "kernels/reference/dense.h"

#include <algorithm>
#include <cmath>

namespace qkv::reference {

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
    double mean = 0;
    for (int64_t j = 0; j < d; ++j) mean += row[j];
    mean /= static_cast<double>(d);
    double var = 0;
    for (int64_t j = 0; j < d; ++j) var += (row[j] - mean) * (row[j] - mean);
    var /= static_cast<double>(d);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < d; ++j) y[i * d + j] = (row[j] - mean) * inv * gamma[j] + beta[j];
  }
}

void gelu(double* y, const double* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 0.5 * x[i] * std::erfc(-x[i] / std::sqrt(2.0));
}

}  // namespace qkv::reference
