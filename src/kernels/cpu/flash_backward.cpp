// Fused attention backward, FlashAttention-2 (Dao 2023, Algorithm 2) on the CPU.
//
// Forward was O = P·V with P = softmax(X), X = scale·Q·Kᵀ + bias, and it kept each row's max m and
// sum l = Σ exp(X − m) (SoftmaxStats). So tile by tile, without any L×S buffer:
//   P = exp(X − m) / l               recomputed by the forward's own exponent
//   dV += Pᵀ·dO                      ∂/∂V of O = P·V
//   dP = dO·Vᵀ
//   dX = P ∘ (dP − D), D = rowsum(dO ∘ O)   the softmax backward, since Σ_j P_ij dP_ij = D_i
//   dQ += scale·dX·K,  dK += scale·dXᵀ·Q,  dscale += Σ dX ∘ (Q·Kᵀ)
// One work item is one (batch, kv head) with all the query heads that share it, and one chunk of
// its key tiles: it owns the dK and dV rows of its keys, and sums its keys' share of dQ into a
// partial dQ of its own; the chunks' partials are then added in chunk order. The chunks follow
// from the problem alone (plan_chunks), never from the thread count, and every sum runs in a fixed
// order, so the result is the same bits for any number of threads. (With one work item per group,
// a problem with two kv heads kept two threads busy: issue 31.)
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

// Every group's query rows as the products read them, made once and shared by the group's key
// chunks (a group's rows are consecutive in the contiguous out, dout, stats and dq; so they are
// here, at the same row numbers): Q with non-finite rows zeroed (rounded to bf16 under
// Precision::bf16), Q and dO as pv_tile's packed values of each group, dO itself where it had to
// be rounded, D_i = dO_i·O_i and the end of each row's visible keys.
struct Rows {
  int64_t per_group = 0;  // G·L
  AlignedBuffer<float> q, q_values, dout_values, dout;
  AlignedBuffer<bf16> q16, dout16;  // bf16: Q and dO as qk_tile_bf16 reads them
  // bf16: each group's Q and dO as pv_tile_bf16's packed values (its G·L rows as the "keys"), in
  // place of q_values and dout_values.
  AlignedBuffer<bf16> q_values16, dout_values16;
  std::vector<float> d;
  std::vector<int64_t> end;
};

