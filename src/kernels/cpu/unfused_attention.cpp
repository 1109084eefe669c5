// The math path: the L×S score matrix in memory, two SGEMMs around a row softmax.
#include "kernels/cpu/unfused_attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/aligned.h"
#include "kernels/cpu/blas_threads.h"
#include "qkv/threads.h"

namespace qkv::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

int I(int64_t n) { return static_cast<int>(n); }  // BLAS takes int sizes

// exp(x) in float for x ≤ 88, branch-free so that GCC vectorizes the loops calling it: with a
// scalar expf the softmax takes as long as both GEMMs at D = 64 and would flatter the fused kernel
// (H = 8, L = S = 4096: 14 GFLOP/s with branches, 30 with SSE2 vectors, 70 with the AVX-512 clone
// below, on the 2 shared cores of issue 3). Cephes expf: x = n·ln2 + r with |r| ≤ ln2/2 (ln2 split
// in two for an exact n·ln2), exp(r) by a degree-7 polynomial, 2^n through the exponent bits;
// measured ≤ 0.99 ulp against exp in double over every float in [−87.3, 0.5]. Below log(FLT_MIN)
// (−∞ included) it gives 0; NaN stays NaN.
inline float exp_upto88(float x) {
  constexpr float kLowest = -87.33654f;  // log(FLT_MIN): n ≥ −126 keeps 2^n a normal float
  const float xc = std::min(std::max(x, kLowest), 88.0f);          // NaN passes through both
  const float n = (xc * 1.44269504f + 12582912.0f) - 12582912.0f;  // round to nearest (2^23·1.5)
  const float r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n == n ? n : 0.0f) + 127) << 23;  // y is NaN then
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return x < kLowest ? 0.0f : y * two_n;
}

// The row loops below are compiled for AVX-512, AVX2 + FMA and baseline x86-64 (SSE2), and the
// best the machine runs is picked at load time; exp_upto88 says what that is worth.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define QKV_ROW_LOOP __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define QKV_ROW_LOOP
#endif

// Reductions over a row with 16 independent partial results: one float accumulator is a serial
// chain of dependent adds that the compiler may not reorder, so it would not vectorize.
constexpr int64_t kLanes = 16;

// The largest s[j] (NaNs skipped), or −∞ when n = 0. A NaN still reaches the output through
// exp(NaN − max); only a row of NaN alone needs a look of its own (has_nan).
QKV_ROW_LOOP float row_max(const float* s, int64_t n) {
  float m[kLanes];
  std::fill(m, m + kLanes, -kInf);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) m[l] = s[j + l] > m[l] ? s[j + l] : m[l];
  for (; j < n; ++j) m[0] = s[j] > m[0] ? s[j] : m[0];
  return *std::max_element(m, m + kLanes);
}

bool has_nan(const float* s, int64_t n) {
  return std::any_of(s, s + n, [](float x) { return std::isnan(x); });
}

// s[j] = exp(s[j] − shift) for j < n; returns their sum.
QKV_ROW_LOOP float exp_and_sum(float* s, int64_t n, float shift) {
  float acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) {
      const float e = exp_upto88(s[j + l] - shift);
      s[j + l] = e;
      acc[l] += e;
    }
  for (; j < n; ++j) {
    s[j] = exp_upto88(s[j] - shift);
    acc[0] += s[j];
  }
  float sum = 0;
  for (int64_t l = 0; l < kLanes; ++l) sum += acc[l];
  return sum;
}

QKV_ROW_LOOP float dot(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += a[j + l] * b[j + l];
  for (; j < n; ++j) acc[0] += a[j] * b[j];
  float sum = 0;
  for (int64_t l = 0; l < kLanes; ++l) sum += acc[l];
  return sum;
}

QKV_ROW_LOOP void scale_row(float* s, int64_t n, float c) {
  for (int64_t j = 0; j < n; ++j) s[j] *= c;
}

