// bench/cases/attention_cases.h — the attention cases, one registry for `qkv bench attention`,
// bench/ (Google Benchmark, and compare_torch.py through `qkv bench attention --list --json`) and
// the kernel tests (tests/kernels/cpu), in the spirit of ggml's test-backend-ops: a case is a
// shape, a causal alignment and a mask kind; its FLOPs and its shape string are computed here,
// once.
//
// The data stays with whoever runs a case (N(0, 1) values, their seeds, a mask's values): a case
// says which problem, not which numbers. Built as the library qkv_cases on the public headers only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qkv/attention_types.h"

namespace qkv::cases {

// The kind of mask a case carries; its values are the runner's. The benchmark's cases have none;
// the kernel tests put their own masks (every kind and broadcast shape) on the sweeps' shapes.
enum class Mask { none, key_lengths, boolean, additive };
std::string_view to_string(Mask mask);

struct AttentionCase {
  std::string name;
  int64_t B = 1, Hq = 1, Hkv = 1, L = 0, S = 0, Dk = 0, Dv = 0;
  Causal causal = Causal::none;
  Mask mask = Mask::none;
  bool backward = true;    // the benchmark times the backward too (`long`: the forward only)
  bool in_default = true;  // `qkv bench attention` without --case runs it
  // The scaling rule (scaled(), quick()): S shrinks, and L with it unless it is a fixed number of
  // query rows (a decode step's one query stays one query).
  bool scale_L = true;
};

// --quick divides the sequence lengths by 16: the same code paths in a second or two.
inline constexpr int64_t kQuickFactor = 16;

// `c` with S, and L where c.scale_L, divided by `factor` (at least 1 each).
AttentionCase scaled(AttentionCase c, int64_t factor);
inline AttentionCase quick(const AttentionCase& c) { return scaled(c, kQuickFactor); }

// FLOPs of the two matrix products: 2·L·S·Dk for QKᵀ and 2·L·S·Dv for PV per head
// (4·B·Hq·L·S·D when Dk = Dv = D), half of them under causality. The backward counts 2.5× the
// forward (five products of that size against two).
double forward_flops(const AttentionCase& c);
double backward_flops(const AttentionCase& c);

// "H8 L1024 S1024 D64": B when not 1, Hq/Hkv when they differ, Dk and Dv when they differ.
std::string shape_string(const AttentionCase& c);

// ---- the benchmark: issue 3's cases, full size, in the order `qkv bench attention` runs them ----

const std::vector<AttentionCase>& bench_cases();
// The case of that name, or nullptr.
const AttentionCase* find_bench_case(std::string_view name);

// ---- the kernel tests' sweeps (tests/kernels/cpu), shapes first: the tests add masks and data
// ----

// Sequence lengths: awkward ones, and the fused kernels' tiles 64, 128 and 256, each ± 1.
const std::vector<int64_t>& tile_lengths();
// Head dims: 1, powers of two up to 256 and odd ones in between.
const std::vector<int64_t>& head_dims();

// Every L × S of tile_lengths(), in that order, with B, Hq, Hkv (GQA ratios 1, 2, 4, 8), Dk and
// Dv ≠ Dk rotating through head_dims(), and the three causal alignments in turns of 16. Big L·S
// cases shrink B, then heads, then head dims, to keep B·Hq·L·S·(Dk + Dv) ≤ 6·10⁷ (the float64
// reference checks each in ≲ 0.05 s).
std::vector<AttentionCase> length_sweep();
// Every head dim with Dv = Dk and one Dv ≠ Dk, each on two shapes across tiles (GQA 2, B = 2).
std::vector<AttentionCase> head_dim_sweep();
// GQA ratios 1, 2, 4, 8 with one, two and three kv heads (Hkv = 1: multi-query).
std::vector<AttentionCase> gqa_sweep();
// The shapes the forward's masks are each run on: around the tiles, GQA, Dv ≠ Dk, L = 1.
std::vector<AttentionCase> mask_shapes();
// The shapes the backward's masks are each run on.
std::vector<AttentionCase> backward_mask_shapes();
// For a fully masked first key tile: S past two tiles; the third for large logits.
std::vector<AttentionCase> first_tile_shapes();
// For rows that see nothing: L < S and L > S.
std::vector<AttentionCase> masked_row_shapes();
// For logits of tens to hundreds.
std::vector<AttentionCase> large_logit_shapes();
// For scales other than the default: causal bottom_right, and a dot score.
std::vector<AttentionCase> scale_shapes();
// L = 0, S = 0 and both.
std::vector<AttentionCase> empty_shapes();
// Decoding: one query (or four) against thousands of keys, GQA.
std::vector<AttentionCase> decode_shapes();
// For NaN and ∞ planted in q, k, v: L ≥ 200 and S ≥ 300 (the plants' positions), Dv ≠ Dk in one.
std::vector<AttentionCase> non_finite_shapes();

// The unfused OpenBLAS baseline's (Dk = Dv): L ∈ {1, 2, 17, 97} × S ∈ {1, 17, 97}, B = 2, H = 2.
std::vector<AttentionCase> unfused_length_sweep();
// Both causal alignments on L = S, L < S, L > S and a single query.
std::vector<AttentionCase> unfused_causal_sweep();
// GQA ratios 4, 2, 1 and a decode step.
std::vector<AttentionCase> unfused_gqa_sweep();

}  // namespace qkv::cases
