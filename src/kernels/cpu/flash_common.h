// Pieces shared by the fused forward and backward kernels: tiling, visibility, bias rows,
// non-finite bookkeeping and the packing of keys and values.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/aligned.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/bf16_tile.h"
#include "kernels/cpu/flash_attention.h"
#include "kernels/cpu/pv_tile.h"

namespace qkv::cpu::flash {

// Tile sizes, query rows × keys, chosen by measurement (fp32, D = 64, L = S = 4096, 2 cores,
// forward GFLOP/s as a share of the same run's SGEMM): 128×256 56%, 128×512 57%, 64×512 50%,
// 256×256 63%, 256×512 68%, 512×512 65–69%, 256×1024 60–63% (with OpenBLAS tiles). With the
// packed panels, qk_tile and pv_tile (issue 12; one thread, AVX2, share of one thread's SGEMM):
// 256×512 0.82 0.83 at D = 64 and 0.87 0.86 at D = 128, 256×256 0.79 0.81 and 0.84 0.87. The
// backward keeps four score-sized tiles, so its tiles have fewer keys. Both passes compute the
// scores with qk_tile, whose bits do not depend on the tile's shape (OpenBLAS's do: qk_tile.h).
inline constexpr int64_t kRows = 256;
inline constexpr int64_t kKeys = 512;
inline constexpr int64_t kBackwardRows = kRows;
// Backward tiles of 128 keys measured worse at D = 256 (single thread, L = S = 4096, bwd/SGEMM,
// AVX2: 0.75–0.76 against 0.82–0.83 with 256).
inline constexpr int64_t kBackwardKeys = 256;
// The backward's work items: each (batch, kv head) group's keys split into `count` chunks of
// `keys` keys (whole tiles), one item each, for enough items to fill 32 threads where the keys
// allow. A chunk past the first sums its share of dQ into a partial dQ of its own (B·Hq·L·Dk
// floats), added to the first's in chunk order: at most 256 MiB of partials in all. A function of
// the problem alone, never of the threads, so that the bits are not either.
struct BackwardChunks {
  int64_t count = 1, keys = 0;
};
BackwardChunks backward_chunks(int64_t B, int64_t Hq, int64_t Hkv, int64_t S, int64_t Dk,
                               int64_t L);
inline constexpr float kLog2e = 1.44269504088896340736f;
inline constexpr float kInf = std::numeric_limits<float>::infinity();

// Without a bias and with a scale in (0, 1], the kernels keep each row's max in raw-score units and
// fold the scale into the exponent, 2^((s − m)·scale·log2 e): max(scale·s) = scale·max(s), and the
// pass that would scale the tile is saved; scale·s cannot overflow where s did not. Otherwise they
// work on the logits x = scale·s + bias.
inline bool raw_units(const FlashProblem& p) { return !p.bias && p.scale > 0 && p.scale <= 1; }
// Natural-log units per unit of a row max.
inline float max_unit(const FlashProblem& p) { return raw_units(p) ? p.scale : 1.0f; }

// Query rows of one (batch, kv head) work item: the Hq / Hkv query heads that share it, stacked
// (row r is head kv·G + r / L, position r % L), so a key/value tile is read once for all of them.
struct Group {
  int64_t b, kv, G, rows;  // rows = G · L
  int64_t head(const FlashProblem& p, int64_t r) const { return kv * G + r / p.L; }
  int64_t pos(const FlashProblem& p, int64_t r) const { return r % p.L; }
};

inline const float* row_of(const View& v, int64_t b, int64_t h, int64_t i) {
  return v.data + b * v.stride[0] + h * v.stride[1] + i * v.stride[2];
}

// Keys [0, end) are visible to query i of batch b by causality and key lengths (the bias may
// hide more).
inline int64_t visible_end(const FlashProblem& p, int64_t b, int64_t i) {
  int64_t end = p.S;
  if (p.key_lengths) end = std::min(end, p.key_lengths[b]);
  if (p.causal == Causal::top_left) end = std::min(end, i + 1);
  if (p.causal == Causal::bottom_right) end = std::min(end, i + 1 + p.S - p.L);
  return std::max<int64_t>(end, 0);
}

inline const float* bias_row(const FlashProblem& p, int64_t b, int64_t h, int64_t i) {
  return p.bias + b * p.bias_stride[0] + h * p.bias_stride[1] + i * p.bias_stride[2];
}
inline float bias_at(const FlashProblem& p, const float* row, int64_t j) {
  return row[j * p.bias_stride[3]];
}

// Precision::bf16: the kernels round the inputs of their products with bf16.h's round_bf16.
inline bool in_bf16(const FlashProblem& p) { return p.precision == Precision::bf16; }

// s[j] += bias[j], or −∞ where the bias is −∞, for keys j0 .. j0 + n. True when a sum with a bias
// above −∞ came out ±∞ (an overflow).
bool add_bias(const FlashProblem& p, const float* bias, int64_t j0, float* s, int64_t n);

// Flags of the keys of one tile: bit 1 when k_j has a NaN or ∞, bit 2 when v_j has one. Such keys
// poison the rows that see them (docs/CONVENTIONS.md §1.4). Checked tile by tile, while the
// tile is in cache.
enum : uint8_t { kBadKey = 1, kBadValue = 2 };
bool tile_flags(const FlashProblem& p, const float* k, int64_t ldk, const float* v, int64_t ldv,
                int64_t n, uint8_t* flags);

// Where a tile's keys and values are read from: in place, or copies with the flagged rows zeroed
// so that 0·NaN cannot reach rows that do not see them (the rows that do are poisoned anyway).
struct TileRows {
  const float* k;
  int64_t ldk;
  const float* v;
  int64_t ldv;
};
TileRows clean_tile(const FlashProblem& p, TileRows in, int64_t n, const uint8_t* flags,
                    float* k_copy, float* v_copy);
// Where a tile's keys and values are read from under p's precision: `in` itself (fp32), or their
// bf16 roundings written to k_copy and v_copy (n·Dk and n·Dv floats). Flags are taken after.
TileRows precise_tile(const FlashProblem& p, TileRows in, int64_t n, float* k_copy, float* v_copy);

// The keys and values of every (batch, kv head) group, packed once for all the query tiles and
// grouped heads that read them (group = b·Hkv + kv): each key tile's panels (qk_tile.h), the
// values' panels (pv_tile.h), and each key's flags. Flagged keys and values are zeros in the
// panels, as in clean_tile. Memory: one more copy of K and V, O(S·D) per group.
//
// Under Precision::bf16 the panels are bf16_tile.h's instead (kt16, v16), of the rounded keys and
// values; kt and v stay empty.
struct PackedKv {
  int64_t key_tile = 0, tiles = 0;
  AlignedBuffer<float> kt, v;
  AlignedBuffer<bf16> kt16, v16;
  std::vector<uint8_t> flags, tile_bad;  // [group][S], [group][tile]
  std::vector<float> key_norm;           // [group][tile]: the tile's largest ‖k_j‖
  float* tile_keys(const FlashProblem& p, int64_t group, int64_t tile) {
    return kt.data() + (group * tiles + tile) * key_tile * p.Dk;
  }
  ValueRows values(const FlashProblem& p, int64_t group) const {
    return {v.data() + group * p.S * p.Dv, 0, p.S};
  }
  const bf16* tile_keys16(const FlashProblem& p, int64_t group, int64_t tile) const {
    return kt16.data() + (group * tiles + tile) * bf16_key_panel_elems(key_tile, p.Dk);
  }
  const bf16* values16(const FlashProblem& p, int64_t group) const {
    return v16.data() + group * bf16_value_panel_elems(p.S, p.Dv);
  }
};
PackedKv pack_kv(const FlashProblem& p, int64_t key_tile, int threads);

}  // namespace qkv::cpu::flash
