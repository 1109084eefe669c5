// The math path: the L×S score matrix in memory, two SGEMMs around a row softmax.
#include "kernels/cpu/unfused_attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/aligned.h"
#include "core/parallel.h"

namespace qkv::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Holds OpenBLAS at `n` threads for its lifetime, restoring the previous count afterwards.
class BlasThreads {
 public:
  explicit BlasThreads(int n) : previous_(openblas_get_num_threads()) {
    openblas_set_num_threads(n);
  }
  ~BlasThreads() { openblas_set_num_threads(previous_); }
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;

 private:
  int previous_;
};

// exp(x) in float for x ≤ 88, branch-free so that GCC vectorizes the loops calling it: a baseline
// with a scalar expf spends as long in the softmax as in both GEMMs (D = 64) and would flatter the
// fused kernel. Cephes expf: x = n·ln2 + r with |r| ≤ ln2/2 (ln2 split in two for an exact
// n·ln2), exp(r) by a degree-7 polynomial, 2^n through the exponent bits; about 1 ulp. Below
// log(FLT_MIN) (−∞ included) it gives 0; NaN stays NaN.
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
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return x < kLowest ? 0.0f : y * two_n;
}

// Reductions over a row with 16 independent partial results: one float accumulator is a serial
// chain of dependent adds that the compiler may not reorder, so it would not vectorize.
constexpr int64_t kLanes = 16;

// The largest s[j], or NaN when any is NaN, or −∞ when n = 0.
float row_max(const float* s, int64_t n) {
  float m[kLanes];
  std::fill(m, m + kLanes, -kInf);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) {
      const float x = s[j + l];
      m[l] = (x > m[l] || x != x) ? x : m[l];
    }
  for (; j < n; ++j) m[0] = (s[j] > m[0] || s[j] != s[j]) ? s[j] : m[0];
  float r = m[0];
  for (int64_t l = 1; l < kLanes; ++l) r = (m[l] > r || m[l] != m[l]) ? m[l] : r;
  return r;
}

// s[j] = exp(s[j] − shift) for j < n; returns their sum.
float exp_and_sum(float* s, int64_t n, float shift) {
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

float dot(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += a[j + l] * b[j + l];
  for (; j < n; ++j) acc[0] += a[j] * b[j];
  float sum = 0;
  for (int64_t l = 0; l < kLanes; ++l) sum += acc[l];
  return sum;
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
int I(int64_t n) { return static_cast<int>(n); }

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
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, I(p.L), I(p.S), I(p.Dk), p.scale,
              rows(p.q, hd.b, hd.h), ld(p.q, p.L, p.Dk), rows(p.k, hd.b, hd.kv), ld(p.k, p.S, p.Dk),
              0.0f, s, I(p.S));
}

// Rows [i0, i1) of the scores become probabilities: mask, softmax. lse: [L] of this head or null.
void softmax_rows(const FlashProblem& p, Head hd, float* s, int64_t i0, int64_t i1, float* lse) {
  for (int64_t i = i0; i < i1; ++i) {
    float* row = s + i * p.S;
    const int64_t end = visible_end(p, hd.b, i);
    std::fill(row + end, row + p.S, 0.0f);
    add_bias(p, hd, i, row, end);
    const float m = row_max(row, end);
    if (m == -kInf) {  // nothing visible: output 0, logsumexp −∞ (DESIGN.md §3)
      std::fill(row, row + end, 0.0f);
      if (lse) lse[i] = -kInf;
      continue;
    }
    const float sum = exp_and_sum(row, end, m);
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < end; ++j) row[j] *= inv;
    if (lse) lse[i] = m + std::log(sum);
  }
}

// out_h = P·V_kv, [L, Dv].
void weighted_sum(const FlashProblem& p, Head hd, const float* prob, float* out) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, I(p.L), I(p.Dv), I(p.S), 1.0f, prob,
              I(p.S), rows(p.v, hd.b, hd.kv), ld(p.v, p.S, p.Dv), 0.0f, out, I(p.Dv));
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

