// Checks of an AttentionCapture against the formulas of qkv/attention.h, recomputed here in
// float64 from the captured tensors themselves, so each one says whether the capture is
// self-consistent: logits = scale·score(q, k), weights = softmax(logits), head_out = weights·v.
// Each returns the worst absolute error (+∞ on a shape mismatch or a wrong −∞), to compare
// with capture_tolerance().
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "qkv/nn.h"

namespace qkv::test {

// Row i of a [B, H, L, D] tensor, as float64.
inline std::vector<double> row_of(const Tensor& t, int64_t b, int64_t h, int64_t i) {
  const int64_t d = t.dim(3);
  std::vector<double> r(static_cast<std::size_t>(d));
  const int64_t at = ((b * t.dim(1) + h) * t.dim(2) + i) * d;
  for (int64_t c = 0; c < d; ++c) r[static_cast<std::size_t>(c)] = t.value(at + c);
  return r;
}

// score(q, k) before scale, straight from the table in docs/CONVENTIONS.md §5.
inline double score_of(Score score, const ScoreParams& p, const std::vector<double>& q,
                       const std::vector<double>& k) {
  const auto dq = static_cast<int64_t>(q.size()), dk = static_cast<int64_t>(k.size());
  auto dot = [](const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (std::size_t c = 0; c < a.size(); ++c) s += a[c] * b[c];
    return s;
  };
  switch (score) {
    case Score::scaled_dot:
    case Score::dot:
      return dot(q, k);
    case Score::general: {  // qᵀ W k, W: [Dq, Dk]
      double s = 0;
      for (int64_t a = 0; a < dq; ++a)
        for (int64_t b = 0; b < dk; ++b)
          s += q[static_cast<std::size_t>(a)] * p.w.value(a * dk + b) *
               k[static_cast<std::size_t>(b)];
      return s;
    }
    case Score::additive: {  // vᵀ tanh(W_q q + W_k k), W_q: [A, Dq], W_k: [A, Dk], v: [A]
      double s = 0;
      for (int64_t a = 0; a < p.v.numel(); ++a) {
        double h = 0;
        for (int64_t c = 0; c < dq; ++c)
          h += p.w_q.value(a * dq + c) * q[static_cast<std::size_t>(c)];
        for (int64_t c = 0; c < dk; ++c)
          h += p.w_k.value(a * dk + c) * k[static_cast<std::size_t>(c)];
        s += p.v.value(a) * std::tanh(h);
      }
      return s;
    }
    case Score::laplace: {
      double s = 0;
      for (std::size_t c = 0; c < q.size(); ++c) s -= std::abs(q[c] - k[c]);
      return s;
    }
    case Score::cosine:
      return dot(q, k) / std::sqrt(dot(q, q) * dot(k, k));
    case Score::uniform:
      return 0;
  }
  return NAN;
}

// The worst |scores − score(q, k)| and |logits − scale·score(q, k)| over the entries whose
// logit is finite; query head h reads kv head h / (H / Hkv). Masked (−∞) entries are the mask
// tests' business.
inline double logit_error(const AttentionCapture& c, Score score, const ScoreParams& params) {
  const int64_t B = c.q.dim(0), H = c.q.dim(1), L = c.q.dim(2), Hkv = c.k.dim(1), S = c.k.dim(2);
  if (c.logits.shape() != Shape{B, H, L, S} || c.scores.shape() != c.logits.shape())
    return INFINITY;
  double worst = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i) {
        const std::vector<double> q = row_of(c.q, b, h, i);
        for (int64_t j = 0; j < S; ++j) {
          const int64_t at = ((b * H + h) * L + i) * S + j;
          if (c.logits.value(at) == -INFINITY) continue;
          const double s = score_of(score, params, q, row_of(c.k, b, h / (H / Hkv), j));
          worst = std::max({worst, std::abs(c.scores.value(at) - s),
                            std::abs(c.logits.value(at) - c.scale * s)});
        }
      }
  return worst;
}

// The worst |weights − softmax(logits)| over every row; a −∞ logit must have weight 0 exactly.
inline double softmax_error(const AttentionCapture& c) {
  const Tensor& z = c.logits;
  if (c.weights.shape() != z.shape()) return INFINITY;
  const int64_t S = z.dim(3), rows = z.numel() / S;
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, sum = 0;
    for (int64_t j = 0; j < S; ++j) m = std::max(m, z.value(r * S + j));
    for (int64_t j = 0; j < S; ++j) sum += std::exp(z.value(r * S + j) - m);
    for (int64_t j = 0; j < S; ++j) {
      const double zj = z.value(r * S + j), w = c.weights.value(r * S + j);
      if (zj == -INFINITY) {
        if (w != 0) return INFINITY;
        continue;
      }
      worst = std::max(worst, std::abs(w - std::exp(zj - m) / sum));
    }
  }
  return worst;
}

// The worst |head_out − Σ_j weights_ij·v_j|.
inline double head_out_error(const AttentionCapture& c) {
  const int64_t B = c.q.dim(0), H = c.q.dim(1), L = c.q.dim(2), Hkv = c.v.dim(1), S = c.v.dim(2),
                Dv = c.v.dim(3);
  if (c.head_out.shape() != Shape{B, H, L, Dv}) return INFINITY;
  double worst = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i) {
        std::vector<double> o(static_cast<std::size_t>(Dv), 0.0);
        for (int64_t j = 0; j < S; ++j) {
          const double w = c.weights.value(((b * H + h) * L + i) * S + j);
          const std::vector<double> v = row_of(c.v, b, h / (H / Hkv), j);
          for (std::size_t e = 0; e < o.size(); ++e) o[e] += w * v[e];
        }
        const std::vector<double> got = row_of(c.head_out, b, h, i);
        for (std::size_t e = 0; e < o.size(); ++e) worst = std::max(worst, std::abs(got[e] - o[e]));
      }
  return worst;
}

// What the checks above may differ by. The capture's logits, weights and head_out are float64
// results of the captured (exact) q, k, v, rounded once to the layer's dtype; each check
// recomputes them in float64, so the gap is that rounding: ≤ ε·|logit| for a logit, which moves
// a softmax weight by ≤ 2ε·max|logit| and head_out by ≤ ε·max|v| more than its own rounding.
// 4ε·(1 + max(|finite logit|, |v|)) covers all three, ε = 2⁻²⁴ for float32 and 2⁻⁵³·16 for
// float64 (summation order's few ulps).
inline double capture_tolerance(const AttentionCapture& c) {
  const double eps = c.logits.dtype() == DType::f32 ? 0x1p-24 : 0x1p-53 * 16;
  double m = 0;
  for (int64_t i = 0; i < c.logits.numel(); ++i)
    if (std::isfinite(c.logits.value(i))) m = std::max(m, std::abs(c.logits.value(i)));
  for (int64_t i = 0; i < c.v.numel(); ++i) m = std::max(m, std::abs(c.v.value(i)));
  return 4 * eps * (1 + m);
}

}  // namespace qkv::test
