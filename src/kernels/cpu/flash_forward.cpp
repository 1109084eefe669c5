// Fused attention forward, FlashAttention-2 (Dao 2023, Algorithm 1) on the CPU.
//
// For each tile of query rows, key/value tiles stream through cache; each row keeps a running max
// m and sum l of its exponentials (the online softmax of Milakov & Gimelshein 2018), rescaling its
// output accumulator whenever m grows. Maxima and logsumexps stay in natural-log units and each
// exponential is 2^((s − m)·log2 e), the difference taken first: scaling scores into log2 units
// before subtracting would round away digits of large logits. The L×S matrix is never stored:
// memory is O(tile) per worker.
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

// Rows of a tile that go through scores, softmax and P·V together, so that their scores
// (kSubRows × kKeys floats, 48 KiB) stay in cache between the three steps.
constexpr int64_t kSubRows = 24;
// A bound on ‖q‖·‖k‖ below which no partial sum of q·k can overflow float32 (3.4e38), with room
// for the rounding of D terms.
constexpr float kNoOverflow = 1e37f;

// Scratch of one worker, allocated once per call.
struct Scratch {
  // Packed Q tile, transposed K tile, score tile, output accumulator, clean K and V tiles; under
  // Precision::bf16 the Q tile and the probabilities of a block of rows as bf16 (bf16_tile.h).
  AlignedBuffer<float> q, kt, s, o, k, v;
  AlignedBuffer<bf16> q16, p16;
  std::vector<float> m, l, q_norm, tile_max;
  std::vector<int64_t> end;
  std::vector<uint8_t> q_bad, poisoned, bad_value, flags;
  explicit Scratch(const FlashProblem& p)
      : q(kRows * p.Dk),
        kt(p.Dk * kKeys),
        s(kSubRows * kKeys),
        o(kRows * p.Dv),
        k(kKeys * p.Dk),
        v(kKeys * p.Dv),
        m(kRows),
        l(kRows),
        q_norm(kRows),
        tile_max(kSubRows),
        end(kRows),
        q_bad(kRows),
        poisoned(kRows),
        bad_value(kRows),
        flags(kKeys) {
    if (in_bf16(p)) q16.resize(kRows * bf16_row(p.Dk)), p16.resize(kSubRows * kKeys);
  }
};

// Whether query row (b, h, i), whose keys [0, end) pass causality and lengths, sees key j.
bool sees(const FlashProblem& p, const float* bias, int64_t end, int64_t j) {
  return j < end && (!bias || bias_at(p, bias, j) != -kInf);
}

// The online softmax step of one row over one tile: s holds its raw scores q·k_j for keys
// j0 .. j0 + n, of which [0, e) pass causality and lengths. Leaves the probabilities in s
// (0 where masked) and rescales the row's accumulator when its max grows.
//
// m is in the units of flash::raw_units. known_max, where given, is the max of s[0, e), all of
// them finite (qk_tile took it on the way).
void softmax_step(const FlashProblem& p, const float* bias, int64_t j0, int64_t n, int64_t e,
                  float* s, float& m, float& l, float* o, uint8_t& poisoned,
                  const float* known_max) {
  // A score or logit that is not finite though q and k are (they were checked) overflowed float32,
  // or came from an ∞ or NaN in the bias: the row is NaN, as in the reference (qkv/attention.h,
  // "Overflow").
  // Only a −∞ bias masks.
  uint32_t seen = 0;
  float tile_max;
  if (known_max) {
    tile_max = *known_max;
  } else if (raw_units(p)) {
    tile_max = max_row(s, e, &seen);
    if (seen) poisoned = 1;
  } else {
    scale_row(s, e, p.scale);
    if (!all_finite_row(s, e)) poisoned = 1;
    if (bias && add_bias(p, bias, j0, s, e)) poisoned = 1;
    tile_max = max_row(s, e, &seen);
    if (seen & kSawNaNOrPlusInf) poisoned = 1;
  }
  std::fill(s + e, s + n, -kInf);
  const float m_new = std::max(m, tile_max);
  if (poisoned || m_new == -kInf) {  // a fully masked tile must not poison the running max
    std::fill(s, s + n, 0.0f);
    return;
  }
  const float unit = max_unit(p);
  const float alpha = std::exp((m - m_new) * unit);  // 0 when m was −∞
  const float tile_sum = exp_sub_row(s, s, e, m_new, unit * kLog2e);
  std::fill(s + e, s + n, 0.0f);
  l = l * alpha + tile_sum;
  m = m_new;
  if (alpha != 1.0f) scale_row(o, p.Dv, alpha);
}

