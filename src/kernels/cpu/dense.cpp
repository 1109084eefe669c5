#include "kernels/cpu/dense.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "kernels/cpu/vec_ops.h"

namespace qkv::cpu {
namespace {

// Rows per parallel item: enough work (≳ 16k floats) that claiming an item costs nothing.
int64_t rows_per_item(int64_t d) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1)); }

}  // namespace

void linear(float* y, const float* x, const float* w, const float* b, int64_t n, int64_t in,
            int64_t out) {
  if (n == 0 || out == 0) return;
  // y starts as the bias broadcast over rows, then SGEMM adds x·Wᵀ (beta = 1).
  for (int64_t i = 0; i < n; ++i) {
    float* row = y + i * out;
    if (b != nullptr)
      std::copy(b, b + out, row);
    else
      std::fill(row, row + out, 0.0f);
  }
  if (in == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(out),
              static_cast<int>(in), 1.0f, x, static_cast<int>(in), w, static_cast<int>(in), 1.0f, y,
              static_cast<int>(out));
}

void layer_norm(float* y, const float* x, const float* residual, const float* gamma,
                const float* beta, int64_t n, int64_t d, double eps, int num_threads) {
  const int64_t block = rows_per_item(d);
  const int64_t items = (n + block - 1) / block;
  parallel_for(items, resolve_num_threads(num_threads), [&](int64_t item, int) {
    for (int64_t i = item * block; i < std::min(n, (item + 1) * block); ++i) {
      const float* row = x + i * d;
      float* dst = y + i * d;
      if (residual != nullptr)
        for (int64_t j = 0; j < d; ++j) dst[j] = row[j] + residual[i * d + j];
      else if (dst != row)
        std::copy(row, row + d, dst);
      // Two passes in float64: mean, then the variance about it (no cancellation).
      double mean = 0;
      for (int64_t j = 0; j < d; ++j) mean += dst[j];
      mean /= static_cast<double>(d);
      double var = 0;
      for (int64_t j = 0; j < d; ++j) var += (dst[j] - mean) * (dst[j] - mean);
      var /= static_cast<double>(d);
      const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
      const float m = static_cast<float>(mean);
      for (int64_t j = 0; j < d; ++j) dst[j] = (dst[j] - m) * inv * gamma[j] + beta[j];
    }
  });
}

void gelu(float* x, int64_t n, int num_threads) {
  constexpr int64_t kBlock = 16384;
  const int64_t items = (n + kBlock - 1) / kBlock;
  parallel_for(items, resolve_num_threads(num_threads), [&](int64_t item, int) {
    const int64_t begin = item * kBlock;
    gelu_row(x + begin, std::min(kBlock, n - begin));
  });
}

}  // namespace qkv::cpu