Rows prepare_rows(const FlashProblem& p, const float* out, const float* dout, int threads) {
  Rows w;
  const int64_t G = p.Hq / p.Hkv, groups = p.B * p.Hkv, rows = p.B * p.Hq * p.L;
  w.per_group = G * p.L;
  w.q.resize(rows * p.Dk);
  if (in_bf16(p)) {
    w.dout.resize(rows * p.Dv);
    w.q16.resize(rows * bf16_row(p.Dk)), w.dout16.resize(rows * bf16_row(p.Dv));
    w.q_values16.resize(groups * bf16_value_panel_elems(w.per_group, p.Dk));
    w.dout_values16.resize(groups * bf16_value_panel_elems(w.per_group, p.Dv));
  } else {
    w.q_values.resize(rows * p.Dk), w.dout_values.resize(rows * p.Dv);
  }
  w.d.resize(rows), w.end.resize(rows);
  // Blocks of rows within a group, so that a few groups still give every thread work.
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (w.per_group + kBlock - 1) / kBlock;
  parallel_for(groups * blocks, threads, [&](int64_t item, int) {
    const int64_t group = item / blocks, r0 = item % blocks * kBlock;
    const int64_t n = std::min(kBlock, w.per_group - r0);
    const Group g{group / p.Hkv, group % p.Hkv, G, w.per_group};
    const int64_t first = group * w.per_group;  // = (b·Hq + kv·G)·L
    const float* dout_rows = dout + first * p.Dv;
    if (in_bf16(p)) {
      round_bf16_floats(dout_rows + r0 * p.Dv, w.dout.data() + (first + r0) * p.Dv, n * p.Dv);
      dout_rows = w.dout.data() + first * p.Dv;
    }
    for (int64_t r = r0; r < r0 + n; ++r) {
      const float* q = row_of(p.q, g.b, g.head(p, r), g.pos(p, r));
      float* packed = w.q.data() + (first + r) * p.Dk;
      if (in_bf16(p))
        round_bf16_floats(q, packed, p.Dk);
      else
        std::copy(q, q + p.Dk, packed);
      // A non-finite q row is packed as zeros so that 0 · NaN cannot reach keys it does not see;
      // its saved max is NaN, which poisons exactly what the row does see.
      if (!all_finite_row(packed, p.Dk)) std::fill(packed, packed + p.Dk, 0.0f);
      w.d[first + r] = dot_row(dout_rows + r * p.Dv, out + (first + r) * p.Dv, p.Dv);
      w.end[first + r] = visible_end(p, g.b, g.pos(p, r));
    }
    if (in_bf16(p)) {  // exact: the values are rounded already
      round_bf16_rows(w.q.data() + (first + r0) * p.Dk, p.Dk, n, p.Dk,
                      w.q16.data() + (first + r0) * bf16_row(p.Dk), bf16_row(p.Dk));
      round_bf16_rows(dout_rows + r0 * p.Dv, p.Dv, n, p.Dv,
                      w.dout16.data() + (first + r0) * bf16_row(p.Dv), bf16_row(p.Dv));
      pack_values_bf16(w.q.data() + (first + r0) * p.Dk, p.Dk, n, p.Dk,
                       w.q_values16.data() + group * bf16_value_panel_elems(w.per_group, p.Dk),
                       w.per_group, r0);
      pack_values_bf16(dout_rows + r0 * p.Dv, p.Dv, n, p.Dv,
                       w.dout_values16.data() + group * bf16_value_panel_elems(w.per_group, p.Dv),
                       w.per_group, r0);
      return;
    }
    pack_values(w.q.data() + (first + r0) * p.Dk, p.Dk, n, p.Dk, w.q_values.data() + first * p.Dk,
                w.per_group, r0);
    pack_values(dout_rows + r0 * p.Dv, p.Dv, n, p.Dv, w.dout_values.data() + first * p.Dv,
                w.per_group, r0);
  });
  return w;
}

// t[j·ldt + r] = to_bf16(x[r·ldx + j]) for r < m, j < n, and t[j·ldt + m] = 0 when m is odd: a
// tile's rows as pv_tile_bf16 reads them transposed (its pairs run along r). In blocks of 16 × 16,
// so that both sides stay within a few cache lines each.
void transpose_bf16(const float* x, int64_t ldx, int64_t m, int64_t n, bf16* t, int64_t ldt) {
  constexpr int64_t kBlock = 16;
  for (int64_t r0 = 0; r0 < m; r0 += kBlock)
    for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
      const int64_t r1 = std::min(m, r0 + kBlock), j1 = std::min(n, j0 + kBlock);
      for (int64_t j = j0; j < j1; ++j)
        for (int64_t r = r0; r < r1; ++r) t[j * ldt + r] = to_bf16(x[r * ldx + j]);
    }
  if (m % 2)
    for (int64_t j = 0; j < n; ++j) t[j * ldt + m] = 0;
}

struct Scratch {
  // Clean K and V tiles; the key tile's K and V as qk_tile's panels and K as packed values; raw
  // scores R = Q·Kᵀ, logits X, probabilities P, dP → dX.
  AlignedBuffer<float> k, v, k_panels, v_panels, k_values, raw, logit, prob, grad;
  AlignedBuffer<bf16> k16, v16;  // bf16: K and V as qk_tile_bf16's key panels
  // bf16: K as pv_tile_bf16's packed values; P and dX transposed, and dX, as its weights.
  AlignedBuffer<bf16> k_values16, pt16, gt16, g16;
  std::vector<uint8_t> flags = std::vector<uint8_t>(kBackwardKeys);
  explicit Scratch(const FlashProblem& p)
      : k(kBackwardKeys * p.Dk),
        v(kBackwardKeys * p.Dv),
        k_panels(p.Dk * kBackwardKeys),
        v_panels(p.Dv * kBackwardKeys),
        k_values(kBackwardKeys * p.Dk),
        raw(kBackwardRows * kBackwardKeys),
        logit(kBackwardRows * kBackwardKeys),
        prob(kBackwardRows * kBackwardKeys),
        grad(kBackwardRows * kBackwardKeys) {
    if (in_bf16(p)) {
      k16.resize(bf16_key_panel_elems(kBackwardKeys, p.Dk));
      v16.resize(bf16_key_panel_elems(kBackwardKeys, p.Dv));
      k_values16.resize(bf16_value_panel_elems(kBackwardKeys, p.Dk));
      pt16.resize(kBackwardKeys * kBackwardRows), gt16.resize(kBackwardKeys * kBackwardRows);
      g16.resize(kBackwardRows * kBackwardKeys);
    }
  }
};