// Runs rows [r0, r0 + rows) of group g against keys [j_begin, j_end), leaving each row's running
// max m, sum l, unnormalized output o and poison flags in the worker's scratch. The scores take
// `form`, that of the whole tile of rows these belong to. The keys and values come packed (pk)
// or, for tiles of dot-form rows (decoding), in place.
void accumulate(const FlashProblem& p, const Group& g, int64_t r0, int64_t rows, int64_t j_begin,
                int64_t j_end, QkForm form, PackedKv* pk, Scratch& w) {
  int64_t max_end = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* from = row_of(p.q, g.b, g.head(p, r0 + r), g.pos(p, r0 + r));
    float* q = w.q.data() + r * p.Dk;
    if (in_bf16(p))
      round_bf16_floats(from, q, p.Dk);
    else
      std::copy(from, from + p.Dk, q);
    w.q_bad[r] = !all_finite_row(q, p.Dk);
    w.q_norm[r] = w.q_bad[r] ? kInf : std::sqrt(dot_row(q, q, p.Dk));
    w.end[r] = visible_end(p, g.b, g.pos(p, r0 + r));
    max_end = std::max(max_end, w.end[r]);
    w.m[r] = -kInf;
    w.l[r] = 0;
    w.poisoned[r] = w.bad_value[r] = 0;
  }
  std::fill(w.o.data(), w.o.data() + rows * p.Dv, 0.0f);
  const bool b16 = in_bf16(p);
  const int64_t ldq16 = bf16_row(p.Dk);
  if (b16) round_bf16_rows(w.q.data(), p.Dk, rows, p.Dk, w.q16.data(), ldq16);  // exact: rounded

  // The scores by qk_tile, not SGEMM: the backward recomputes them and must get the same bits
  // (the form of the whole tile's row count, however many rows go at once). bf16 has one form,
  // qk_tile_bf16's, on keys always packed.
  const int64_t group = g.b * p.Hkv + g.kv;
  if (form == QkForm::kDot && !b16) pk = nullptr;
  // Key tiles past every row's causal or length limit are skipped whole.
  max_end = std::min(max_end, j_end);
  for (int64_t j0 = j_begin; j0 < max_end; j0 += kKeys) {
    const int64_t n = std::min(kKeys, max_end - j0);
    const uint8_t* flags;
    bool tile_bad;
    KeyTile keys;
    ValueRows values;  // the tile's first key is row v_row of it
    int64_t v_row = 0;
    if (pk) {
      flags = pk->flags.data() + group * p.S + j0;
      tile_bad = pk->tile_bad[group * pk->tiles + j0 / kKeys];
      keys = KeyTile{nullptr, 0, n, pk->tile_keys(p, group, j0 / kKeys), std::min(kKeys, p.S - j0)};
      values = pk->values(p, group);
      v_row = j0;
    } else {
      TileRows t{row_of(p.k, g.b, g.kv, j0), p.k.stride[2], row_of(p.v, g.b, g.kv, j0),
                 p.v.stride[2]};
      tile_bad = tile_flags(p, t.k, t.ldk, t.v, t.ldv, n, w.flags.data());
      if (tile_bad) t = clean_tile(p, t, n, w.flags.data(), w.k.data(), w.v.data());
      flags = w.flags.data();
      keys = KeyTile{t.k, t.ldk, n, w.kt.data()};
      values = ValueRows{t.v, t.ldv};
    }

    // Where no raw score of the tile can be NaN or ±∞ — finite q and k with ‖q‖·‖k‖ far below
    // the float32 range (Cauchy–Schwarz bounds every partial sum) — qk_tile takes each row's max.
    const float key_norm =
        pk && raw_units(p) && !tile_bad ? pk->key_norm[group * pk->tiles + j0 / kKeys] : kInf;
    // The whole tile's panels, for every sub-block (bf16's are packed already).
    if (form == QkForm::kOuter && !keys.packed && !b16) {
      pack_keys(keys.k, keys.ldk, n, p.Dk, keys.kt);
      keys.packed = n;
    }
    for (int64_t i0 = 0; i0 < rows; i0 += kSubRows) {
      const int64_t mi = std::min(kSubRows, rows - i0);
      // Only the keys some row of these mi sees: on the causal diagonal, fewer than the tile's.
      // (A row that sees none of them skips the tile, which leaves m, l and o as they were.)
      int64_t sub_end = 0;
      for (int64_t r = i0; r < i0 + mi; ++r) sub_end = std::max(sub_end, w.end[r]);
      const int64_t ns = std::clamp<int64_t>(sub_end - j0, 0, n);
      if (ns == 0) continue;
      KeyTile sub_keys = keys;
      sub_keys.n = ns;
      std::fill(w.tile_max.begin(), w.tile_max.end(), -kInf);
      float* row_max = key_norm < kInf ? w.tile_max.data() : nullptr;
      if (b16)
        qk_tile_bf16(w.q16.data() + i0 * ldq16, ldq16, mi, pk->tile_keys16(p, group, j0 / kKeys),
                     ns, keys.packed, p.Dk, w.s.data(), kKeys, row_max);
      else
        qk_tile(w.q.data() + i0 * p.Dk, p.Dk, mi, sub_keys, p.Dk, w.s.data(), kKeys, form, row_max);
      for (int64_t r = i0; r < i0 + mi; ++r) {
        const float* bias =
            p.bias ? bias_row(p, g.b, g.head(p, r0 + r), g.pos(p, r0 + r)) : nullptr;
        const int64_t e = std::clamp<int64_t>(w.end[r] - j0, 0, ns);
        if (w.q_bad[r] || tile_bad) {
          // NaN or ∞ in q_i or a visible k_j / v_j makes the row NaN, whatever the scores say.
          // A bad value row spoils only the output; the weights and logsumexp stay as they are.
          for (int64_t j = 0; j < e; ++j) {
            if (!sees(p, bias, w.end[r], j0 + j)) continue;
            if (w.q_bad[r] || (flags[j] & kBadKey)) w.poisoned[r] = 1;
            if (flags[j] & kBadValue) w.bad_value[r] = 1;
          }
        }
        const bool max_known = e == ns && w.q_norm[r] * key_norm <= kNoOverflow;
        softmax_step(p, bias, j0, ns, e, w.s.data() + (r - i0) * kKeys, w.m[r], w.l[r],
                     w.o.data() + r * p.Dv, w.poisoned[r],
                     max_known ? &w.tile_max[r - i0] : nullptr);
      }
      // O += P·V while P is still in cache (pv_tile: no re-packing, a fixed order of sums). In
      // bf16, P rounded (an odd ns padded with a 0); l keeps the sum of the unrounded exponentials.
      if (b16) {
        round_bf16_rows(w.s.data(), kKeys, mi, ns, w.p16.data(), kKeys);
        pv_tile_bf16(w.p16.data(), kKeys, mi, pk->values16(p, group), p.S, j0, ns, p.Dv,
                     w.o.data() + i0 * p.Dv, p.Dv);
      } else {
        pv_tile(w.s.data(), kKeys, mi, values, v_row, ns, p.Dv, w.o.data() + i0 * p.Dv, p.Dv);
      }
    }
  }
}

