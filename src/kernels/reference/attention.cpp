// Float64 reference attention: scores, softmax and the weighted sum of values, one query row at a
// time, straight from the formulas. Never optimized: this is the oracle.
#include "kernels/reference/attention.h"

#include <cmath>
#include <limits>
#include <vector>

namespace qkv::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One query row (b, h, i) of the problem: where its inputs and outputs live.
struct Row {
  const double* q;     // [Dq]
  const double* k;     // [S, Dk] of kv head h / (Hq / Hkv)
  const double* v;     // [S, Dv]
  const double* bias;  // [S] or null
  int64_t kv_index;    // (b, kv head) flat index, for dk / dv
  int64_t row_index;   // (b, h, i) flat index
};

Row row_of(const Problem& p, int64_t b, int64_t h, int64_t i) {
  const int64_t group = p.Hq / p.Hkv;
  const int64_t kv = b * p.Hkv + h / group;
  const int64_t row = (b * p.Hq + h) * p.L + i;
  return {p.q + row * p.score.dq,
          p.k + kv * p.S * p.score.dk,
          p.v + kv * p.S * p.Dv,
          p.bias ? p.bias + row * p.S : nullptr,
          kv,
          row};
}

bool all_finite(const double* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return false;
  return true;
}

// The logits of one row: scale · score(q, k_j) + bias_j, −∞ where masked. NaN or ∞ in q or in a
// visible k_j makes the logit NaN, whatever the score makes of it (tanh(∞) = 1 would hide it, the
// uniform score would ignore it): bad input never vanishes quietly. So does a score or logit
// beyond p.range (an overflow): as −∞ it would pass for a mask, as +∞ for a certainty.
void row_logits(const Problem& p, const Row& r, double* scores, double* logits) {
  const bool q_finite = all_finite(r.q, p.score.dq);
  for (int64_t j = 0; j < p.S; ++j) {
    const double* k = r.k + j * p.score.dk;
    const double raw = p.score(r.q, k);
    const double bias = r.bias ? r.bias[j] : 0.0;
    scores[j] = raw;
    const double x = p.scale * raw + bias;
    if (bias == -kInf)
      logits[j] = -kInf;
    else if (!q_finite || !all_finite(k, p.score.dk) || !(std::abs(raw) <= p.range) ||
             !(std::abs(x) <= p.range))
      logits[j] = kNaN;
    else
      logits[j] = x;
  }
}

// Normalizes one row of logits into weights and returns its logsumexp.
// Softmax: w_j = exp(x_j − m) / Σ exp(x − m) with m = max x, so no exp overflows. A row with every
// logit −∞ has nothing to attend to: weights 0 and logsumexp −∞ (docs/CONVENTIONS.md §1.4).
// NaN spreads.
double normalize_row(const Problem& p, const double* logits, double* weights) {
  double m = -kInf;
  bool nan = false;
  for (int64_t j = 0; j < p.S; ++j) {
    if (std::isnan(logits[j]))
      nan = true;
    else if (logits[j] > m)
      m = logits[j];
  }
  if (m == -kInf && !nan) {
    for (int64_t j = 0; j < p.S; ++j) weights[j] = 0;
    return -kInf;
  }
  double sum = 0;
  for (int64_t j = 0; j < p.S; ++j)
    if (logits[j] != -kInf) sum += std::exp(logits[j] - m);  // NaN and +∞ − +∞ give NaN
  const double lse = m + std::log(sum);
  for (int64_t j = 0; j < p.S; ++j) {
    if (logits[j] == -kInf)
      weights[j] = 0;
    else
      weights[j] = p.normalize == Normalize::softmax ? std::exp(logits[j] - m) / sum : logits[j];
  }
  return lse;
}

}  // namespace

