// Fused attention forward, FlashAttention-2 (Dao 2023, Algorithm 1) on the CPU.
//
// For each tile of query rows, key/value tiles stream through cache; each row keeps a running max
// m and sum l of its exponentials (the online softmax of Milakov & Gimelshein 2018), rescaling its
// output accumulator whenever m grows. Scores live in the log2 domain (scaled by log2 e) so one
// exp2 per score does the work. The L×S matrix is never stored: memory is O(tile) per worker.
#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/flash_common.h"
#include "kernels/cpu/vec_ops.h"

namespace qkv::cpu {
namespace {

using namespace flash;

// Scratch of one worker, allocated once per call.
struct Scratch {
  AlignedBuffer<float> q, s, o, v;  // packed Q tile, score tile, output accumulator, clean V tile
  std::vector<float> m, l;
  std::vector<int64_t> end;
  std::vector<uint8_t> q_bad, poisoned, seen;
  Scratch(const FlashProblem& p)
      : q(kRows * p.Dk),
        s(kRows * kKeys),
        o(kRows * p.Dv),
        v(kKeys * p.Dv),
        m(kRows),
        l(kRows),
        end(kRows),
        q_bad(kRows),
        poisoned(kRows),
        seen(kRows) {}
};

// Whether query row (b, h, i), whose keys [0, end) pass causality and lengths, sees key j.
bool sees(const FlashProblem& p, const float* bias, int64_t end, int64_t j) {
  return j < end && (!bias || bias_at(p, bias, j) != -kInf);
}

void forward_tile(const FlashProblem& p, const Group& g, int64_t r0, int64_t rows,
                  const uint8_t* bad, float* out, float* lse, Scratch& w) {
  const float c = p.scale * kLog2e;
  int64_t max_end = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t h = g.head(p, r0 + r), i = g.pos(p, r0 + r);
    const float* q = row_of(p.q, g.b, h, i);
    std::copy(q, q + p.Dk, w.q.data() + r * p.Dk);
    w.q_bad[r] = !all_finite(q, p.Dk);
    w.end[r] = visible_end(p, g.b, i);
    max_end = std::max(max_end, w.end[r]);
    w.m[r] = -kInf;
    w.l[r] = 0;
    w.poisoned[r] = w.seen[r] = 0;
  }
  std::fill(w.o.data(), w.o.data() + rows * p.Dv, 0.0f);