// dp[j] = c·p[j]·(dp[j] − d)
QKV_ROW_LOOP void dscore_row(const float* p, float* dp, int64_t n, float d, float c) {
  for (int64_t j = 0; j < n; ++j) dp[j] = c * p[j] * (dp[j] - d);
}

// C[m×n] = alpha·op(A)·op(B) + beta·C, row-major, op(X) = Xᵀ where trans_x. A single query row
// (decoding, L = 1) makes two of the products matrix-vector and two rank-1 updates: OpenBLAS 0.3.21
// would still pack the whole K or V matrix for a one-row SGEMM, ten times slower there.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
  if (m == 1 && !trans_a) {  // c = alpha·op(B)ᵀ·a + beta·c
    if (trans_b)
      cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, alpha, b, I(ldb), a, 1, beta, c, 1);
    else
      cblas_sgemv(CblasRowMajor, CblasTrans, K, N, alpha, b, I(ldb), a, 1, beta, c, 1);
  } else if (k == 1 && beta == 1.0f) {  // C += alpha·x·yᵀ
    cblas_sger(CblasRowMajor, M, N, alpha, a, trans_a ? 1 : I(lda), b, trans_b ? I(ldb) : 1, c,
               I(ldc));
  } else {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, a, I(lda), b, I(ldb), beta, c,
                I(ldc));
  }
}

// One (batch, query head) and the kv head it reads.
struct Head {
  int64_t b, h, kv;
};

Head head_of(const FlashProblem& p, int64_t bh) {
  const int64_t b = bh / p.Hq, h = bh % p.Hq;
  return {b, h, h / (p.Hq / p.Hkv)};
}

const float* rows(const View& v, int64_t b, int64_t h) {
  return v.data + b * v.stride[0] + h * v.stride[1];
}
// A leading dimension BLAS accepts: the row stride, or the row length when there is one row.
int ld(const View& v, int64_t n_rows, int64_t row_length) {
  return static_cast<int>(n_rows > 1 ? v.stride[2] : std::max<int64_t>(row_length, 1));
}

// Keys [0, end) are visible to query i by causality and key lengths (the bias may hide more).
int64_t visible_end(const FlashProblem& p, int64_t b, int64_t i) {
  int64_t end = p.S;
  if (p.key_lengths) end = std::min(end, p.key_lengths[b]);
  if (p.causal == Causal::top_left) end = std::min(end, i + 1);
  if (p.causal == Causal::bottom_right) end = std::min(end, i + 1 + p.S - p.L);
  return std::clamp<int64_t>(end, 0, p.S);
}

void add_bias(const FlashProblem& p, Head hd, int64_t i, float* s, int64_t end) {
  if (!p.bias) return;
  const float* row =
      p.bias + hd.b * p.bias_stride[0] + hd.h * p.bias_stride[1] + i * p.bias_stride[2];
  const int64_t step = p.bias_stride[3];
  for (int64_t j = 0; j < end; ++j) s[j] += row[j * step];
}

// s = scale·Q_h·K_kvᵀ, [L, S] with row stride S.
void scores(const FlashProblem& p, Head hd, float* s) {
  gemm(false, true, p.L, p.S, p.Dk, p.scale, rows(p.q, hd.b, hd.h), ld(p.q, p.L, p.Dk),
       rows(p.k, hd.b, hd.kv), ld(p.k, p.S, p.Dk), 0.0f, s, p.S);
}

// Rows [i0, i1) of the scores become probabilities: mask, softmax. lse: [L] of this head or null.
void softmax_rows(const FlashProblem& p, Head hd, float* s, int64_t i0, int64_t i1, float* lse) {
  for (int64_t i = i0; i < i1; ++i) {
    float* row = s + i * p.S;
    const int64_t end = visible_end(p, hd.b, i);
    std::fill(row + end, row + p.S, 0.0f);
    add_bias(p, hd, i, row, end);
    const float m = row_max(row, end);
    if (m == -kInf) {  // nothing visible: out 0, lse −∞ (docs/CONVENTIONS.md §1.4); or all NaN
      const float fill = has_nan(row, end) ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
      std::fill(row, row + end, fill);
      if (lse) lse[i] = fill == 0.0f ? -kInf : fill;
      continue;
    }
    const float sum = exp_and_sum(row, end, m);
    scale_row(row, end, 1.0f / sum);
    if (lse) lse[i] = m + std::log(sum);
  }
}