// Where finish_row writes one row: its output, and its logsumexp and softmax statistics where
// asked for.
struct RowOut {
  float* o;
  float* lse;
  float* max;
  float* sum;
};

// Writes one row's output, logsumexp and statistics from its running max m (flash::raw_units),
// sum l and unnormalized output acc: NaN when poisoned, 0 and −∞ when nothing was visible.
void finish_row(const FlashProblem& p, bool poisoned, bool bad_value, float m, float l,
                const float* acc, const RowOut& to) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float lse;
  if (poisoned) {
    std::fill(to.o, to.o + p.Dv, nan);
    lse = m = nan;
  } else if (m == -kInf) {  // nothing to attend to: output 0, logsumexp −∞
    std::fill(to.o, to.o + p.Dv, 0.0f);
    lse = -kInf, l = 0;
  } else {
    const float inv = 1.0f / l;
    bool finite = true;
    for (int64_t d = 0; d < p.Dv; ++d) finite = finite && std::isfinite(to.o[d] = acc[d] * inv);
    if (!finite || bad_value) std::fill(to.o, to.o + p.Dv, nan);  // NaN or ∞ in a visible value
    lse = m * max_unit(p) + std::log(l);
  }
  if (to.lse) *to.lse = lse;
  if (to.max) *to.max = m, *to.sum = l;
}

