// The score tile S = Q·Kᵀ of the fused kernels, computed so that every score is a function of its
// query row, its key row and the tile's number of rows m alone — not of the tile's number of keys,
// the blocking or the thread. The forward finds each row's max and sum from these scores and the
// backward recomputes them with the same row tiles: both must round alike, or exp(s − m) of the
// row's largest score is not 1. (Issue 11: OpenBLAS's Haswell SGEMM rounds an element differently
// for different numbers of columns; a one-ulp difference in a logit of 326 was a 3e-5 error in
// every gradient of its row.) Vectorized with Highway, dispatched at run time; on targets without
// FMA (SSE4 and older) a fused multiply-add below is a multiply and an add, the same in every path.
#pragma once

#include <cstdint>

namespace qkv::cpu {

// Keys of a tile are padded to a multiple of this (the widest vector).
inline constexpr int64_t kKeyPad = 16;
inline constexpr int64_t padded_keys(int64_t n) { return (n + kKeyPad - 1) / kKeyPad * kKeyPad; }
// Tiles of at most this many query rows take dot products along D: a transposed copy of the keys
// would cost more than the few rows' products (decoding).
inline constexpr int64_t kDotRows = 4;
// A transposed key tile is stored in panels of kKeyPanel keys (the last one narrower, down to
// kKeyPad): panel p holds keys p·kKeyPanel … as a D × width block, row-major, at
// kt + p·kKeyPanel·D. A panel is contiguous, so it stays in L1 whole while query rows stream past
// it (rows of one transposed D × n matrix, n floats apart, fall into a few cache sets: issue 12).
// 48 is a whole number of every x86 target's register blocks (3 vectors of 8 or 16, or 4 of 4).
inline constexpr int64_t kKeyPanel = 48;

// Writes the panels of the n keys at k (rows ldk apart) to kt (padded_keys(n)·D floats); keys
// n .. padded_keys(n) are zeros.
void pack_keys(const float* k, int64_t ldk, int64_t n, int64_t D, float* kt);

// n keys of D floats, rows ldk apart, and their panels at kt (padded_keys(n)·D floats): made by
// qk_tile on first need and reused by later tiles of rows, or made beforehand by pack_keys for
// packed ≥ n keys (the first n are scored; the panels' widths are those of `packed` keys).
struct KeyTile {
  const float* k;
  int64_t ldk, n;
  float* kt;
  int64_t packed = 0;  // 0: not yet transposed
};

// How a score is summed: kOuter, one chain of fused multiply-adds in the order d = 0, 1, …, D − 1;
// kDot, the target's vector lanes each chain their share of d in order, then are summed in a fixed
// order. A tile of rows takes the form its row count gives, qk_form(rows), whether its rows are
// scored in one call or a few at a time.
enum class QkForm { kOuter, kDot };
inline constexpr QkForm qk_form(int64_t tile_rows) {
  return tile_rows <= kDotRows ? QkForm::kDot : QkForm::kOuter;
}

// s[i·lds + j] = q_i·k_j for i < m, j < n, summed as `form` says; q: [m, D] with row stride ldq;
// lds ≥ padded_keys(keys.packed or n) (columns n .. up to the end of the last panel scored are
// overwritten). With row_max, also row_max[i] = max(row_max[i], max_j<n s_ij), taken while the
// scores are in registers; only where no score can be NaN (a max with NaN depends on the order).
void qk_tile(const float* q, int64_t ldq, int64_t m, KeyTile& keys, int64_t D, float* s,
             int64_t lds, QkForm form, float* row_max = nullptr);
// The m rows as a tile of their own: form qk_form(m).
inline void qk_tile(const float* q, int64_t ldq, int64_t m, KeyTile& keys, int64_t D, float* s,
                    int64_t lds) {
  qk_tile(q, ldq, m, keys, D, s, lds, qk_form(m));
}

}  // namespace qkv::cpu