// out_h = P·V_kv, [L, Dv].
void weighted_sum(const FlashProblem& p, Head hd, const float* prob, float* out) {
  gemm(false, false, p.L, p.Dv, p.S, 1.0f, prob, p.S, rows(p.v, hd.b, hd.kv), ld(p.v, p.S, p.Dv),
       0.0f, out, p.Dv);
}

// Rows [i0, i1) of recomputed scores become the forward's probabilities, P = exp(s − lse).
void probabilities_rows(const FlashProblem& p, Head hd, float* s, int64_t i0, int64_t i1,
                        const float* lse) {
  for (int64_t i = i0; i < i1; ++i) {
    float* row = s + i * p.S;
    const int64_t end = lse[i] == -kInf ? 0 : visible_end(p, hd.b, i);
    std::fill(row + end, row + p.S, 0.0f);
    add_bias(p, hd, i, row, end);
    exp_and_sum(row, end, lse[i]);
  }
}

// Rows [i0, i1): dP ← scale·P ∘ (dP − Dᵢ), the softmax backward, with Dᵢ = Σⱼ Pᵢⱼ dPᵢⱼ from the
// row itself (not FlashAttention's dOᵢ·Oᵢ, equal in exact arithmetic): then a row with one visible
// key gets dS = 0 exactly, as the naive fp32 loop does.
void dscores_rows(const FlashProblem& p, const float* prob, float* dprob, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    const float d = dot(prob + i * p.S, dprob + i * p.S, p.S);
    dscore_row(prob + i * p.S, dprob + i * p.S, p.S, d, p.scale);
  }
}

// See BlasThreading. Below 512 rows or keys OpenBLAS's own threads cost more than they bring.
bool per_head(const FlashProblem& p, BlasThreading threading, int64_t items, int threads) {
  if (threading != BlasThreading::automatic) return threading == BlasThreading::per_head;
  if (items < threads) return false;
  return std::min(p.L, p.S) < 512;
}

// Runs rows(i0, i1) over [0, L): in one call, or split in blocks over the pool.
template <class F>
void over_rows(int64_t L, int threads, F&& rows) {
  constexpr int64_t kBlock = 64;
  if (threads <= 1) return rows(int64_t{0}, L);
  parallel_for((L + kBlock - 1) / kBlock, threads,
               [&](int64_t blk, int) { rows(blk * kBlock, std::min(L, (blk + 1) * kBlock)); });
}

}  // namespace

void unfused_forward(const FlashProblem& p, float* out, float* lse, int threads,
                     BlasThreading threading) {
  threads = resolve_num_threads(threads);
  const int64_t heads = p.B * p.Hq;
  if (p.L == 0 || heads == 0) return;
  if (p.S == 0) {  // no keys: every row sees nothing
    std::fill(out, out + heads * p.L * p.Dv, 0.0f);
    if (lse) std::fill(lse, lse + heads * p.L, -kInf);
    return;
  }
  const auto LS = static_cast<std::size_t>(p.L * p.S);
  auto head = [&](int64_t bh, float* s, int row_threads) {
    const Head hd = head_of(p, bh);
    scores(p, hd, s);
    float* head_lse = lse ? lse + bh * p.L : nullptr;
    over_rows(p.L, row_threads,
              [&](int64_t i0, int64_t i1) { softmax_rows(p, hd, s, i0, i1, head_lse); });
    weighted_sum(p, hd, s, out + bh * p.L * p.Dv);
  };

  if (per_head(p, threading, heads, threads)) {
    const int workers = static_cast<int>(std::min<int64_t>(threads, heads));
    std::vector<AlignedBuffer<float>> scratch(workers);
    for (AlignedBuffer<float>& s : scratch) s.resize(LS);
    SingleThreadedBlas one(workers);
    parallel_for(heads, workers, [&](int64_t bh, int w) { head(bh, scratch[w].data(), 1); });
  } else {
    AlignedBuffer<float> s(LS);
    BlasThreads all(threads);
    for (int64_t bh = 0; bh < heads; ++bh) head(bh, s.data(), threads);
  }
}

