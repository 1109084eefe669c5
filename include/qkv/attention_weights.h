// qkv/attention_weights.h — exact attention weights where the fused path ran, without the L×S
// matrix: the rows and the single weights asked for, recomputed from q and k.
//
//   w_ij = exp(scale·q_i·k_j + mask_ij − lse_i),   0 where key j is masked
//
// A whole row (weight_rows): its dot products in float64 from the float32 inputs and its own
// lse_i = log Σ_j exp(logit_ij), in float64 — the float64 reference's row of the same q and k, at
// O(S·D) work and O(S) memory a row. A single weight (weights_at: every row's weight on the first
// key, say) takes lse_i from the fused forward instead, so that it costs one dot product:
// attention(q, k, v, {.keep_for_backward = true}) returns each row's largest exponent m_i (in the
// kernels' units: raw scores q·k where no mask is given and 0 < scale ≤ 1, logits otherwise) and
// the sum l_i of the exponentials below it (AttentionResult::saved_max, ::saved_sum), and
//
//   lse_i = u·m_i + log l_i        (u = scale in raw units, else 1), in float64.
//
// The max and the sum, not the float32 logsumexp, which is off by up to |lse|·2⁻²⁴ (relative, in
// every weight: src/kernels/cpu/flash_attention.h). What remains is the kernel's float32 scores in
// m_i and l_i: a single weight is off from the reference by at most about its own size times the
// rounding of the row's float32 logits (|scale|·(γ_D·max_j Σ_t |q_it·k_jt| + 2⁻²⁴·|m_i|), γ_D =
// D·2⁻²⁴ the bound of a float32 dot product of D terms) — float32's precision, where a row's is
// float64's. Engines that run a fused kernel return no weights at all (flash-attention#1824;
// llama.cpp's PR #20086 needs flash attention off).
//
// What the fused path runs, and only that: score scaled_dot or dot, softmax, float32 q and k; the
// options (scale, causal, mask, key_lengths) must be the forward's. A row that sees no key gives
// zeros; NaN or ∞ in q_i or a visible k_j, or a logit beyond float32's range, gives NaN where the
// row sees a key (attention.h's rules).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "qkv/attention.h"

namespace qkv {

// Each row's softmax, [B, Hq, L] float32 (rank as q's leading dimensions): the forward's
// saved_max and saved_sum.
struct RowSoftmax {
  Tensor max, sum;
};

// Rows `rows` of batch entry `batch`, query head `head`: [rows.size(), S] float64. Throws
// qkv::Error (Kind::invalid_argument) for shapes or options that do not make such a problem, or
// an index out of range.
Tensor weight_rows(const Tensor& q, const Tensor& k, const AttentionOptions& options, int64_t batch,
                   int64_t head, const std::vector<int64_t>& rows);

// The single weights (i, j) of `entries` in batch entry `batch`, query head `head`:
// [entries.size()] float64 — e.g. every row's weight on the first key, one dot product each.
Tensor weights_at(const Tensor& q, const Tensor& k, const RowSoftmax& softmax,
                  const AttentionOptions& options, int64_t batch, int64_t head,
                  const std::vector<std::pair<int64_t, int64_t>>& entries);

}  // namespace qkv
