// Float64 scoring functions score(q, k) of docs/CONVENTIONS.md §5, one pair at a time, with their
// derivatives. Written straight from the formulas; never optimized.
#pragma once

#include <cstdint>

#include "qkv/attention_types.h"

namespace qkv::reference {

// Parameters of a scoring function, as contiguous float64 arrays (null where unused).
struct ScoreFunction {
  Score score = Score::scaled_dot;
  int64_t dq = 0, dk = 0;       // head dims of q and k
  int64_t a = 0;                // additive: the hidden size A
  const double* w = nullptr;    // general: W [dq, dk]
  const double* w_q = nullptr;  // additive: W_q [a, dq]
  const double* w_k = nullptr;  // additive: W_k [a, dk]
  const double* v = nullptr;    // additive: v [a]

  // score(q, k), before scale.
  double operator()(const double* q, const double* k) const;

  // Accumulates g · ∂score/∂x into the gradient of every x the score reads: dq [dq], dk [dk] and,
  // where the score has them, dw, dw_q, dw_k, dv (same shapes as the parameters).
  struct Grads {
    double* dq;
    double* dk;
    double* dw = nullptr;
    double* dw_q = nullptr;
    double* dw_k = nullptr;
    double* dv = nullptr;
  };
  void backward(double g, const double* q, const double* k, const Grads& grads) const;
};

// Cosine similarity divides by max(‖x‖, kCosineEps), as PyTorch's cosine_similarity does, so a
// zero vector scores 0 instead of NaN.
inline constexpr double kCosineEps = 1e-8;

}  // namespace qkv::reference
