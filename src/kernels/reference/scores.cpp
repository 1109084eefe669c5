// Float64 scoring functions and their derivatives (docs/CONVENTIONS.md §5).
#include "kernels/reference/scores.h"

#include <cmath>
#include <vector>

namespace qkv::reference {
namespace {

double dot(const double* x, const double* y, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
  return s;
}

double clamped_norm(const double* x, int64_t n) {
  return std::max(std::sqrt(dot(x, x, n)), kCosineEps);
}

// u = W_q q + W_k k, the pre-activation of Bahdanau et al. 2014, eq. (A.1.2).
std::vector<double> additive_preactivation(const ScoreFunction& f, const double* q,
                                           const double* k) {
  std::vector<double> u(f.a);
  for (int64_t r = 0; r < f.a; ++r)
    u[r] = dot(f.w_q + r * f.dq, q, f.dq) + dot(f.w_k + r * f.dk, k, f.dk);
  return u;
}

}  // namespace

double ScoreFunction::operator()(const double* q, const double* k) const {
  switch (score) {
    case Score::scaled_dot:
    case Score::dot:
      return dot(q, k, dk);
    case Score::general: {  // qᵀ W k
      double s = 0;
      for (int64_t r = 0; r < dq; ++r) s += q[r] * dot(w + r * dk, k, dk);
      return s;
    }
    case Score::additive: {  // vᵀ tanh(W_q q + W_k k)
      const std::vector<double> u = additive_preactivation(*this, q, k);
      double s = 0;
      for (int64_t r = 0; r < a; ++r) s += v[r] * std::tanh(u[r]);
      return s;
    }
    case Score::laplace: {  // −‖q − k‖₁
      double s = 0;
      for (int64_t i = 0; i < dk; ++i) s += std::abs(q[i] - k[i]);
      return -s;
    }
    case Score::cosine:
      return dot(q, k, dk) / (clamped_norm(q, dk) * clamped_norm(k, dk));
    case Score::uniform:
      return 0;
  }
  return 0;
}

void ScoreFunction::backward(double g, const double* q, const double* k, const Grads& d) const {
  switch (score) {
    case Score::scaled_dot:
    case Score::dot:
      // score = Σ q_i k_i, so ∂/∂q = k and ∂/∂k = q.
      for (int64_t i = 0; i < dk; ++i) {
        d.dq[i] += g * k[i];
        d.dk[i] += g * q[i];
      }
      return;
    case Score::general:
      // score = Σ_rc q_r W_rc k_c, so ∂/∂q_r = (W k)_r, ∂/∂k_c = (Wᵀ q)_c, ∂/∂W_rc = q_r k_c.
      for (int64_t r = 0; r < dq; ++r) {
        const double* w_row = w + r * dk;
        d.dq[r] += g * dot(w_row, k, dk);
        for (int64_t c = 0; c < dk; ++c) {
          d.dk[c] += g * q[r] * w_row[c];
          if (d.dw) d.dw[r * dk + c] += g * q[r] * k[c];
        }
      }
      return;
    case Score::additive: {
      // score = Σ_r v_r tanh(u_r), u = W_q q + W_k k, so with δ_r = g v_r (1 − tanh² u_r):
      // ∂/∂v_r = tanh u_r, ∂/∂W_q = δ qᵀ, ∂/∂W_k = δ kᵀ, ∂/∂q = W_qᵀ δ, ∂/∂k = W_kᵀ δ.
      const std::vector<double> u = additive_preactivation(*this, q, k);
      for (int64_t r = 0; r < a; ++r) {
        const double t = std::tanh(u[r]);
        if (d.dv) d.dv[r] += g * t;
        const double delta = g * v[r] * (1 - t * t);
        for (int64_t i = 0; i < dq; ++i) {
          d.dq[i] += delta * w_q[r * dq + i];
          if (d.dw_q) d.dw_q[r * dq + i] += delta * q[i];
        }
        for (int64_t i = 0; i < dk; ++i) {
          d.dk[i] += delta * w_k[r * dk + i];
          if (d.dw_k) d.dw_k[r * dk + i] += delta * k[i];
        }
      }
      return;
    }
    case Score::laplace:
      // score = −Σ |q_i − k_i|, so ∂/∂q_i = −sign(q_i − k_i) = −∂/∂k_i (subgradient 0 at a tie).
      for (int64_t i = 0; i < dk; ++i) {
        const double diff = q[i] - k[i];
        const double sign = diff > 0 ? 1.0 : (diff < 0 ? -1.0 : 0.0);
        d.dq[i] -= g * sign;
        d.dk[i] += g * sign;
      }
      return;
    case Score::cosine: {
      // score = q̂·k̂ with x̂ = x / max(‖x‖, ε). Where ‖x‖ > ε, ∂x̂/∂x = (I − x̂ x̂ᵀ) / ‖x‖, so
      // ∂score/∂q = (k̂ − (q̂·k̂) q̂) / ‖q‖; where ‖x‖ ≤ ε the norm is the constant ε.
      const double nq = clamped_norm(q, dk), nk = clamped_norm(k, dk);
      const bool q_clamped = std::sqrt(dot(q, q, dk)) <= kCosineEps;
      const bool k_clamped = std::sqrt(dot(k, k, dk)) <= kCosineEps;
      const double c = dot(q, k, dk) / (nq * nk);
      for (int64_t i = 0; i < dk; ++i) {
        const double qh = q[i] / nq, kh = k[i] / nk;
        d.dq[i] += g * (kh - (q_clamped ? 0.0 : c * qh)) / nq;
        d.dk[i] += g * (qh - (k_clamped ? 0.0 : c * kh)) / nk;
      }
      return;
    }
    case Score::uniform:
      return;  // a constant score has no gradient
  }
}

}  // namespace qkv::reference
