#include "kernels/cpu/dense.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/blas_threads.h"
#include "kernels/cpu/vec_ops.h"
#include "qkv/threads.h"

namespace qkv::cpu {
namespace {

// Rows per parallel item: enough work (≳ 16k floats) that claiming an item costs nothing.
int64_t rows_per_item(int64_t d) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1)); }

}  // namespace

void linear(float* y, const float* x, const float* w, const float* b, int64_t n, int64_t in,
            int64_t out, int num_threads) {
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
  const int threads = resolve_num_threads(num_threads);
  // Blocks of rows while each keeps ≥ 64 of them (SGEMM's packing pays off); else of columns,
  // in multiples of 16 (one AVX-512 vector).
  const bool by_rows = n >= 256 * threads;
  const int64_t parts = threads == 1 ? 1
                        : by_rows    ? threads
                                     : std::min<int64_t>(threads, (out + 15) / 16);
  const int64_t extent = by_rows ? n : out;
  const int64_t step =
      by_rows ? (extent + parts - 1) / parts : ((extent + parts - 1) / parts + 15) / 16 * 16;
  SingleThreadedBlas blas(static_cast<int>(std::min<int64_t>(threads, parts)));
  parallel_for(parts, threads, [&](int64_t part, int) {
    const int64_t begin = part * step, size = std::min(extent, begin + step) - begin;
    if (size <= 0) return;
    const int64_t rows = by_rows ? size : n, cols = by_rows ? out : size;
    const float* xs = by_rows ? x + begin * in : x;
    const float* ws = by_rows ? w : w + begin * in;
    float* ys = by_rows ? y + begin * out : y + begin;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows),
                static_cast<int>(cols), static_cast<int>(in), 1.0f, xs, static_cast<int>(in), ws,
                static_cast<int>(in), 1.0f, ys, static_cast<int>(out));
  });
}

void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x,
                     const float* w, int64_t n, int64_t in, int64_t out, int num_threads) {
  if (n == 0 || out == 0 || in == 0) {
    if (dx != nullptr) std::fill(dx, dx + n * in, 0.0f);
    return;
  }
  // Three independent products, each split over qkv's workers with single-threaded SGEMMs:
  // dx rows, dW rows (output features) with db alongside. Each part writes its own rows, so the
  // bits do not depend on the thread count.
  const int threads = resolve_num_threads(num_threads);
  const int64_t parts = threads == 1 ? 1 : 2 * threads;
  const int64_t dx_step = (n + parts - 1) / parts, dw_step = (out + parts - 1) / parts;
  const int ii = static_cast<int>(in), oi = static_cast<int>(out);
  SingleThreadedBlas blas(threads);
  parallel_for(2 * parts, threads, [&](int64_t item, int) {
    const int64_t part = item % parts;
    if (item < parts) {
      const int64_t begin = part * dx_step, rows = std::min(n, begin + dx_step) - begin;
      if (dx == nullptr || rows <= 0) return;
      // dx[rows, in] = dy[rows, out]·W[out, in]
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), ii, oi, 1.0f,
                  dy + begin * out, oi, w, ii, 0.0f, dx + begin * in, ii);
    } else {
      const int64_t begin = part * dw_step, rows = std::min(out, begin + dw_step) - begin;
      if (rows <= 0) return;
      // dW[rows, in] += dy[:, rows]ᵀ·x[n, in]
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(rows), ii,
                  static_cast<int>(n), 1.0f, dy + begin, oi, x, ii, 1.0f, dw + begin * in, ii);
      if (db != nullptr)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t o = begin; o < begin + rows; ++o) db[o] += dy[i * out + o];
    }
  });
}

