// Shared pieces of the fused kernels; see flash_common.h.
#include "kernels/cpu/flash_common.h"

#include <cblas.h>

#include <atomic>
#include <cmath>

#include "core/parallel.h"
#include "kernels/cpu/vec_ops.h"

namespace qkv::cpu::flash {

void add_scaled_bias(const FlashProblem& p, const float* bias, int64_t j0, float* s, int64_t n) {
  if (p.bias_stride[3] == 1) {
    add_bias_row(s, bias + j0, n, kLog2e);
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    const float b = bias_at(p, bias, j0 + j);
    s[j] = b == -kInf ? -kInf : s[j] + b * kLog2e;
  }
}

bool all_finite(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return false;
  return true;
}

AlignedBuffer<uint8_t> bad_keys(const FlashProblem& p, int threads, bool* any) {
  AlignedBuffer<uint8_t> bad(static_cast<std::size_t>(std::max<int64_t>(p.B * p.Hkv * p.S, 1)));
  std::atomic<bool> found{false};
  parallel_for(p.B * p.Hkv, threads, [&](int64_t item, int) {
    const int64_t b = item / p.Hkv, kv = item % p.Hkv;
    bool local = false;
    for (int64_t j = 0; j < p.S; ++j) {
      uint8_t flags = 0;
      if (!all_finite(row_of(p.k, b, kv, j), p.Dk)) flags |= kBadKey;
      if (!all_finite(row_of(p.v, b, kv, j), p.Dv)) flags |= kBadValue;
      bad[item * p.S + j] = flags;
      local = local || flags != 0;
    }
    if (local) found.store(true);
  });
  *any = found.load();
  return bad;
}

void gemm_abt(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
              const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

void gemm_ab(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
             const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

void gemm_atb(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
              const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

SingleThreadedBlas::SingleThreadedBlas() : previous_(openblas_get_num_threads()) {
  openblas_set_num_threads(1);
}
SingleThreadedBlas::~SingleThreadedBlas() { openblas_set_num_threads(previous_); }

}  // namespace qkv::cpu::flash