// Every product of a tile by our own kernels, each output one chain in a fixed order:
//   R  = Q·Kᵀ   qk_tile (the forward's bits)     dP = dO·Vᵀ   qk_tile, V as the keys
// (qk_tile_bf16 for both under Precision::bf16: the forward's bits again; the other three take
// their bf16-rounded operands through the float32 tiles)
//   dV += Pᵀ·dO  pv_tile_transposed, dO packed   dK += dXᵀ·Q  pv_tile_transposed, Q packed
//   dQ += dX·K   pv_tile, K packed
// (OpenBLAS re-packed every tile operand of every call; issue 12.)
// Keys [key_begin, key_end) of group g (a whole number of kBackwardKeys tiles from key_begin):
// their dK and dV rows, and their share of dQ summed into dq (zeros on entry), which is laid out as
// the full dQ. Returns their share of ∂loss/∂scale.
double backward_group(const FlashProblem& p, const Group& g, int64_t key_begin, int64_t key_end,
                      const float* dout, const SoftmaxStats& stats, const Rows& rows, float* dq,
                      float* dk, float* dv, Scratch& w) {
  const int64_t first = (g.b * p.Hq + g.kv * g.G) * p.L;
  dout = (in_bf16(p) ? rows.dout.data() : dout) + first * p.Dv;
  dq += first * p.Dk;
  const float* row_max = stats.max + first;
  const float* row_sum = stats.sum + first;
  const float* q = rows.q.data() + first * p.Dk;
  const float* d = rows.d.data() + first;
  const int64_t* row_end = rows.end.data() + first;
  dk += (g.b * p.Hkv + g.kv) * p.S * p.Dk;
  dv += (g.b * p.Hkv + g.kv) * p.S * p.Dv;
  const bool b16 = in_bf16(p);
  const ValueRows q_values{b16 ? nullptr : rows.q_values.data() + first * p.Dk, 0, g.rows};
  const ValueRows dout_values{b16 ? nullptr : rows.dout_values.data() + first * p.Dv, 0, g.rows};
  const int64_t group = g.b * p.Hkv + g.kv;
  const bf16* q_values16 =
      b16 ? rows.q_values16.data() + group * bf16_value_panel_elems(g.rows, p.Dk) : nullptr;
  const bf16* dout_values16 =
      b16 ? rows.dout_values16.data() + group * bf16_value_panel_elems(g.rows, p.Dv) : nullptr;
  const int64_t ldq16 = bf16_row(p.Dk), ldo16 = bf16_row(p.Dv);

  double dscale = 0;
  for (int64_t j0 = key_begin; j0 < key_end; j0 += kBackwardKeys) {
    const int64_t n = std::min(kBackwardKeys, key_end - j0);
    TileRows t{row_of(p.k, g.b, g.kv, j0), p.k.stride[2], row_of(p.v, g.b, g.kv, j0),
               p.v.stride[2]};
    t = precise_tile(p, t, n, w.k.data(), w.v.data());
    if (tile_flags(p, t.k, t.ldk, t.v, t.ldv, n, w.flags.data()))
      t = clean_tile(p, t, n, w.flags.data(), w.k.data(), w.v.data());
    KeyTile keys{t.k, t.ldk, n, w.k_panels.data()};
    if (b16) {  // the forward's bf16 scores need qk_tile_bf16's panels, and so does dP = dO·Vᵀ
      pack_keys_bf16(t.k, t.ldk, n, p.Dk, w.k16.data());
      pack_keys_bf16(t.v, t.ldv, n, p.Dv, w.v16.data());
    }
    KeyTile values_as_keys{t.v, t.ldv, n, w.v_panels.data()};
    bool packed_k = false;
    const ValueRows k_values{w.k_values.data(), 0, n};

    for (int64_t r0 = 0; r0 < g.rows; r0 += kBackwardRows) {
      const int64_t m = std::min(kBackwardRows, g.rows - r0);
      bool any_visible = false;
      for (int64_t r = r0; r < r0 + m && !any_visible; ++r) any_visible = row_end[r] > j0;
      if (!any_visible) continue;  // a tile wholly hidden by causality or lengths
      if (!packed_k) {
        if (b16)
          pack_values_bf16(t.k, t.ldk, n, p.Dk, w.k_values16.data(), n, 0);
        else
          pack_values(t.k, t.ldk, n, p.Dk, w.k_values.data(), n, 0);
        packed_k = true;
      }

      float* raw = w.raw.data();
      float* logit = w.logit.data();
      float* prob = w.prob.data();
      float* grad = w.grad.data();
      // The forward's scores, bit for bit (qk_tile.h: the same rows per tile), so that
      // exp(x − m) of a row's max is 1.
      if (b16)
        qk_tile_bf16(rows.q16.data() + (first + r0) * ldq16, ldq16, m, w.k16.data(), n, n, p.Dk,
                     raw, kBackwardKeys);
      else
        qk_tile(q + r0 * p.Dk, p.Dk, m, keys, p.Dk, raw, kBackwardKeys);
      for (int64_t r = 0; r < m; ++r) {
        const int64_t row = r0 + r;
        float* x = logit + r * kBackwardKeys;
        float* pr = prob + r * kBackwardKeys;
        const int64_t e = std::clamp<int64_t>(row_end[row] - j0, 0, n);
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
      if (b16)
        qk_tile_bf16(rows.dout16.data() + (first + r0) * ldo16, ldo16, m, w.v16.data(), n, n, p.Dv,
                     grad, kBackwardKeys);
      else
        qk_tile(dout + r0 * p.Dv, p.Dv, m, values_as_keys, p.Dv, grad, kBackwardKeys);
      for (int64_t r = 0; r < m; ++r) {
        const int64_t at = r * kBackwardKeys;
        // grad becomes scale·dX, so that a NaN still reaches dQ and dK when scale = 0.
        dscale +=
            softmax_grad_row(prob + at, logit + at, raw + at, grad + at, n, d[r0 + r], p.scale);
      }
      if (b16) {
        // The three products on bf16 tiles: P and scale·dX rounded, transposed for dV and dK
        // (their pairs run along the query rows, as dO's and Q's packed values do).
        transpose_bf16(prob, kBackwardKeys, m, n, w.pt16.data(), kBackwardRows);
        transpose_bf16(grad, kBackwardKeys, m, n, w.gt16.data(), kBackwardRows);
        round_bf16_rows(grad, kBackwardKeys, m, n, w.g16.data(), kBackwardKeys);
        pv_tile_bf16(w.pt16.data(), kBackwardRows, n, dout_values16, g.rows, r0, m, p.Dv,
                     dv + j0 * p.Dv, p.Dv);
        pv_tile_bf16(w.gt16.data(), kBackwardRows, n, q_values16, g.rows, r0, m, p.Dk,
                     dk + j0 * p.Dk, p.Dk);
        pv_tile_bf16(w.g16.data(), kBackwardKeys, m, w.k_values16.data(), n, 0, n, p.Dk,
                     dq + r0 * p.Dk, p.Dk);
        continue;
      }
      pv_tile_transposed(prob, kBackwardKeys, n, dout_values, r0, m, p.Dv, dv + j0 * p.Dv, p.Dv);
      pv_tile_transposed(grad, kBackwardKeys, n, q_values, r0, m, p.Dk, dk + j0 * p.Dk, p.Dk);
      pv_tile(grad, kBackwardKeys, m, k_values, 0, n, p.Dk, dq + r0 * p.Dk, p.Dk);
    }
  }
  return dscale;
}

}  // namespace

