// Fused attention backward, FlashAttention-2 (Dao 2023, Algorithm 2) on the CPU.
//
// Forward was O = P·V with P = softmax(X), X = scale·Q·Kᵀ + bias, and it kept each row's max m and
// sum l = Σ exp(X − m) (SoftmaxStats). So tile by tile, without any L×S buffer:
//   P = exp(X − m) / l               recomputed by the forward's own exponent
//   dV += Pᵀ·dO                      ∂/∂V of O = P·V
//   dP = dO·Vᵀ
//   dX = P ∘ (dP − D), D = rowsum(dO ∘ O)   the softmax backward, since Σ_j P_ij dP_ij = D_i
//   dQ += scale·dX·K,  dK += scale·dXᵀ·Q,  dscale += Σ dX ∘ (Q·Kᵀ)
// One work item is one (batch, kv head) with all the query heads that share it; it runs its key
// tiles and query tiles in a fixed order and owns every dQ, dK, dV row it writes, so the result
// is the same bits for any number of threads.
#include <cmath>
#include <vector>

#include "kernels/cpu/flash_common.h"
#include "kernels/cpu/pv_tile.h"
#include "kernels/cpu/qk_tile.h"
#include "kernels/cpu/vec_ops.h"
#include "qkv/threads.h"

namespace qkv::cpu {
namespace {

using namespace flash;

struct Scratch {
  // The group's Q rows (non-finite rows zeroed), and Q and dO as pv_tile's packed values; clean K
  // and V tiles; the key tile's K and V as qk_tile's panels and K as packed values; raw scores
  // R = Q·Kᵀ, logits X, probabilities P, dP → dX.
  AlignedBuffer<float> q, q_values, dout_values, k, v, k_panels, v_panels, k_values, raw, logit,
      prob, grad;
  std::vector<float> d;
  std::vector<int64_t> end;
  std::vector<uint8_t> flags = std::vector<uint8_t>(kBackwardKeys);
  Scratch(const FlashProblem& p)
      : q(group_rows(p) * p.Dk),
        q_values(group_rows(p) * p.Dk),
        dout_values(group_rows(p) * p.Dv),
        k(kBackwardKeys * p.Dk),
        v(kBackwardKeys * p.Dv),
        k_panels(p.Dk * kBackwardKeys),
        v_panels(p.Dv * kBackwardKeys),
        k_values(kBackwardKeys * p.Dk),
        raw(kBackwardRows * kBackwardKeys),
        logit(kBackwardRows * kBackwardKeys),
        prob(kBackwardRows * kBackwardKeys),
        grad(kBackwardRows * kBackwardKeys) {}
  static int64_t group_rows(const FlashProblem& p) {
    return std::max<int64_t>(1, p.Hq / std::max<int64_t>(p.Hkv, 1) * p.L);
  }
};

// Every product of a tile by our own kernels, each output one chain in a fixed order:
//   R  = Q·Kᵀ   qk_tile (the forward's bits)     dP = dO·Vᵀ   qk_tile, V as the keys
//   dV += Pᵀ·dO  pv_tile_transposed, dO packed   dK += dXᵀ·Q  pv_tile_transposed, Q packed
//   dQ += dX·K   pv_tile, K packed
// (OpenBLAS re-packed every tile operand of every call; issue 12.)
double backward_group(const FlashProblem& p, const Group& g, const float* out, const float* dout,
                      const SoftmaxStats& stats, float* dq, float* dk, float* dv, Scratch& w) {
  // The group's rows are consecutive in the contiguous out, dout, stats and dq.
  const int64_t first = (g.b * p.Hq + g.kv * g.G) * p.L;
  out += first * p.Dv, dout += first * p.Dv, dq += first * p.Dk;
  const float* row_max = stats.max + first;
  const float* row_sum = stats.sum + first;
  dk += (g.b * p.Hkv + g.kv) * p.S * p.Dk;
  dv += (g.b * p.Hkv + g.kv) * p.S * p.Dv;
  w.d.resize(g.rows), w.end.resize(g.rows);
  for (int64_t r = 0; r < g.rows; ++r) {
    const float* q = row_of(p.q, g.b, g.head(p, r), g.pos(p, r));
    float* packed = w.q.data() + r * p.Dk;
    // A non-finite q row is packed as zeros so that 0 · NaN cannot reach keys it does not see;
    // its saved max is NaN, which poisons exactly what the row does see.
    if (all_finite_row(q, p.Dk))
      std::copy(q, q + p.Dk, packed);
    else
      std::fill(packed, packed + p.Dk, 0.0f);
    w.d[r] = dot_row(dout + r * p.Dv, out + r * p.Dv, p.Dv);
    w.end[r] = visible_end(p, g.b, g.pos(p, r));
  }
  pack_values(w.q.data(), p.Dk, g.rows, p.Dk, w.q_values.data(), g.rows, 0);
  pack_values(dout, p.Dv, g.rows, p.Dv, w.dout_values.data(), g.rows, 0);
  const ValueRows q_values{w.q_values.data(), 0, g.rows};
  const ValueRows dout_values{w.dout_values.data(), 0, g.rows};

  double dscale = 0;
  for (int64_t j0 = 0; j0 < p.S; j0 += kBackwardKeys) {
    const int64_t n = std::min(kBackwardKeys, p.S - j0);
    TileRows t{row_of(p.k, g.b, g.kv, j0), p.k.stride[2], row_of(p.v, g.b, g.kv, j0),
               p.v.stride[2]};
    if (tile_flags(p, t.k, t.ldk, t.v, t.ldv, n, w.flags.data()))
      t = clean_tile(p, t, n, w.flags.data(), w.k.data(), w.v.data());
    KeyTile keys{t.k, t.ldk, n, w.k_panels.data()};
    KeyTile values_as_keys{t.v, t.ldv, n, w.v_panels.data()};
    bool packed_k = false;
    const ValueRows k_values{w.k_values.data(), 0, n};

    for (int64_t r0 = 0; r0 < g.rows; r0 += kBackwardRows) {
      const int64_t m = std::min(kBackwardRows, g.rows - r0);
      bool any_visible = false;
      for (int64_t r = r0; r < r0 + m && !any_visible; ++r) any_visible = w.end[r] > j0;
      if (!any_visible) continue;  // a tile wholly hidden by causality or lengths
      if (!packed_k) pack_values(t.k, t.ldk, n, p.Dk, w.k_values.data(), n, 0), packed_k = true;

      float* raw = w.raw.data();
      float* logit = w.logit.data();
      float* prob = w.prob.data();
      float* grad = w.grad.data();
      // The forward's scores, bit for bit (qk_tile.h: the same rows per tile), so that
      // exp(x − m) of a row's max is 1.
      qk_tile(w.q.data() + r0 * p.Dk, p.Dk, m, keys, p.Dk, raw, kBackwardKeys);
      for (int64_t r = 0; r < m; ++r) {
        const int64_t row = r0 + r;
        float* x = logit + r * kBackwardKeys;
        float* pr = prob + r * kBackwardKeys;
        const int64_t e = std::clamp<int64_t>(w.end[row] - j0, 0, n);
        std::copy(raw + r * kBackwardKeys, raw + r * kBackwardKeys + e, x);
        scale_row(x, e, p.scale);
        if (p.bias) add_bias(p, bias_row(p, g.b, g.head(p, row), g.pos(p, row)), j0, x, e);
        std::fill(x + e, x + n, -kInf);
        const float m = row_max[row];
        if (std::isnan(m)) {  // a poisoned row: NaN wherever it sees
          for (int64_t j = 0; j < n; ++j)
            pr[j] = x[j] == -kInf ? 0.0f : std::numeric_limits<float>::quiet_NaN();
        } else if (m == -kInf) {  // nothing visible: no gradient at all
          std::fill(pr, pr + n, 0.0f);
        } else {
          // The forward's exponent, on the same scores, then the forward's 1/l.
          const float* from = raw_units(p) ? raw + r * kBackwardKeys : x;
          exp_sub_row(from, pr, e, m, max_unit(p) * kLog2e);
          scale_row(pr, e, 1.0f / row_sum[row]);
          std::fill(pr + e, pr + n, 0.0f);
        }
      }
      pv_tile_transposed(prob, kBackwardKeys, n, dout_values, r0, m, p.Dv, dv + j0 * p.Dv, p.Dv);
      qk_tile(dout + r0 * p.Dv, p.Dv, m, values_as_keys, p.Dv, grad, kBackwardKeys);
      for (int64_t r = 0; r < m; ++r) {
        const int64_t at = r * kBackwardKeys;
        // grad becomes scale·dX, so that a NaN still reaches dQ and dK when scale = 0.
        dscale +=
            softmax_grad_row(prob + at, logit + at, raw + at, grad + at, n, w.d[r0 + r], p.scale);
      }
      pv_tile_transposed(grad, kBackwardKeys, n, q_values, r0, m, p.Dk, dk + j0 * p.Dk, p.Dk);
      pv_tile(grad, kBackwardKeys, m, k_values, 0, n, p.Dk, dq + r0 * p.Dk, p.Dk);
    }
  }
  return dscale;
}

}  // namespace

void flash_backward(const FlashProblem& p, const float* out, const float* dout,
                    const SoftmaxStats& stats, float* dq, float* dk, float* dv, double* dscale,
                    int threads) {
  std::fill(dq, dq + p.B * p.Hq * p.L * p.Dk, 0.0f);
  std::fill(dk, dk + p.B * p.Hkv * p.S * p.Dk, 0.0f);
  std::fill(dv, dv + p.B * p.Hkv * p.S * p.Dv, 0.0f);
  *dscale = 0;
  if (p.B == 0 || p.Hkv == 0 || p.L == 0 || p.S == 0) return;
  const int64_t G = p.Hq / p.Hkv;
  const int64_t groups = p.B * p.Hkv;
  const int workers = static_cast<int>(std::min<int64_t>(threads, groups));
  std::vector<Scratch> scratch;
  for (int t = 0; t < workers; ++t) scratch.emplace_back(p);
  std::vector<double> partial(groups, 0.0);
  parallel_for(groups, workers, [&](int64_t item, int worker) {
    const Group g{item / p.Hkv, item % p.Hkv, G, G * p.L};
    partial[item] = backward_group(p, g, out, dout, stats, dq, dk, dv, scratch[worker]);
  });
  for (double x : partial) *dscale += x;  // in a fixed order, whatever the threads
}

}  // namespace qkv::cpu
