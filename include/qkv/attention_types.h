// qkv/attention_types.h — the kinds of attention, as plain enums: which score, which
// normalization, which causal alignment, which implementation. The kernels see only these; the
// names as the command line spells them, the options and the entry points are in qkv/attention.h.
#pragma once

namespace qkv {

// score(q, k) before `scale` multiplies it (qkv/attention.h).
enum class Score {
  scaled_dot,  // q·k, default scale 1/√Dk             (Vaswani et al. 2017)
  dot,         // q·k, default scale 1                 (Luong et al. 2015)
  general,     // qᵀ W k                               (Luong et al. 2015)
  additive,    // vᵀ tanh(W_q q + W_k k)               (Bahdanau et al. 2014)
  laplace,     // −‖q − k‖₁; scale = 1/ℓ, ℓ the length scale (Kim et al. 2019)
  cosine,      // q·k / (‖q‖ ‖k‖); scale = 1/τ, τ the temperature (Graves 2014)
  uniform,     // 0: the plain average of the visible values
};

enum class Normalize {
  softmax,  // weights = softmax over the keys
  none,     // weights = the scaled scores themselves (0 where masked)
};

// Causal masking with explicit alignment. top_left: query i sees keys j ≤ i (PyTorch is_causal).
// bottom_right: query i sees keys j ≤ i + S − L (FlashAttention; decoding with a KV cache).
enum class Causal { none, top_left, bottom_right };

// Which implementation runs. `automatic` picks `fused` where it applies — float32 q, k, v, a
// dot-product score (scaled-dot, dot), softmax, and no weights or scores asked for — and
// `reference` (float64, materialized scores) otherwise. Asking for `fused` where it does not
// apply is an error that says why. `cuda`: the fused kernels on an NVIDIA GPU (qkv/device.h),
// never chosen by `automatic` for host tensors; device tensors always take it.
enum class Path { automatic, reference, fused, cuda };

// The arithmetic of the two products Q·Kᵀ and P·V (and the backward's three more).
// fp32: float32 throughout, exact by docs/CONVENTIONS.md §1.1 (the default).
// bf16 (opt-in): the products' inputs — q, k, v, the probabilities P, and in the backward dO and
// dX — rounded to bfloat16 (nearest, ties to even), products accumulated in float32, the softmax in
// float32 (§1.1b). The reference path computes in float64 from the same rounded q, k and v: the
// twin the bf16 kernels are checked against.
enum class Precision { fp32, bf16 };

}  // namespace qkv