int64_t out_row(const FlashProblem& p, const Group& g, int64_t r) {
  return (g.b * p.Hq + g.head(p, r)) * p.L + g.pos(p, r);
}

// Partial results of key splits, merged in split order (FlashDecoding; Dao et al. 2023).
struct Splits {
  int64_t count = 1, keys = 0;  // number of splits, keys per split (a multiple of kKeys)
  AlignedBuffer<float> m, l, o;
  AlignedBuffer<uint8_t> poisoned;  // bit 1: the row is NaN; bit 2: only its output is
};

// Decode-like shapes (few query rows, many keys) have too few work items to fill the machine:
// split the keys too. The choice depends on the shape alone, never on the thread count, so the
// bits do not either.
Splits plan_splits(const FlashProblem& p, int64_t items, int64_t rows_total) {
  Splits sp;
  constexpr int64_t kWantItems = 32, kMinKeysPerSplit = 2 * kKeys;  // 32: 16 cores, 2 each
  if (items >= kWantItems || p.S < 2 * kMinKeysPerSplit) return sp;
  sp.count = std::min(kWantItems / items, p.S / kMinKeysPerSplit);
  if (sp.count <= 1) return Splits{};
  sp.keys = ((p.S + sp.count - 1) / sp.count + kKeys - 1) / kKeys * kKeys;
  sp.count = (p.S + sp.keys - 1) / sp.keys;
  sp.m.resize(sp.count * rows_total);
  sp.l.resize(sp.count * rows_total);
  sp.o.resize(sp.count * rows_total * p.Dv);
  sp.poisoned.resize(sp.count * rows_total);
  return sp;
}

}  // namespace