void attention_forward(const Problem& p, const ForwardOutputs& o) {
  std::vector<double> scores(p.S), logits(p.S), weights(p.S);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.Hq; ++h)
      for (int64_t i = 0; i < p.L; ++i) {
        const Row r = row_of(p, b, h, i);
        row_logits(p, r, scores.data(), logits.data());
        const double lse = normalize_row(p, logits.data(), weights.data());
        // out_i = Σ_j w_ij v_j over the visible keys only: a masked key's value is never read.
        double* out = o.out + r.row_index * p.Dv;
        for (int64_t c = 0; c < p.Dv; ++c) out[c] = 0;
        for (int64_t j = 0; j < p.S; ++j) {
          if (logits[j] == -kInf) continue;
          for (int64_t c = 0; c < p.Dv; ++c) out[c] += weights[j] * r.v[j * p.Dv + c];
        }
        // ∞ in a visible value row would surface as ±∞ in some columns, an output beyond p.range
        // as ∞ in float32: the row is not a result.
        bool finite = true;
        for (int64_t c = 0; c < p.Dv; ++c) finite = finite && std::abs(out[c]) <= p.range;
        if (!finite)
          for (int64_t c = 0; c < p.Dv; ++c) out[c] = kNaN;
        const int64_t at = r.row_index * p.S;
        for (int64_t j = 0; j < p.S; ++j) {
          if (o.weights) o.weights[at + j] = weights[j];
          if (o.scores) o.scores[at + j] = scores[j];
          if (o.logits) o.logits[at + j] = logits[j];
        }
        if (o.lse) o.lse[r.row_index] = lse;
      }
}

void attention_backward(const Problem& p, const double* dout, const BackwardOutputs& g) {
  const int64_t dq_dim = p.score.dq, dk_dim = p.score.dk;
  std::vector<double> scores(p.S), logits(p.S), weights(p.S), dweights(p.S);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.Hq; ++h)
      for (int64_t i = 0; i < p.L; ++i) {
        const Row r = row_of(p, b, h, i);
        row_logits(p, r, scores.data(), logits.data());
        normalize_row(p, logits.data(), weights.data());
        const double* dout_i = dout + r.row_index * p.Dv;
        double* dv = g.dv + r.kv_index * p.S * p.Dv;

        // Forward was out_i = Σ_j w_ij v_j, so ∂/∂v_j += w_ij dout_i and ∂/∂w_ij = dout_i · v_j.
        for (int64_t j = 0; j < p.S; ++j) {
          dweights[j] = 0;
          if (logits[j] == -kInf) continue;
          for (int64_t c = 0; c < p.Dv; ++c) {
            dv[j * p.Dv + c] += weights[j] * dout_i[c];
            dweights[j] += dout_i[c] * r.v[j * p.Dv + c];
          }
        }
        // Softmax: w = softmax(x), so ∂/∂x_j = w_j (∂/∂w_j − Σ_l w_l ∂/∂w_l).
        // No normalization: w = x, so ∂/∂x_j = ∂/∂w_j.
        double centre = 0;
        if (p.normalize == Normalize::softmax)
          for (int64_t j = 0; j < p.S; ++j) centre += weights[j] * dweights[j];
        for (int64_t j = 0; j < p.S; ++j) {
          if (logits[j] == -kInf) continue;
          const double dlogit =
              p.normalize == Normalize::softmax ? weights[j] * (dweights[j] - centre) : dweights[j];
          // x_j = scale · score_j + bias_j, so ∂/∂scale += ∂/∂x_j · score_j and
          // ∂/∂score_j = scale · ∂/∂x_j.
          if (g.dscale) *g.dscale += dlogit * scores[j];
          p.score.backward(p.scale * dlogit, r.q, r.k + j * dk_dim,
                           {.dq = g.dq + r.row_index * dq_dim,
                            .dk = g.dk + (r.kv_index * p.S + j) * dk_dim,
                            .dw = g.dw,
                            .dw_q = g.dw_q,
                            .dw_k = g.dw_k,
                            .dv = g.dv_param});
        }
      }
}

}  // namespace qkv::reference