// Rows [i0, i1): dP ← scale·P ∘ (dP − Dᵢ), Dᵢ = dOᵢ·Oᵢ (= Σⱼ Pᵢⱼ dPᵢⱼ, Dao 2023 eq. 4).
void dscores_rows(const FlashProblem& p, const float* prob, float* dprob, const float* out,
                  const float* dout, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    const float d = dot(dout + i * p.Dv, out + i * p.Dv, p.Dv);
    const float* pr = prob + i * p.S;
    float* dp = dprob + i * p.S;
    for (int64_t j = 0; j < p.S; ++j) dp[j] = p.scale * pr[j] * (dp[j] - d);
  }
}

bool per_head(BlasThreading threading, int64_t items, int threads) {
  if (threading == BlasThreading::automatic) return items >= threads;
  return threading == BlasThreading::per_head;
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

  if (per_head(threading, heads, threads)) {
    const int workers = static_cast<int>(std::min<int64_t>(threads, heads));
    std::vector<AlignedBuffer<float>> scratch(workers);
    for (AlignedBuffer<float>& s : scratch) s.resize(LS);
    BlasThreads one(1);
    parallel_for(heads, workers, [&](int64_t bh, int w) { head(bh, scratch[w].data(), 1); });
  } else {
    AlignedBuffer<float> s(LS);
    BlasThreads all(threads);
    for (int64_t bh = 0; bh < heads; ++bh) head(bh, s.data(), threads);
  }
}

void unfused_backward(const FlashProblem& p, const float* out, const float* dout, const float* lse,
                      float* dq, float* dk, float* dv, int threads, BlasThreading threading) {
  threads = resolve_num_threads(threads);
  const int64_t items = p.B * p.Hkv, G = p.Hkv > 0 ? p.Hq / p.Hkv : 0;
  std::fill(dq, dq + p.B * p.Hq * p.L * p.Dk, 0.0f);
  std::fill(dk, dk + items * p.S * p.Dk, 0.0f);
  std::fill(dv, dv + items * p.S * p.Dv, 0.0f);
  if (p.L == 0 || p.S == 0 || items == 0) return;
  const auto LS = static_cast<std::size_t>(p.L * p.S);

  // One kv head and the G query heads that read it, in order, so dK and dV sum them in a fixed
  // order whatever the threads.
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
      const float* out_h = out + bh * p.L * p.Dv;
      const float* dout_h = dout + bh * p.L * p.Dv;
      const float* q_h = rows(p.q, b, hd.h);
      const float beta = 1.0f;  // dK, dV start at 0 and sum over the group
      scores(p, hd, prob);
      over_rows(p.L, row_threads,
                [&](int64_t i0, int64_t i1) { probabilities_rows(p, hd, prob, i0, i1, lse_h); });
      // dV += Pᵀ·dO
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, I(p.S), I(p.Dv), I(p.L), 1.0f, prob,
                  I(p.S), dout_h, I(p.Dv), beta, dv_kv, I(p.Dv));
      // dP = dO·Vᵀ
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, I(p.L), I(p.S), I(p.Dv), 1.0f, dout_h,
                  I(p.Dv), v_kv, ld(p.v, p.S, p.Dv), 0.0f, dprob, I(p.S));
      over_rows(p.L, row_threads, [&](int64_t i0, int64_t i1) {
        dscores_rows(p, prob, dprob, out_h, dout_h, i0, i1);
      });
      // dQ = dS·K (scale is inside dS)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, I(p.L), I(p.Dk), I(p.S), 1.0f, dprob,
                  I(p.S), k_kv, ld(p.k, p.S, p.Dk), 0.0f, dq + bh * p.L * p.Dk, I(p.Dk));
      // dK += dSᵀ·Q
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, I(p.S), I(p.Dk), I(p.L), 1.0f, dprob,
                  I(p.S), q_h, ld(p.q, p.L, p.Dk), beta, dk_kv, I(p.Dk));
    }
  };

  if (per_head(threading, items, threads)) {
    const int workers = static_cast<int>(std::min<int64_t>(threads, items));
    std::vector<AlignedBuffer<float>> prob(workers), dprob(workers);
    for (int w = 0; w < workers; ++w) prob[w].resize(LS), dprob[w].resize(LS);
    BlasThreads one(1);
    parallel_for(items, workers,
                 [&](int64_t item, int w) { group(item, prob[w].data(), dprob[w].data(), 1); });
  } else {
    AlignedBuffer<float> prob(LS), dprob(LS);
    BlasThreads all(threads);
    for (int64_t item = 0; item < items; ++item) group(item, prob.data(), dprob.data(), threads);
  }
}

}  // namespace qkv::cpu
