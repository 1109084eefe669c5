#include "kernels/cpu/dense.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "kernels/cpu/blas_threads.h"
#include "kernels/cpu/vec_ops.h"

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
  SingleThreadedBlas blas;
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
                     const float* w, int64_t n, int64_t in, int64_t out) {
  if (n == 0 || out == 0 || in == 0) {
    if (dx != nullptr) std::fill(dx, dx + n * in, 0.0f);
    return;
  }
  const int ni = static_cast<int>(n), ii = static_cast<int>(in), oi = static_cast<int>(out);
  if (dx != nullptr)  // [n, in] = [n, out]·[out, in]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ii, oi, 1.0f, dy, oi, w, ii, 0.0f,
                dx, ii);
  // [out, in] += [n, out]ᵀ·[n, in]
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, oi, ii, ni, 1.0f, dy, oi, x, ii, 1.0f, dw,
              ii);
  if (db != nullptr)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t o = 0; o < out; ++o) db[o] += dy[i * out + o];
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

}  // namespace qkv::cpu
