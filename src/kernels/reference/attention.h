// Float64 reference attention, forward and backward, with the score matrix materialized.
// The oracle every fast path is tested against and the engine of `qkv attend`'s explanations.
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/reference/scores.h"

namespace qkv::reference {

// One attention problem over contiguous float64 arrays.
// q: [B, Hq, L, Dq], k: [B, Hkv, S, Dk], v: [B, Hkv, S, Dv], bias: [B, Hq, L, S] or null.
// bias holds what is added to the scaled scores: 0, a float mask's value, or −∞ where the key is
// masked (bool mask, causal, key lengths). Query head h reads key/value head h / (Hq / Hkv).
struct Problem {
  int64_t B = 1, Hq = 1, Hkv = 1, L = 0, S = 0, Dv = 0;
  ScoreFunction score;
  Normalize normalize = Normalize::softmax;
  double scale = 1;
  // The largest magnitude a score, logit or output may have: a row where a finite q, k and bias
  // give one beyond it has no representable result (an overflow) and is NaN, as an ∞ in the
  // inputs would make it. DBL_MAX for float64 inputs; FLT_MAX for float32 ones, whose fused path
  // computes in float32 (qkv/attention.h, "Overflow"), so both paths agree on which rows overflow.
  double range = std::numeric_limits<double>::max();
  const double* q = nullptr;
  const double* k = nullptr;
  const double* v = nullptr;
  const double* bias = nullptr;
};

// out: [B, Hq, L, Dv]; each optional output (null to skip) is [B, Hq, L, S] or, for lse, [B, Hq,
// L].
struct ForwardOutputs {
  double* out = nullptr;
  double* weights = nullptr;
  double* lse = nullptr;
  double* scores = nullptr;
  double* logits = nullptr;
};
void attention_forward(const Problem& p, const ForwardOutputs& o);

// Gradients, accumulated (+=) into zero-initialized arrays shaped like what they differentiate.
// dw, dw_q, dw_k, dv_param are used by general / additive and may be null otherwise.
struct BackwardOutputs {
  double* dq = nullptr;
  double* dk = nullptr;
  double* dv = nullptr;
  double* dw = nullptr;
  double* dw_q = nullptr;
  double* dw_k = nullptr;
  double* dv_param = nullptr;
  double* dscale = nullptr;
};
// dout: [B, Hq, L, Dv], the gradient of the loss with respect to out.
void attention_backward(const Problem& p, const double* dout, const BackwardOutputs& g);

}  // namespace qkv::reference
