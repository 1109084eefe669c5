// short_attention.h on the fused kernels' own tile products: per sequence and head, the scores of
// all its real rows by qk_tile, each row's softmax by the vec_ops row operations, and Σ_j P_ij v_j
// by pv_tile, read and written in the projection's layout (no copies of Q, V or the output).
#include "kernels/cpu/short_attention.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/pv_tile.h"
#include "kernels/cpu/qk_tile.h"
#include "kernels/cpu/vec_ops.h"
#include "qkv/tensor.h"
#include "qkv/threads.h"

namespace qkv::cpu {
namespace {

// Per worker: the keys' panels (qk_tile.h) and the score tile, L rows of lds floats.
struct Scratch {
  std::vector<float> kt, s;
};

// Every head of sequence b.
void sequence(const ShortAttention& p, int64_t b, int64_t lds, Scratch& w) {
  const int64_t n = p.lengths[b], D = p.D;
  // exp(scale·(s − m)) = 2^((s − m)·scale·log2 e) for raw scores s and their raw max m; with a
  // scale ≤ 0 the largest logit is not at the largest raw score, so the scores become logits.
  const bool raw = p.scale > 0;
  const float c = (raw ? p.scale : 1.0f) * 1.44269504088896340736f;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 0; i < p.L; ++i) std::fill_n(p.out + (b * p.L + i) * p.ldo, p.H * D, 0.0f);
  if (n == 0) return;
  std::vector<float> sum(static_cast<std::size_t>(n));
  std::vector<uint8_t> bad(static_cast<std::size_t>(n));
  for (int64_t h = 0; h < p.H; ++h) {
    const float* q = p.q + b * p.L * p.ld + h * D;
    const float* v = p.v + b * p.L * p.ld + h * D;
    float* out = p.out + b * p.L * p.ldo + h * D;
    KeyTile keys{p.k + b * p.L * p.ld + h * D, p.ld, n, w.kt.data()};
    qk_tile(q, p.ld, n, keys, D, w.s.data(), lds);
    for (int64_t i = 0; i < n; ++i) {
      float* s = w.s.data() + i * lds;
      if (!raw) scale_row(s, n, p.scale);
      uint32_t seen = 0;
      const float m = max_row(s, n, &seen);
      bad[i] = (seen & kSawNaNOrPlusInf) != 0;
      sum[i] = bad[i] ? 1.0f : exp_sub_row(s, s, n, m, c);  // the probabilities, in place
      if (bad[i]) std::fill_n(s, n, 0.0f);
    }
    pv_tile(w.s.data(), lds, n, v, p.ld, n, D, out, p.ldo);
    for (int64_t i = 0; i < n; ++i) {
      float* o = out + i * p.ldo;
      if (bad[i])  // NaN or +∞ among the row's scores: the row is NaN (docs/CONVENTIONS.md §1.4)
        std::fill_n(o, D, nan);
      else
        scale_row(o, D, 1.0f / sum[i]);
    }
  }
}

}  // namespace

void short_attention(const ShortAttention& p, int num_threads) {
  if (p.L > kShortAttentionMaxLength)
    throw Error("short_attention: sequences of " + std::to_string(p.L) +
                " tokens; it is meant for at most " + std::to_string(kShortAttentionMaxLength));
  for (int64_t b = 0; b < p.B; ++b)
    if (p.lengths[b] < 0 || p.lengths[b] > p.L)
      throw Error("short_attention: sequence " + std::to_string(b) + " has length " +
                  std::to_string(p.lengths[b]) + "; expected 0 to " + std::to_string(p.L));
  const int threads = resolve_num_threads(num_threads);
  const int64_t lds = padded_keys(p.L);
  std::vector<Scratch> scratch(static_cast<std::size_t>(threads));
  parallel_for(p.B, threads, [&](int64_t b, int worker) {
    Scratch& w = scratch[static_cast<std::size_t>(worker)];
    w.kt.resize(static_cast<std::size_t>(lds * p.D));
    w.s.resize(static_cast<std::size_t>(p.L * lds));
    sequence(p, b, lds, w);
  });
}

}  // namespace qkv::cpu