namespace flash {

BackwardChunks backward_chunks(int64_t B, int64_t Hq, int64_t Hkv, int64_t S, int64_t Dk,
                               int64_t L) {
  constexpr int64_t kWantItems = 32;
  constexpr double kPartialBytes = 256.0 * (1 << 20);
  const int64_t tiles = (S + kBackwardKeys - 1) / kBackwardKeys;
  const int64_t groups = std::max<int64_t>(1, B * Hkv);
  const double dq_bytes = 4.0 * static_cast<double>(B) * Hq * L * Dk;
  int64_t count =
      std::clamp<int64_t>((kWantItems + groups - 1) / groups, 1, std::max<int64_t>(tiles, 1));
  if (dq_bytes > 0)
    count = std::min<int64_t>(count, 1 + static_cast<int64_t>(kPartialBytes / dq_bytes));
  BackwardChunks c;
  const int64_t tiles_per_chunk = (std::max<int64_t>(tiles, 1) + count - 1) / count;
  c.keys = tiles_per_chunk * kBackwardKeys;
  c.count = std::max<int64_t>(1, (S + c.keys - 1) / c.keys);
  return c;
}

}  // namespace flash

void flash_backward(const FlashProblem& p, const float* out, const float* dout,
                    const SoftmaxStats& stats, float* dq, float* dk, float* dv, double* dscale,
                    int threads) {
  const int64_t dq_size = p.B * p.Hq * p.L * p.Dk;
  std::fill(dq, dq + dq_size, 0.0f);
  std::fill(dk, dk + p.B * p.Hkv * p.S * p.Dk, 0.0f);
  std::fill(dv, dv + p.B * p.Hkv * p.S * p.Dv, 0.0f);
  *dscale = 0;
  if (p.B == 0 || p.Hkv == 0 || p.L == 0 || p.S == 0) return;
  const int64_t G = p.Hq / p.Hkv;
  const int64_t groups = p.B * p.Hkv;
  const BackwardChunks chunks = backward_chunks(p.B, p.Hq, p.Hkv, p.S, p.Dk, p.L);
  const int64_t items = groups * chunks.count;
  const int workers = static_cast<int>(std::min<int64_t>(threads, items));
  const Rows rows = prepare_rows(p, out, dout, threads);
  std::vector<Scratch> scratch;
  for (int t = 0; t < workers; ++t) scratch.emplace_back(p);
  // Chunk c > 0 sums its share of dQ into partial[c − 1], laid out as dq.
  AlignedBuffer<float> partial((chunks.count - 1) * dq_size);
  std::fill(partial.data(), partial.data() + partial.size(), 0.0f);
  std::vector<double> dscale_of(items, 0.0);
  parallel_for(items, workers, [&](int64_t item, int worker) {
    // Chunk-major, so that the first items are the groups' first keys: under causality they see
    // the most rows, and the workers finish on small items (the order does not change the bits).
    const int64_t chunk = item / groups, group = item % groups;
    const Group g{group / p.Hkv, group % p.Hkv, G, G * p.L};
    const int64_t begin = chunk * chunks.keys, end = std::min(p.S, begin + chunks.keys);
    float* to = chunk == 0 ? dq : partial.data() + (chunk - 1) * dq_size;
    dscale_of[group * chunks.count + chunk] =
        backward_group(p, g, begin, end, dout, stats, rows, to, dk, dv, scratch[worker]);
  });
  if (chunks.count > 1) {
    // dQ = ((chunk 0 + chunk 1) + chunk 2) + …, each element in that order, in blocks of rows.
    constexpr int64_t kBlock = 16384;
    parallel_for((dq_size + kBlock - 1) / kBlock, threads, [&](int64_t block, int) {
      const int64_t lo = block * kBlock, hi = std::min(dq_size, lo + kBlock);
      for (int64_t c = 1; c < chunks.count; ++c) {
        const float* from = partial.data() + (c - 1) * dq_size;
        for (int64_t x = lo; x < hi; ++x) dq[x] += from[x];
      }
    });
  }
  for (double x : dscale_of) *dscale += x;  // in a fixed order, whatever the threads
}

}  // namespace qkv::cpu