void unfused_backward(const FlashProblem& p, const float* dout, const float* lse, float* dq,
                      float* dk, float* dv, int threads, BlasThreading threading) {
  threads = resolve_num_threads(threads);
  const int64_t items = p.B * p.Hkv, G = p.Hkv > 0 ? p.Hq / p.Hkv : 0;
  std::fill(dq, dq + p.B * p.Hq * p.L * p.Dk, 0.0f);
  std::fill(dk, dk + items * p.S * p.Dk, 0.0f);
  std::fill(dv, dv + items * p.S * p.Dv, 0.0f);
  if (p.L == 0 || p.S == 0 || items == 0) return;
  const auto LS = static_cast<std::size_t>(p.L * p.S);

  // One kv head and the G query heads that read it, in order, so dK and dV (zeroed above) sum
  // them in a fixed order whatever the threads.
  auto group = [&](int64_t item, float* prob, float* dprob, int row_threads) {
    const int64_t b = item / p.Hkv, kv = item % p.Hkv;
    float* dk_kv = dk + item * p.S * p.Dk;
    float* dv_kv = dv + item * p.S * p.Dv;
    const float* k_kv = rows(p.k, b, kv);
    const float* v_kv = rows(p.v, b, kv);
    for (int64_t g = 0; g < G; ++g) {
      const Head hd{b, kv * G + g, kv};
      const int64_t bh = b * p.Hq + hd.h;
      const float* lse_h = lse + bh * p.L;
      const float* dout_h = dout + bh * p.L * p.Dv;
      const float* q_h = rows(p.q, b, hd.h);
      scores(p, hd, prob);
      over_rows(p.L, row_threads,
                [&](int64_t i0, int64_t i1) { probabilities_rows(p, hd, prob, i0, i1, lse_h); });
      // dV += Pᵀ·dO
      gemm(true, false, p.S, p.Dv, p.L, 1.0f, prob, p.S, dout_h, p.Dv, 1.0f, dv_kv, p.Dv);
      // dP = dO·Vᵀ
      gemm(false, true, p.L, p.S, p.Dv, 1.0f, dout_h, p.Dv, v_kv, ld(p.v, p.S, p.Dv), 0.0f, dprob,
           p.S);
      over_rows(p.L, row_threads,
                [&](int64_t i0, int64_t i1) { dscores_rows(p, prob, dprob, i0, i1); });
      // dQ = dS·K (scale is inside dS)
      gemm(false, false, p.L, p.Dk, p.S, 1.0f, dprob, p.S, k_kv, ld(p.k, p.S, p.Dk), 0.0f,
           dq + bh * p.L * p.Dk, p.Dk);
      // dK += dSᵀ·Q
      gemm(true, false, p.S, p.Dk, p.L, 1.0f, dprob, p.S, q_h, ld(p.q, p.L, p.Dk), 1.0f, dk_kv,
           p.Dk);
    }
  };

  if (per_head(p, threading, items, threads)) {
    const int workers = static_cast<int>(std::min<int64_t>(threads, items));
    std::vector<AlignedBuffer<float>> prob(workers), dprob(workers);
    for (int w = 0; w < workers; ++w) prob[w].resize(LS), dprob[w].resize(LS);
    SingleThreadedBlas one(workers);
    parallel_for(items, workers,
                 [&](int64_t item, int w) { group(item, prob[w].data(), dprob[w].data(), 1); });
  } else {
    AlignedBuffer<float> prob(LS), dprob(LS);
    BlasThreads all(threads);
    for (int64_t item = 0; item < items; ++item) group(item, prob.data(), dprob.data(), threads);
  }
}

}  // namespace qkv::cpu