void layer_norm(float* y, const float* x, const float* residual, const float* gamma,
                const float* beta, int64_t n, int64_t d, double eps, int num_threads) {
  const int64_t block = rows_per_item(d);
  const int64_t items = (n + block - 1) / block;
  parallel_for(items, resolve_num_threads(num_threads), [&](int64_t item, int) {
    for (int64_t i = item * block; i < std::min(n, (item + 1) * block); ++i)
      layer_norm_row(y + i * d, x + i * d, residual != nullptr ? residual + i * d : nullptr, gamma,
                     beta, d, static_cast<float>(eps));
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

void layer_norm_forward(float* y, float* xhat, float* inv_std, const float* x, const float* gamma,
                        const float* beta, int64_t n, int64_t d, double eps, int num_threads) {
  const int64_t block = rows_per_item(d);
  const int64_t items = (n + block - 1) / block;
  const float fd = static_cast<float>(d), feps = static_cast<float>(eps);
  parallel_for(items, resolve_num_threads(num_threads), [&](int64_t item, int) {
    for (int64_t i = item * block; i < std::min(n, (item + 1) * block); ++i) {
      const float* row = x + i * d;
      float* h = xhat + i * d;
      float mean = 0;
      for (int64_t j = 0; j < d; ++j) mean += row[j];
      mean /= fd;
      float var = 0;
      for (int64_t j = 0; j < d; ++j) {
        h[j] = row[j] - mean;
        var += h[j] * h[j];
      }
      const float inv = 1.0f / std::sqrt(var / fd + feps);
      inv_std[i] = inv;
      float* out = y + i * d;  // may alias row: row is no longer read
      for (int64_t j = 0; j < d; ++j) {
        h[j] *= inv;
        out[j] = h[j] * gamma[j] + beta[j];
      }
    }
  });
}

void layer_norm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* xhat,
                         const float* inv_std, const float* gamma, int64_t n, int64_t d,
                         int num_threads) {
  // dγ and dβ: one pass over the rows in order (deterministic for any thread count).
  for (int64_t i = 0; i < n; ++i) {
    const float* g = dy + i * d;
    const float* h = xhat + i * d;
    for (int64_t j = 0; j < d; ++j) {
      dgamma[j] += g[j] * h[j];
      dbeta[j] += g[j];
    }
  }
  const int64_t block = rows_per_item(d);
  const int64_t items = (n + block - 1) / block;
  const float fd = static_cast<float>(d);
  parallel_for(items, resolve_num_threads(num_threads), [&](int64_t item, int) {
    for (int64_t i = item * block; i < std::min(n, (item + 1) * block); ++i) {
      const float* g = dy + i * d;
      const float* h = xhat + i * d;
      float mean_g = 0, mean_gh = 0;
      for (int64_t j = 0; j < d; ++j) {
        const float gj = g[j] * gamma[j];
        mean_g += gj;
        mean_gh += gj * h[j];
      }
      mean_g /= fd;
      mean_gh /= fd;
      float* out = dx + i * d;
      for (int64_t j = 0; j < d; ++j)
        out[j] = inv_std[i] * (g[j] * gamma[j] - mean_g - h[j] * mean_gh);
    }
  });
}

void relu(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0 ? 0.0f : x[i];  // NaN < 0 is false: NaN passes
}

void relu_backward(float* dx, const float* dy, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0 ? dy[i] : 0.0f;
}

void gelu_backward(float* dx, const float* dy, const float* x, int64_t n, int num_threads) {
  constexpr int64_t kBlock = 16384;
  constexpr float kInvSqrt2 = 0.70710678118654752f, kInvSqrt2Pi = 0.39894228040143268f;
  const int64_t items = (n + kBlock - 1) / kBlock;
  parallel_for(items, resolve_num_threads(num_threads), [&](int64_t item, int) {
    for (int64_t i = item * kBlock; i < std::min(n, (item + 1) * kBlock); ++i) {
      const float v = x[i];
      const float cdf = 0.5f * std::erfc(-v * kInvSqrt2);
      const float pdf = kInvSqrt2Pi * std::exp(-0.5f * v * v);
      dx[i] = dy[i] * (cdf + v * pdf);
    }
  });
}

}  // namespace qkv::cpu
