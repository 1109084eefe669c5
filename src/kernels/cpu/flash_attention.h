// Fused exact attention on the CPU, float32: FlashAttention-2 (Dao 2023) tiling with an online
// softmax, so the L×S score matrix is never stored. Forward keeps the per-row logsumexp; backward
// recomputes the probabilities tile by tile from it.
#pragma once

#include <cstdint>

#include "qkv/attention_types.h"

namespace qkv::cpu {

// A float32 view: element (b, h, i, d) at data[b*stride[0] + h*stride[1] + i*stride[2] + d].
// The last dimension is contiguous; the others may have any stride (e.g. [B, L, H, D] memory).
struct View {
  const float* data = nullptr;
  int64_t stride[3] = {0, 0, 0};
};

// q: [B, Hq, L, Dk], k: [B, Hkv, S, Dk], v: [B, Hkv, S, Dv]; query head h reads kv head
// h / (Hq / Hkv). Visible keys: causal (both alignments) AND j < key_lengths[b] AND bias > −∞.
struct FlashProblem {
  int64_t B = 1, Hq = 1, Hkv = 1, L = 0, S = 0, Dk = 0, Dv = 0;
  float scale = 1;
  Causal causal = Causal::none;
  View q, k, v;
  // Optional additive bias (a float mask, or a bool mask as 0 / −∞) with broadcast strides over
  // [B, Hq, L, S] (0 along broadcast dimensions); null when there is none.
  const float* bias = nullptr;
  int64_t bias_stride[4] = {0, 0, 0, 0};
  const int64_t* key_lengths = nullptr;  // [B] or null
  // bf16: the products' inputs rounded to bfloat16, float32 accumulation (qkv/attention_types.h).
  Precision precision = Precision::fp32;
};

// The forward's softmax of each row as the backward recomputes it: P_ij = exp(x_ij − m_i) / l_i
// with m_i the row's largest logit and l_i = Σ_j exp(x_ij − m_i), both [B, Hq, L]. m is kept in
// the units the kernels form exponents in (flash::raw_units: raw scores q·k when there is no bias
// and the scale is positive, logits otherwise), so the backward evaluates the forward's very
// exponent. Why not the logsumexp alone: a float32 lse = m + log l of a row whose logits are in
// the hundreds is off by up to |lse|·2⁻²⁴, an error that exp(x − lse) passes on, relative, to every
// P of the row (dv 1.37× its tolerance at logits ~400 on OpenBLAS's Haswell kernels; issue 11).
// A poisoned row has m = NaN; a row that sees no key has m = −∞ and l = 0.
struct SoftmaxStats {
  float* max = nullptr;
  float* sum = nullptr;
};

// out: [B, Hq, L, Dv] contiguous; lse: [B, Hq, L] (natural log; −∞ for a row with no visible key)
// or null; stats: filled when its pointers are set.
void flash_forward(const FlashProblem& p, float* out, float* lse, int threads,
                   SoftmaxStats stats = {});

// Gradients given dout [B, Hq, L, Dv] and the forward's out and stats (all contiguous).
// dq: [B, Hq, L, Dk], dk: [B, Hkv, S, Dk], dv: [B, Hkv, S, Dv], contiguous, overwritten.
// *dscale receives ∂loss/∂scale. Results are bitwise identical for any thread count.
void flash_backward(const FlashProblem& p, const float* out, const float* dout,
                    const SoftmaxStats& stats, float* dq, float* dk, float* dv, double* dscale,
                    int threads);

}  // namespace qkv::cpu
