// Exact attention for short sequences, straight from a fused Q|K|V projection: per sentence and
// head, the scores of every query against every real key (at most a few thousand), their softmax,
// and Σ_j P_ij v_j written into the heads-side-by-side layout the output projection reads.
//
// Why beside the fused flash kernel: sentence embedding runs batches of short sentences (MiniLM's
// corpus here averages 26 tokens), where attention is ~1% of the FLOPs but took ~7% of the time
// through the [B, H, L, D] views, the tiled kernel's per-tile set-up and merge_heads' copy (issue
// 12). With L ≤ kShortAttentionMaxLength one head's keys, values and scores stay in L1, so each
// head is one tile of the fused kernels' products: qk_tile for its real rows against its real keys,
// the softmax row by row, pv_tile into the output rows; padding keys are never read, padding
// queries never computed.
//
// Exactness: each score is summed as qk_tile.h says; the softmax is exp_sub_row's (vec_ops.h);
// each output is Σ_j P_ij v_j in j order (pv_tile.h), times 1 / Σ_j P_ij. The
// same bits for any thread count. NaN or +∞ among a row's scores makes that output row NaN
// (docs/CONVENTIONS.md §1.4); a NaN in V reaches the rows that read it through the products.
#pragma once

#include <cstdint>

namespace qkv::cpu {

// Longest sequence short_attention is meant for: one head's K and V, 64 × 64 floats each at most
// for MiniLM's D = 32 … 64, fit in a 32 KiB L1 together.
inline constexpr int64_t kShortAttentionMaxLength = 64;

// Sequence b's token i, head h: q at q[(b·L + i)·ld + h·D], k and v likewise (any offsets, e.g.
// the Q, K and V thirds of one projection's rows); out[(b·L + i)·ldo + h·D]. For i < lengths[b]:
// out = Σ_{j < lengths[b]} softmax_j(scale · q·k_j) v_j; rows i ≥ lengths[b] are set to 0.
struct ShortAttention {
  int64_t B = 0, L = 0, H = 0, D = 0;
  float scale = 1;
  const float *q = nullptr, *k = nullptr, *v = nullptr;
  int64_t ld = 0;
  float* out = nullptr;
  int64_t ldo = 0;
  const int64_t* lengths = nullptr;  // [B], each in [0, L]
};

// One sequence per parallel item (all its heads): a lone sentence runs on the calling thread.
void short_attention(const ShortAttention& p, int num_threads = 0);

}  // namespace qkv::cpu
