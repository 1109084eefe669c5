// Highway implementation of short_attention.h, compiled once per target instruction set
// (hwy/foreach_target.h re-includes this file); HWY_DYNAMIC_DISPATCH picks one at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/short_attention.cpp"
#include "kernels/cpu/short_attention.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "hwy/foreach_target.h"  // must come before highway.h
#include "hwy/highway.h"
#include "kernels/cpu/vec_ops.h"
#include "qkv/tensor.h"

HWY_BEFORE_NAMESPACE();
namespace qkv::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// o = Σ_j p[j]·v_j over j < n in order (v_j at v + j·ldv), for x < D: V vectors of o at a time in
// registers, independent chains, then a one-lane tail.
template <int V>
HWY_INLINE void WeightedSumBlock(float* o, const float* p, const float* v, int64_t ldv, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  hn::Vec<decltype(d)> acc[V];
  for (int c = 0; c < V; ++c) acc[c] = hn::Zero(d);
  for (int64_t j = 0; j < n; ++j) {
    const auto pj = hn::Set(d, p[j]);
    for (int c = 0; c < V; ++c) acc[c] = hn::MulAdd(pj, hn::LoadU(d, v + j * ldv + c * N), acc[c]);
  }
  for (int c = 0; c < V; ++c) hn::StoreU(acc[c], d, o + c * N);
}

HWY_INLINE void WeightedSum(float* o, const float* p, const float* v, int64_t ldv, int64_t n,
                            int64_t D) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  int64_t x = 0;
  for (; x + 4 * N <= D; x += 4 * N) WeightedSumBlock<4>(o + x, p, v + x, ldv, n);
  for (; x + N <= D; x += N) WeightedSumBlock<1>(o + x, p, v + x, ldv, n);
  const hn::CappedTag<float, 1> d1;
  for (; x < D; ++x) {
    auto acc = hn::Zero(d1);
    for (int64_t j = 0; j < n; ++j)
      acc = hn::MulAdd(hn::Set(d1, p[j]), hn::Set(d1, v[j * ldv + x]), acc);
    o[x] = hn::GetLane(acc);
  }
}

// s[j] = q·k_j for the V·N keys from j0, keys transposed (kt[x·ldk + j]): V independent chains
// over x = 0 … D − 1, so that the multiply-adds overlap instead of waiting on each other.
template <int V>
HWY_INLINE void ScoresBlock(const float* q, const float* kt, int64_t ldk, int64_t D, float* s) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  hn::Vec<decltype(d)> acc[V];
  for (int c = 0; c < V; ++c) acc[c] = hn::Zero(d);
  for (int64_t x = 0; x < D; ++x) {
    const auto qx = hn::Set(d, q[x]);
    for (int c = 0; c < V; ++c) acc[c] = hn::MulAdd(qx, hn::LoadU(d, kt + x * ldk + c * N), acc[c]);
  }
  for (int c = 0; c < V; ++c) hn::StoreU(acc[c], d, s + c * N);
}

// s[j] = q·k_j for j < n_pad (a multiple of the vector length): each score one multiply-add chain
// over x = 0 … D − 1, lanes across keys (no horizontal sums).
HWY_INLINE void Scores(const float* q, const float* kt, int64_t n_pad, int64_t D, float* s) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  int64_t j = 0;
  for (; j + 4 * N <= n_pad; j += 4 * N) ScoresBlock<4>(q, kt + j, n_pad, D, s + j);
  for (; j + 2 * N <= n_pad; j += 2 * N) ScoresBlock<2>(q, kt + j, n_pad, D, s + j);
  for (; j < n_pad; j += N) ScoresBlock<1>(q, kt + j, n_pad, D, s + j);
}

// Every head of sequence b. scratch: D·(L rounded up to the vector length) floats for the keys
// transposed, then that many again for one row's scores and probabilities.
void Sequence(const ShortAttention& p, int64_t b, float* scratch) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  const int64_t n = p.lengths[b], D = p.D, n_pad = (n + N - 1) / N * N;
  const int64_t L_pad = (p.L + N - 1) / N * N;
  float* kt = scratch;
  float* scores = scratch + D * L_pad;
  float* probs = scores + L_pad;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // exp(scale·(s − m)) = 2^((s − m)·scale·log2 e) for raw scores s and their raw max m; with a
  // scale ≤ 0 the largest logit is not at the largest raw score, so the scores become logits.
  const bool raw = p.scale > 0;
  const float c = (raw ? p.scale : 1.0f) * 1.44269504088896340736f;
  for (int64_t i = n; i < p.L; ++i) std::fill_n(p.out + (b * p.L + i) * p.ldo, p.H * D, 0.0f);
  for (int64_t h = 0; h < p.H; ++h) {
    const float* k = p.k + b * p.L * p.ld + h * D;
    const float* v = p.v + b * p.L * p.ld + h * D;
    for (int64_t x = 0; x < D; ++x) {
      for (int64_t j = 0; j < n; ++j) kt[x * n_pad + j] = k[j * p.ld + x];
      for (int64_t j = n; j < n_pad; ++j) kt[x * n_pad + j] = 0.0f;
    }
    for (int64_t i = 0; i < n; ++i) {
      float* o = p.out + (b * p.L + i) * p.ldo + h * D;
      Scores(p.q + (b * p.L + i) * p.ld + h * D, kt, n_pad, D, scores);
      if (!raw) scale_row(scores, n, p.scale);
      uint32_t seen = 0;
      const float m = max_row(scores, n, &seen);
      if (seen & kSawNaNOrPlusInf) {
        std::fill_n(o, D, nan);
        continue;
      }
      const float sum = exp_sub_row(scores, probs, n, m, c);
      WeightedSum(o, probs, v, p.ld, n, D);
      scale_row(o, D, 1.0f / sum);
    }
  }
}

}  // namespace qkv::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv::cpu {

HWY_EXPORT(Sequence);

void short_attention(const ShortAttention& p, int num_threads) {
  if (p.L > kShortAttentionMaxLength)
    throw Error("short_attention: sequences of " + std::to_string(p.L) +
                " tokens; it is meant for at most " + std::to_string(kShortAttentionMaxLength));
  for (int64_t b = 0; b < p.B; ++b)
    if (p.lengths[b] < 0 || p.lengths[b] > p.L)
      throw Error("short_attention: sequence " + std::to_string(b) + " has length " +
                  std::to_string(p.lengths[b]) + "; expected 0 to " + std::to_string(p.L));
  // Per worker, once: the keys transposed (D × L, L rounded up to 16 lanes) and one row's scores
  // and probabilities.
  const int threads = resolve_num_threads(num_threads);
  const int64_t L_pad = (p.L + 15) / 16 * 16;
  std::vector<std::vector<float>> scratch(static_cast<std::size_t>(threads));
  parallel_for(p.B, threads, [&](int64_t b, int worker) {
    std::vector<float>& s = scratch[static_cast<std::size_t>(worker)];
    s.resize(static_cast<std::size_t>((p.D + 2) * L_pad));
    HWY_DYNAMIC_DISPATCH(Sequence)(p, b, s.data());
  });
}

}  // namespace qkv::cpu
#endif  // HWY_ONCE