  // Key tiles past every row's causal or length limit are skipped whole.
  for (int64_t j0 = 0; j0 < max_end; j0 += kKeys) {
    const int64_t n = std::min(kKeys, max_end - j0);
    const float* k = row_of(p.k, g.b, g.kv, j0);
    const float* v = row_of(p.v, g.b, g.kv, j0);
    int64_t ldv = p.v.stride[2];
    bool tile_bad = false;
    for (int64_t j = 0; bad && j < n; ++j) tile_bad = tile_bad || bad[j0 + j] != 0;
    if (tile_bad) {
      // A non-finite value row must not leak into rows that do not see it (0 · NaN = NaN):
      // multiply a copy with those rows zeroed; the rows that see them are poisoned below.
      for (int64_t j = 0; j < n; ++j) {
        float* dst = w.v.data() + j * p.Dv;
        if (bad[j0 + j] & kBadValue)
          std::fill(dst, dst + p.Dv, 0.0f);
        else
          std::copy(v + j * ldv, v + j * ldv + p.Dv, dst);
      }
      v = w.v.data();
      ldv = p.Dv;
    }

    gemm_abt(rows, n, p.Dk, 1.0f, w.q.data(), p.Dk, k, p.k.stride[2], 0.0f, w.s.data(), kKeys);

    for (int64_t r = 0; r < rows; ++r) {
      float* s = w.s.data() + r * kKeys;
      const int64_t h = g.head(p, r0 + r), i = g.pos(p, r0 + r);
      const float* bias = p.bias ? bias_row(p, g.b, h, i) : nullptr;
      const int64_t e = std::clamp<int64_t>(w.end[r] - j0, 0, n);
      scale_row(s, e, c);
      if (bias) add_scaled_bias(p, bias, j0, s, e);
      std::fill(s + e, s + n, -kInf);
      if (w.q_bad[r] || tile_bad) {
        // NaN or ∞ in q_i or a visible k_j / v_j makes the row NaN, whatever the scores say.
        for (int64_t j = 0; j < e; ++j) {
          if (!sees(p, bias, w.end[r], j0 + j)) continue;
          w.seen[r] = 1;
          if (w.q_bad[r] || (bad && bad[j0 + j])) w.poisoned[r] = 1;
        }
      }
      if (w.poisoned[r]) {
        std::fill(s, s + n, 0.0f);
        continue;
      }
      // NaN or +∞ among the scores (from the bias, or overflow) makes the row NaN, as in the
      // reference; their sum shows either (−∞ entries alone only make it −∞).
      float sum = 0;
      const float tile_max = max_row(s, e, &sum);
      if (std::isnan(sum) || sum == kInf) {
        w.poisoned[r] = 1;
        std::fill(s, s + n, 0.0f);
        continue;
      }
      const float m_new = std::max(w.m[r], tile_max);
      if (m_new == -kInf) {  // nothing visible yet: a fully masked tile must not poison m
        std::fill(s, s + n, 0.0f);
        continue;
      }
      w.seen[r] = 1;
      const float alpha = std::exp2(w.m[r] - m_new);  // 0 when m was −∞
      const float tile_sum = exp2_sub_row(s, s, e, m_new);
      std::fill(s + e, s + n, 0.0f);
      w.l[r] = w.l[r] * alpha + tile_sum;
      w.m[r] = m_new;
      if (alpha != 1.0f) scale_row(w.o.data() + r * p.Dv, p.Dv, alpha);
    }

    gemm_ab(rows, p.Dv, n, 1.0f, w.s.data(), kKeys, v, ldv, 1.0f, w.o.data(), p.Dv);
  }

  for (int64_t r = 0; r < rows; ++r) {
    const int64_t h = g.head(p, r0 + r), i = g.pos(p, r0 + r);
    const int64_t row = (g.b * p.Hq + h) * p.L + i;
    float* o = out + row * p.Dv;
    const float* acc = w.o.data() + r * p.Dv;
    if (w.poisoned[r]) {
      std::fill(o, o + p.Dv, std::numeric_limits<float>::quiet_NaN());
      if (lse) lse[row] = std::numeric_limits<float>::quiet_NaN();
    } else if (w.m[r] == -kInf) {  // nothing to attend to: output 0, logsumexp −∞
      std::fill(o, o + p.Dv, 0.0f);
      if (lse) lse[row] = -kInf;
    } else {
      const float inv = 1.0f / w.l[r];
      bool finite = true;
      for (int64_t d = 0; d < p.Dv; ++d) finite = finite && std::isfinite(o[d] = acc[d] * inv);
      if (!finite) std::fill(o, o + p.Dv, std::numeric_limits<float>::quiet_NaN());
      if (lse) lse[row] = (w.m[r] + std::log2(w.l[r])) * kLn2;
    }
  }
}

}  // namespace

void flash_forward(const FlashProblem& p, float* out, float* lse, int threads) {
  if (p.B == 0 || p.Hq == 0 || p.L == 0) return;
  const int64_t G = p.Hq / p.Hkv;
  const int64_t tiles = (G * p.L + kRows - 1) / kRows;
  bool any_bad = false;
  const AlignedBuffer<uint8_t> bad = bad_keys(p, threads, &any_bad);
  std::vector<Scratch> scratch;
  for (int t = 0; t < threads; ++t) scratch.emplace_back(p);
  SingleThreadedBlas blas;
  parallel_for(p.B * p.Hkv * tiles, threads, [&](int64_t item, int worker) {
    const int64_t group = item / tiles, tile = item % tiles;
    const Group g{group / p.Hkv, group % p.Hkv, G, G * p.L};
    const int64_t r0 = tile * kRows;
    forward_tile(p, g, r0, std::min(kRows, g.rows - r0),
                 any_bad ? bad.data() + group * p.S : nullptr, out, lse, scratch[worker]);
  });
}

}  // namespace qkv::cpu