void flash_forward(const FlashProblem& p, float* out, float* lse, int threads, SoftmaxStats stats) {
  if (p.B == 0 || p.Hq == 0 || p.L == 0) return;
  const int64_t G = p.Hq / p.Hkv;
  const int64_t tiles = (G * p.L + kRows - 1) / kRows;
  const int64_t items = p.B * p.Hkv * tiles;
  std::vector<Scratch> scratch;
  for (int t = 0; t < threads; ++t) scratch.emplace_back(p);
  const int64_t rows_total = p.B * p.Hq * p.L;
  const auto row_out = [&](int64_t row) {
    return RowOut{out + row * p.Dv, lse ? lse + row : nullptr,
                  stats.max ? stats.max + row : nullptr, stats.max ? stats.sum + row : nullptr};
  };
  Splits sp = plan_splits(p, items, rows_total);
  // Where the tiles (and splits) are too few for the threads — short sequences on many cores —
  // each tile of rows runs as up to 4 parts of at least 64 rows. Nothing a row computes depends on
  // the part: its scores take the whole tile's form, the rest is the row's own. So the thread
  // count may choose the parts without changing the bits.
  int64_t parts = 1;
  const int64_t largest_tile = std::min(kRows, G * p.L);
  while (parts < 4 && items * sp.count * parts < 4 * threads && largest_tile / (2 * parts) >= 64)
    parts *= 2;
  // Where a group has more than one tile of rows, or a tile runs as parts, they read the keys and
  // values packed, once for all of them; a lone tile transposes its key tiles itself and reads
  // the values in place (one pass over the machine fewer: short sequences).
  PackedKv packed;
  if (G * p.L > kRows || parts > 1 || in_bf16(p)) packed = pack_kv(p, kKeys, threads);
  PackedKv* pk = packed.tiles ? &packed : nullptr;
  parallel_for(items * parts * sp.count, threads, [&](int64_t job, int worker) {
    const int64_t item = job / (parts * sp.count), part = job / sp.count % parts,
                  split = job % sp.count;
    // The last tiles of every group first: under causality they see the most keys, and the
    // workers then finish on small items (longest first; the order does not change the bits).
    const int64_t groups = items / tiles;
    const int64_t group = item % groups, tile = tiles - 1 - item / groups;
    const Group g{group / p.Hkv, group % p.Hkv, G, G * p.L};
    const int64_t tile_r0 = tile * kRows, tile_rows = std::min(kRows, g.rows - tile_r0);
    const int64_t part_rows = (tile_rows + parts - 1) / parts;
    const int64_t r0 = tile_r0 + part * part_rows;
    const int64_t rows = std::min(part_rows, tile_r0 + tile_rows - r0);
    if (rows <= 0) return;
    const int64_t j_begin = split * sp.keys;
    const int64_t j_end = sp.count == 1 ? p.S : std::min(p.S, j_begin + sp.keys);
    Scratch& w = scratch[worker];
    accumulate(p, g, r0, rows, j_begin, j_end, qk_form(tile_rows), pk, w);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = out_row(p, g, r0 + r);
      const float* acc = w.o.data() + r * p.Dv;
      if (sp.count == 1) {
        finish_row(p, w.poisoned[r], w.bad_value[r], w.m[r], w.l[r], acc, row_out(row));
        continue;
      }
      const int64_t at = split * rows_total + row;
      sp.m[at] = w.m[r], sp.l[at] = w.l[r];
      sp.poisoned[at] = w.poisoned[r] | (w.bad_value[r] << 1);
      std::copy(acc, acc + p.Dv, sp.o.data() + at * p.Dv);
    }
  });
  if (sp.count == 1) return;

  // Merge the splits of each row: with M = max m_s, l = Σ l_s e^(m_s − M), o = Σ o_s e^(m_s − M)
  // (m in the units of flash::raw_units, whose unit is positive: the max is the same key's).
  const float unit = max_unit(p);
  parallel_for(rows_total, threads, [&](int64_t row, int worker) {
    float m = -kInf, l = 0;
    bool poisoned = false, bad_value = false;
    for (int64_t s = 0; s < sp.count; ++s) {
      poisoned = poisoned || (sp.poisoned[s * rows_total + row] & 1);
      bad_value = bad_value || (sp.poisoned[s * rows_total + row] & 2);
      m = std::max(m, sp.m[s * rows_total + row]);
    }
    float* acc = scratch[worker].o.data();
    std::fill(acc, acc + p.Dv, 0.0f);
    for (int64_t s = 0; s < sp.count && m != -kInf; ++s) {
      const int64_t at = s * rows_total + row;
      const float factor = std::exp((sp.m[at] - m) * unit);  // 0 for a split that saw nothing
      l += sp.l[at] * factor;
      const float* o = sp.o.data() + at * p.Dv;
      for (int64_t d = 0; d < p.Dv; ++d) acc[d] += o[d] * factor;
    }
    finish_row(p, poisoned, bad_value, m, l, acc, row_out(row));
  });
}

}  // namespace qkv::cpu
