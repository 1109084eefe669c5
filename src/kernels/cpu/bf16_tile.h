// The bf16 twins of qk_tile.h and pv_tile.h for issue 31's opt-in `precision = bf16`: inputs
// rounded to bf16 (bf16.h), products accumulated in float32, every output one chain of sums in a
// fixed order whatever the blocking, the rows, the thread or the target.
//
// The order is vdpbf16ps's (Intel SDM, VDPBF16PS, "Operation"): the elements go in pairs
// (2x, 2x + 1), and for each pair, in order x = 0, 1, …, the accumulator takes the product of the
// odd elements first, then that of the even ones, each added with one rounding to nearest:
//
//   acc = acc + a[2x+1]·b[2x+1];   acc = acc + a[2x]·b[2x]
//
// (checked on Zen 4: 10% of random cases round differently in the other order, none in this).
// On the AVX3 target with AVX512_BF16 that is one vdpbf16ps per pair and 16 lanes; everywhere
// else an emulation: bf16 widened to float32 by a shift and two multiply-adds in that order. The
// product of two bf16 values has at most 16 significant bits, so it is exact in float32 and a
// fused multiply-add equals "acc + exact product" — and so does a multiply then an add on targets
// without FMA. The emulation thus gives the instruction's bits on every target, wherever no
// product and no partial sum is nonzero below 2⁻¹²⁶ in magnitude (the instruction flushes those
// to zero; bf16.h already flushes subnormal inputs) and no product overflows.
#pragma once

#include <cstdint>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/pv_tile.h"
#include "kernels/cpu/qk_tile.h"

namespace qkv::cpu {

// ---- Q·Kᵀ ----
// Keys are stored as qk_tile.h stores them, in panels of kKeyPanel keys (the last one narrower,
// down to kKeyPad) for padded_keys(n) keys, but in pairs of d: panel p holds keys p·kKeyPanel …
// as bf16_row(D)/2 rows of w pairs, at kt + p·kKeyPanel·bf16_row(D); the pair (k_j[2x],
// k_j[2x+1]) of the panel's key j is at panel[(x·w + j)·2]. One row of pairs is one vector of
// 16 keys for vdpbf16ps.

// bf16 elements of the panels of n keys of D values.
inline constexpr int64_t bf16_key_panel_elems(int64_t n, int64_t D) {
  return padded_keys(n) * bf16_row(D);
}

// Writes the panels of the n keys at k (float32 rows ldk apart), rounded to bf16, to kt
// (bf16_key_panel_elems(n, D) elements); keys n … padded_keys(n) and the pad of an odd D are 0.
void pack_keys_bf16(const float* k, int64_t ldk, int64_t n, int64_t D, bf16* kt);

// s[i·lds + j] = q_i·k_j for i < m, j < n, in float32, summed in the order above over the pairs
// x < bf16_row(D)/2 starting from 0. q: m rows of bf16_row(D) elements (round_bf16_rows: an odd
// D's pad is 0), ldq apart; kt: the panels of `packed` ≥ n keys (pack_keys_bf16), of which the
// first n are scored. lds ≥ padded_keys(packed): the columns n … up to the end of the last panel
// scored are overwritten. With row_max, also row_max[i] = max(row_max[i], max_j<n s_ij), taken
// while the scores are in registers; only where no score can be NaN.
void qk_tile_bf16(const bf16* q, int64_t ldq, int64_t m, const bf16* kt, int64_t n, int64_t packed,
                  int64_t D, float* s, int64_t lds, float* row_max = nullptr);

// ---- P·V ----
// Values are stored as pv_tile.h's packed values, in panels of kValuePanel columns (the last one
// narrower), but with the keys in pairs: for `keys` keys (rounded up to even, bf16_row(keys)),
// the panel of columns c0 … c0 + w is at packed + c0·bf16_row(keys) and holds bf16_row(keys)/2
// rows of w pairs; the pair (v[2y][c], v[2y+1][c]) is at panel[(y·w + c − c0)·2].

// bf16 elements of the panels of `keys` keys of Dv values.
inline constexpr int64_t bf16_value_panel_elems(int64_t keys, int64_t Dv) {
  return bf16_row(keys) * Dv;
}

// Writes the values of keys j0 … j0 + n (float32 rows of v, ldv apart), rounded to bf16, into
// `packed`, the panels of `keys` keys' values; j0 is even. When n is odd, key j0 + n's values
// are written as 0 (a pair's other half: it must be finite, as its weight is 0), so
// j0 + bf16_row(n) ≤ bf16_row(keys).
void pack_values_bf16(const float* v, int64_t ldv, int64_t n, int64_t Dv, bf16* packed,
                      int64_t keys, int64_t j0);

// o[i·ldo + c] += Σ_j p[i·ldp + j]·v_(j0 + j, c) for i < m, j < n, c < Dv, each output one chain
// over the pairs of keys in the order above, starting from o. p: bf16 weights, rows of
// bf16_row(n) elements whose element n is 0 when n is odd; v_packed: the panels of `keys` keys
// (pack_values_bf16); j0 even.
void pv_tile_bf16(const bf16* p, int64_t ldp, int64_t m, const bf16* v_packed, int64_t keys,
                  int64_t j0, int64_t n, int64_t Dv, float* o, int64_t ldo);

}  // namespace qkv::cpu
