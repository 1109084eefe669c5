// Unfused attention on OpenBLAS, float32: the "math path" that libraries fall back to when they
// have no fused kernel (PyTorch's SDPA math backend). Per (batch, head) it materializes the L×S
// score matrix: S = scale·Q·Kᵀ (SGEMM), mask, row softmax, O = P·V (SGEMM). It is the baseline
// `qkv bench attention` measures the fused kernel against, and costs O(L·S) memory per worker.
#pragma once

#include "kernels/cpu/flash_attention.h"

namespace qkv::cpu {

// How the work meets OpenBLAS's own threads.
//   per_head:    parallel_for over heads; OpenBLAS runs single-threaded inside each item, and each
//                worker holds its own L×S matrix.
//   inside_gemm: one head after another; each GEMM uses all threads, the softmax rows are split
//                over the pool; one L×S matrix in all.
//   automatic:   inside_gemm when L and S are both ≥ 512 or there are fewer heads than threads,
//                else per_head. Measured on issue 3's 2-core machine, shared, where paired runs
//                moved by up to 3× from one minute to the next: at L = S = 1024–4096 neither was
//                ahead beyond that noise (inside_gemm was in most pairs, by 5–25% forward), so the
//                one holding a single L×S matrix wins; for decoding (L = 1, S = 8192, H = 32/8)
//                per_head was ahead in every pair, by about 35%.
enum class BlasThreading { automatic, per_head, inside_gemm };

// The problem as the fused kernel sees it (q, k, v views, GQA, causal in both alignments, key
// lengths, additive bias), so both run on the same inputs.
// q: [B, Hq, L, Dk], k: [B, Hkv, S, Dk], v: [B, Hkv, S, Dv]
// out: [B, Hq, L, Dv] contiguous; lse: [B, Hq, L] contiguous, or null (−∞ for a row that sees no
// key, whose output is 0). Scratch: the L×S matrices of BlasThreading, through AlignedBuffer, so
// they count in memory_peak_bytes(). Masks apply after the GEMM (a masked key's P is 0), so unlike
// the fused kernel a non-finite masked key can still reach the output (0·∞ in P·V).
void unfused_forward(const FlashProblem& p, float* out, float* lse, int threads,
                     BlasThreading threading = BlasThreading::automatic);

// Gradients given dout [B, Hq, L, Dv] and the forward's lse (contiguous). The math path's
// backward, with P recomputed from lse instead of saved (five GEMMs, as the FLOP count assumes):
//   P = exp(S − lse), dV += Pᵀ·dO, dP = dO·Vᵀ, dS = P ∘ (dP − rowsum(P ∘ dP)),
//   dQ = scale·dS·K, dK += scale·dSᵀ·Q.
// dq: [B, Hq, L, Dk], dk: [B, Hkv, S, Dk], dv: [B, Hkv, S, Dv], contiguous, overwritten. Work items
// are (batch, kv head) so the query heads of a group accumulate into dK, dV in a fixed order.
// Scratch: two L×S matrices per worker.
void unfused_backward(const FlashProblem& p, const float* dout, const float* lse, float* dq,
                      float* dk, float* dv, int threads,
                      BlasThreading threading = BlasThreading::automatic);

}  // namespace qkv::cpu
