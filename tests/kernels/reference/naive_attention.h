// tests/kernels/reference/naive_attention.h — an independent oracle for qkv::attention.
//
// Written from docs/CONVENTIONS.md §5 and include/qkv/attention.h alone, never from src/: one loop
// per formula, over plain row-major std::vector<double>, so that a bug in the library's tensors,
// broadcasting or dispatch cannot hide in the oracle as well. naive_attention() is the float64
// oracle; naive_problem<T>() gives a Case to bench/cases/naive_fp32.h, whose <float> loops are the
// "plain fp32 naive result N" of docs/CONVENTIONS.md §1.1 that fp32 tolerances are measured against
// (every score through score_of<T>, the oracle's own score formulas).
//
// Also the shared test plumbing: a seeded N(0,1) generator, the Case a test describes (and prints
// when it fails), conversion to qkv::Tensor / AttentionOptions, and element-wise comparisons.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cases/naive_fp32.h"
#include "qkv/attention.h"
#include "qkv/tensor.h"

namespace qkv {
// Test names and failure messages show "laplace", not "4-byte object <04-00 00-00>".
inline void PrintTo(Score score, std::ostream* os) { *os << to_string(score); }
inline void PrintTo(Path path, std::ostream* os) { *os << to_string(path); }
}  // namespace qkv

namespace qkv_test {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Every scoring function, in the header's order (not qkv::all_scores(): the tests must not lean on
// the library to enumerate what they check).
inline const std::vector<qkv::Score>& every_score() {
  static const std::vector<qkv::Score> scores = {
      qkv::Score::scaled_dot, qkv::Score::dot,    qkv::Score::general, qkv::Score::additive,
      qkv::Score::laplace,    qkv::Score::cosine, qkv::Score::uniform};
  return scores;
}

inline std::string score_name(qkv::Score s) {
  switch (s) {
    case qkv::Score::scaled_dot:
      return "scaled_dot";
    case qkv::Score::dot:
      return "dot";
    case qkv::Score::general:
      return "general";
    case qkv::Score::additive:
      return "additive";
    case qkv::Score::laplace:
      return "laplace";
    case qkv::Score::cosine:
      return "cosine";
    case qkv::Score::uniform:
      return "uniform";
  }
  return "?";
}
inline std::string causal_name(qkv::Causal c) {
  return c == qkv::Causal::none ? "none" : c == qkv::Causal::top_left ? "top_left" : "bottom_right";
}
inline std::string path_name(qkv::Path p) {
  return p == qkv::Path::reference ? "reference" : "automatic";
}
inline std::string shape_string(const qkv::Shape& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}
inline int64_t numel_of(const qkv::Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// N(0, 1) by Box–Muller over mt19937_64: unlike std::normal_distribution, the same numbers on every
// standard library, so a printed seed reproduces a case anywhere.
class Normal {
 public:
  explicit Normal(uint64_t seed) : engine_(seed) {}
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }  // [0, 1)
  int64_t integer(int64_t lo, int64_t hi) {  // uniform in [lo, hi]
    return lo + static_cast<int64_t>(engine_() % static_cast<uint64_t>(hi - lo + 1));
  }
  double operator()() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(1.0 - uniform()));  // 1 − [0,1) ∈ (0, 1]
    const double t = 2.0 * std::numbers::pi * uniform();
    spare_ = r * std::sin(t);
    has_spare_ = true;
    return r * std::cos(t);
  }
  std::vector<double> vec(int64_t n, double sd = 1.0) {
    std::vector<double> x(static_cast<size_t>(n));
    for (double& e : x) e = sd * (*this)();
    return x;
  }

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0;
};

enum class MaskKind { none, boolean, additive };

// One attention problem, in the oracle's own terms. q [B,Hq,L,Dq], k [B,Hkv,S,Dk], v [B,Hkv,S,Dv]
// row-major; `rank` says how the library sees them (4: as is, 3: [H,L,D] with B = 1, 2: [L,D]).
struct Case {
  qkv::Score score = qkv::Score::scaled_dot;
  int rank = 4;
  int64_t B = 1, Hq = 1, Hkv = 1, L = 1, S = 1, Dq = 1, Dk = 1, Dv = 1, A = 0;
  std::optional<double> scale;  // empty: the default of the score
  qkv::Normalize normalize = qkv::Normalize::softmax;
  qkv::Causal causal = qkv::Causal::none;
  MaskKind mask_kind = MaskKind::none;
  qkv::DType mask_dtype = qkv::DType::b8;
  qkv::Shape mask_shape;
  std::vector<double> mask;  // boolean: 1 where a query may attend; additive: added, −∞ masks
  std::vector<int64_t> key_lengths;
  std::vector<double> q, k, v;
  std::vector<double> w;              // general: W [Dq, Dk]
  std::vector<double> w_q, w_k, w_v;  // additive: W_q [A, Dq], W_k [A, Dk], v [A]
  uint64_t seed = 0;

  // docs/CONVENTIONS.md §5: 1/√Dk for scaled-dot, 1 for every other score.
  double scale_value() const {
    if (scale) return *scale;
    return score == qkv::Score::scaled_dot ? 1.0 / std::sqrt(static_cast<double>(Dk)) : 1.0;
  }

  qkv::Shape q_shape() const { return shape_of(Hq, L, Dq); }
  qkv::Shape k_shape() const { return shape_of(Hkv, S, Dk); }
  qkv::Shape v_shape() const { return shape_of(Hkv, S, Dv); }
  qkv::Shape out_shape() const { return shape_of(Hq, L, Dv); }
  qkv::Shape weights_shape() const { return shape_of(Hq, L, S); }
  qkv::Shape lse_shape() const {
    qkv::Shape s = shape_of(Hq, L, 0);
    s.pop_back();
    return s;
  }
  qkv::Shape shape_of(int64_t h, int64_t rows, int64_t last) const {
    if (rank == 2) return {rows, last};
    if (rank == 3) return {h, rows, last};
    return {B, h, rows, last};
  }

  std::string describe() const {
    std::ostringstream os;
    os << "score=" << score_name(score) << " rank=" << rank << " B=" << B << " Hq=" << Hq
       << " Hkv=" << Hkv << " L=" << L << " S=" << S << " Dq=" << Dq << " Dk=" << Dk
       << " Dv=" << Dv;
    if (score == qkv::Score::additive) os << " A=" << A;
    os << " scale=";
    if (scale)
      os << *scale;
    else
      os << "default";
    os << " normalize=" << (normalize == qkv::Normalize::softmax ? "softmax" : "none")
       << " causal=" << causal_name(causal) << " mask=";
    if (mask_kind == MaskKind::none)
      os << "none";
    else
      os << (mask_kind == MaskKind::boolean ? "bool" : std::string(qkv::dtype_name(mask_dtype)))
         << shape_string(mask_shape);
    if (!key_lengths.empty()) os << " key_lengths=" << shape_string(key_lengths);
    os << " seed=" << seed;
    return os.str();
  }
};

inline bool uses_w(qkv::Score s) { return s == qkv::Score::general; }
inline bool uses_additive(qkv::Score s) { return s == qkv::Score::additive; }
// Scores that need Dq = Dk: all but general and additive (which map each through its own W).
inline bool needs_equal_dims(qkv::Score s) { return !uses_w(s) && !uses_additive(s); }

// A case with N(0,1) q, k, v from `seed`. Dq is forced to Dk where the score needs them equal.
// W ~ N(0, 1/Dk) keeps qᵀWk on the scale of q·k; W_q ~ N(0, 1/Dq), W_k ~ N(0, 1/Dk) keep tanh's
// argument O(1) so it neither saturates nor linearizes.
inline Case make_case(qkv::Score score, int64_t B, int64_t Hq, int64_t Hkv, int64_t L, int64_t S,
                      int64_t Dq, int64_t Dk, int64_t Dv, uint64_t seed, int rank = 4) {
  Case c;
  c.score = score;
  c.rank = rank;
  c.B = B, c.Hq = Hq, c.Hkv = Hkv, c.L = L, c.S = S;
  c.Dq = needs_equal_dims(score) ? Dk : Dq;
  c.Dk = Dk, c.Dv = Dv;
  c.A = uses_additive(score) ? 5 : 0;
  c.seed = seed;
  Normal rng(seed);
  c.q = rng.vec(B * Hq * L * c.Dq);
  c.k = rng.vec(B * Hkv * S * Dk);
  c.v = rng.vec(B * Hkv * S * Dv);
  if (uses_w(score)) c.w = rng.vec(c.Dq * Dk, 1.0 / std::sqrt(static_cast<double>(Dk)));
  if (uses_additive(score)) {
    c.w_q = rng.vec(c.A * c.Dq, 1.0 / std::sqrt(static_cast<double>(c.Dq)));
    c.w_k = rng.vec(c.A * Dk, 1.0 / std::sqrt(static_cast<double>(Dk)));
    c.w_v = rng.vec(c.A);
  }
  return c;
}

// A boolean mask of `shape` (broadcast against [B, Hq, L, S]), true with probability p_true.
inline void set_bool_mask(Case& c, qkv::Shape shape, double p_true, uint64_t seed) {
  Normal rng(seed);
  c.mask_kind = MaskKind::boolean;
  c.mask_dtype = qkv::DType::b8;
  c.mask_shape = std::move(shape);
  c.mask.resize(static_cast<size_t>(numel_of(c.mask_shape)));
  for (double& m : c.mask) m = rng.uniform() < p_true ? 1.0 : 0.0;
}

// A float mask of `shape`: N(0,1) values, −∞ with probability p_masked; rounded to float32 first
// when stored as float32 so that the oracle adds exactly what the library reads.
inline void set_float_mask(Case& c, qkv::Shape shape, double p_masked, qkv::DType dtype,
                           uint64_t seed) {
  Normal rng(seed);
  c.mask_kind = MaskKind::additive;
  c.mask_dtype = dtype;
  c.mask_shape = std::move(shape);
  c.mask.resize(static_cast<size_t>(numel_of(c.mask_shape)));
  for (double& m : c.mask) {
    m = rng.uniform() < p_masked ? -kInf : rng();
    if (dtype == qkv::DType::f32) m = static_cast<float>(m);
  }
}

// Rounds every input to float32 (for the fp32 tests: the oracle then sees what the library sees).
inline void round_to_float(Case& c) {
  for (auto* x : {&c.q, &c.k, &c.v, &c.w, &c.w_q, &c.w_k, &c.w_v, &c.mask})
    for (double& e : *x) e = static_cast<float>(e);
}

// The mask entry for (b, h, i, j): mask dims are aligned with [B, Hq, L, S] at the last one, and
// a dim of size 1 repeats.
inline double mask_at(const Case& c, int64_t b, int64_t h, int64_t i, int64_t j) {
  const int64_t full[4] = {b, h, i, j};
  const int r = static_cast<int>(c.mask_shape.size());
  int64_t offset = 0;
  for (int m = 0; m < r; ++m) {
    const int64_t size = c.mask_shape[m];
    offset = offset * size + (size == 1 ? 0 : full[4 - r + m]);
  }
  return c.mask[static_cast<size_t>(offset)];
}

// May query i of (b, h) attend to key j? causal AND key_lengths AND the mask.
inline bool visible(const Case& c, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (c.causal == qkv::Causal::top_left && j > i) return false;
  if (c.causal == qkv::Causal::bottom_right && j > i + c.S - c.L) return false;
  if (!c.key_lengths.empty() && j >= c.key_lengths[static_cast<size_t>(b)]) return false;
  if (c.mask_kind == MaskKind::boolean && mask_at(c, b, h, i, j) == 0.0) return false;
  if (c.mask_kind == MaskKind::additive && mask_at(c, b, h, i, j) == -kInf) return false;
  return true;
}

// What the oracle returns: the values of AttentionResult, row-major over [B, Hq, L, ·], plus an
// error scale for each value.
//
// Why the scales (and kRtol = 1e-12): the library and the oracle evaluate the same float64 formula
// in possibly different orders. A sum of n terms computed in any order is within γ_n·Σ|term|
// of the exact sum, γ_n = n·u/(1 − n·u), u = 2⁻⁵³ ≈ 1.1e-16. The largest sums here are general's
// Σ_ab q_a W_ab k_b, n = Dq·Dk ≤ 21·21 = 441, so γ_n ≤ 4.9e-14; exp, log, tanh, sqrt add a few u.
// So each logit is within ~5e-14·M of the truth, M = |scale|·Σ|terms of the score| + |mask|
// (`logits_scale`); a softmax weight w_j = exp(x_j − lse) then has relative error ≤ the errors of
// x_j and lse, bounded by M_j + M_row (+1 for exp's own rounding, and u per rescale of an online
// softmax, S·u ≤ 1.1e-14); out_d = Σ_j w_j v_jd inherits Σ_j (that bound)·|v_jd|. kRtol = 1e-12
// is 20× the worst case, yet a wrong index, a dropped term or a wrong scale shows up as a relative
// error of 1e-3 or more. Exact values (0 for masked rows, ±∞) get a scale of 0: they must match
// exactly.
struct Naive {
  std::vector<double> out, weights, lse, scores, logits;  // scores: NaN where masked (unread)
  std::vector<unsigned char> visible;                     // [B, Hq, L, S]
  std::vector<double> out_scale, weights_scale, lse_scale, scores_scale, logits_scale;
};
inline constexpr double kRtol = 1e-12;

// score(q_i, k_j) of the case's scoring function (docs/CONVENTIONS.md §5) for query i of (b, h)
// and key j of its kv head, computed in T, and Σ|terms| in `s_mag` for its error scale.
template <class T>
T score_of(const Case& c, int64_t b, int64_t h, int64_t i, int64_t j, double& s_mag) {
  const int64_t Hq = c.Hq, Hkv = c.Hkv, L = c.L, S = c.S, Dq = c.Dq, Dk = c.Dk, A = c.A;
  const int64_t g = h / (Hq / Hkv);  // grouped-query attention
  auto Q = [&](int64_t d) { return c.q[static_cast<size_t>(((b * Hq + h) * L + i) * Dq + d)]; };
  auto K = [&](int64_t d) { return c.k[static_cast<size_t>(((b * Hkv + g) * S + j) * Dk + d)]; };
  T s = 0;
  s_mag = 0;
  switch (c.score) {
    case qkv::Score::scaled_dot:
    case qkv::Score::dot:
      for (int64_t d = 0; d < Dk; ++d) {
        s += static_cast<T>(Q(d)) * static_cast<T>(K(d));
        s_mag += std::abs(Q(d) * K(d));
      }
      break;
    case qkv::Score::general:  // Σ_a Σ_b q_a W_ab k_b
      for (int64_t a = 0; a < Dq; ++a)
        for (int64_t e = 0; e < Dk; ++e) {
          const double wae = c.w[static_cast<size_t>(a * Dk + e)];
          s += static_cast<T>(Q(a)) * static_cast<T>(wae) * static_cast<T>(K(e));
          s_mag += std::abs(Q(a) * wae * K(e));
        }
      break;
    case qkv::Score::additive:  // Σ_a v_a tanh(Σ_e Wq_ae q_e + Σ_e Wk_ae k_e)
      for (int64_t a = 0; a < A; ++a) {
        T u = 0;
        double u_mag = 0;
        for (int64_t e = 0; e < Dq; ++e) {
          const double wq = c.w_q[static_cast<size_t>(a * Dq + e)];
          u += static_cast<T>(wq) * static_cast<T>(Q(e));
          u_mag += std::abs(wq * Q(e));
        }
        for (int64_t e = 0; e < Dk; ++e) {
          const double wk = c.w_k[static_cast<size_t>(a * Dk + e)];
          u += static_cast<T>(wk) * static_cast<T>(K(e));
          u_mag += std::abs(wk * K(e));
        }
        const T t = std::tanh(u);
        s += static_cast<T>(c.w_v[static_cast<size_t>(a)]) * t;
        s_mag += std::abs(c.w_v[static_cast<size_t>(a)]) *
                 (std::abs(static_cast<double>(t)) + u_mag);  // |tanh'| ≤ 1
      }
      break;
    case qkv::Score::laplace:  // −Σ|q_d − k_d|
      for (int64_t d = 0; d < Dk; ++d) {
        s -= std::abs(static_cast<T>(Q(d)) - static_cast<T>(K(d)));
        s_mag += std::abs(Q(d)) + std::abs(K(d));
      }
      break;
    case qkv::Score::cosine: {  // (q/max(‖q‖,1e-8))·(k/max(‖k‖,1e-8))
      T nq = 0, nk = 0;
      for (int64_t d = 0; d < Dk; ++d) {
        nq += static_cast<T>(Q(d)) * static_cast<T>(Q(d));
        nk += static_cast<T>(K(d)) * static_cast<T>(K(d));
      }
      nq = std::max(std::sqrt(nq), static_cast<T>(1e-8));
      nk = std::max(std::sqrt(nk), static_cast<T>(1e-8));
      for (int64_t d = 0; d < Dk; ++d) {
        s += (static_cast<T>(Q(d)) / nq) * (static_cast<T>(K(d)) / nk);
        s_mag += std::abs(Q(d) * K(d)) / (static_cast<double>(nq) * static_cast<double>(nk));
      }
      s_mag += 1;  // the norms' own rounding, relative, times |cos| ≤ 1
      break;
    }
    case qkv::Score::uniform:
      break;
  }
  return s;
}

// The float64 oracle.
inline Naive naive_attention(const Case& c) {
  using T = double;
  const int64_t B = c.B, Hq = c.Hq, Hkv = c.Hkv, L = c.L, S = c.S, Dv = c.Dv;
  auto V = [&](int64_t b, int64_t g, int64_t j, int64_t d) {
    return c.v[static_cast<size_t>(((b * Hkv + g) * S + j) * Dv + d)];
  };
  const T scale = static_cast<T>(c.scale_value());
  const double abs_scale = std::abs(c.scale_value());
  const size_t rows = static_cast<size_t>(B * Hq * L);
  Naive r;
  r.out.assign(rows * Dv, 0.0);
  r.out_scale.assign(rows * Dv, 0.0);
  r.weights.assign(rows * S, 0.0);
  r.weights_scale.assign(rows * S, 0.0);
  r.scores.assign(rows * S, kNaN);
  r.logits.assign(rows * S, -kInf);
  r.logits_scale.assign(rows * S, 0.0);
  r.scores_scale.assign(rows * S, 0.0);
  r.visible.assign(rows * S, 0);
  r.lse.assign(rows, -kInf);
  r.lse_scale.assign(rows, 0.0);

  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t g = h / (Hq / Hkv);  // grouped-query attention
      for (int64_t i = 0; i < L; ++i) {
        const size_t row = static_cast<size_t>((b * Hq + h) * L + i);
        std::vector<T> x(static_cast<size_t>(S));
        std::vector<double> mag(static_cast<size_t>(S), 0.0);
        bool any = false;
        T m = -std::numeric_limits<T>::infinity();
        double mag_row = 0;
        for (int64_t j = 0; j < S; ++j) {
          if (!visible(c, b, h, i, j)) continue;
          any = true;
          r.visible[row * S + j] = 1;
          // score(q_i, k_j), and Σ|terms| for its error scale.
          double s_mag = 0;
          const T s = score_of<T>(c, b, h, i, j, s_mag);
          const double mask_add = c.mask_kind == MaskKind::additive ? mask_at(c, b, h, i, j) : 0.0;
          x[j] = scale * s + static_cast<T>(mask_add);
          mag[j] = abs_scale * s_mag + std::abs(mask_add);
          mag_row = std::max(mag_row, mag[j]);
          if (x[j] > m) m = x[j];
          r.scores[row * S + j] = static_cast<double>(s);
          r.scores_scale[row * S + j] = s_mag + std::abs(static_cast<double>(s));
          r.logits[row * S + j] = static_cast<double>(x[j]);
          r.logits_scale[row * S + j] = mag[j] + std::abs(static_cast<double>(x[j]));
        }
        if (!any) continue;  // nothing to attend to: out 0, weights 0, logsumexp −∞

        T sum = 0;
        for (int64_t j = 0; j < S; ++j)
          if (r.visible[row * S + j]) sum += std::exp(x[j] - m);
        const T lse = m + std::log(sum);
        r.lse[row] = static_cast<double>(lse);
        r.lse_scale[row] = mag_row + std::abs(static_cast<double>(lse)) + 1;

        std::vector<T> acc(static_cast<size_t>(Dv), 0);
        for (int64_t j = 0; j < S; ++j) {
          if (!r.visible[row * S + j]) continue;
          T wj;
          double wj_scale;
          if (c.normalize == qkv::Normalize::softmax) {
            wj = std::exp(x[j] - m) / sum;
            wj_scale = static_cast<double>(wj) * (mag[j] + mag_row + 1);
          } else {
            wj = x[j];
            wj_scale = mag[j] + std::abs(static_cast<double>(wj));
          }
          r.weights[row * S + j] = static_cast<double>(wj);
          r.weights_scale[row * S + j] = wj_scale;
          for (int64_t d = 0; d < Dv; ++d) {
            acc[d] += wj * static_cast<T>(V(b, g, j, d));
            r.out_scale[row * Dv + d] +=
                (wj_scale + std::abs(static_cast<double>(wj))) * std::abs(V(b, g, j, d));
          }
        }
        for (int64_t d = 0; d < Dv; ++d) r.out[row * Dv + d] = static_cast<double>(acc[d]);
      }
    }
  }
  return r;
}

// The Case as a problem for the plain naive loops of bench/cases/naive_fp32.h (softmax, computed
// in T): its inputs converted once to T, its visibility (causal, key lengths, a boolean mask), its
// float mask as the bias, and the scores other than the dot products through score_of<T>. The
// result refers to `c`, which must outlive it.
template <class T>
qkv::cases::NaiveProblem<T> naive_problem(const Case& c) {
  qkv::cases::NaiveProblem<T> n;
  n.B = c.B, n.Hq = c.Hq, n.Hkv = c.Hkv, n.L = c.L, n.S = c.S;
  n.Dq = c.Dq, n.Dk = c.Dk, n.Dv = c.Dv;
  n.q.assign(c.q.begin(), c.q.end());
  n.k.assign(c.k.begin(), c.k.end());
  n.v.assign(c.v.begin(), c.v.end());
  n.scale = static_cast<T>(c.scale_value());
  n.visible = [&c](int64_t b, int64_t h, int64_t i, int64_t j) { return visible(c, b, h, i, j); };
  if (c.mask_kind == MaskKind::additive)
    n.bias = [&c](int64_t b, int64_t h, int64_t i, int64_t j) {
      return static_cast<T>(mask_at(c, b, h, i, j));
    };
  if (c.score != qkv::Score::scaled_dot && c.score != qkv::Score::dot)
    n.score = [&c](int64_t b, int64_t h, int64_t i, int64_t j) {
      double magnitude;
      return score_of<T>(c, b, h, i, j, magnitude);
    };
  return n;
}

// ---- the library side: tensors and options for a Case ----

inline qkv::Tensor tensor_of(const qkv::Shape& shape, const std::vector<double>& values,
                             qkv::DType dtype) {
  if (dtype == qkv::DType::f64) return qkv::Tensor::from(shape, values);
  if (dtype == qkv::DType::f32)
    return qkv::Tensor::from(shape, std::vector<float>(values.begin(), values.end()));
  qkv::Tensor t(shape, qkv::DType::b8);
  bool* p = t.data<bool>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i] != 0.0;
  return t;
}

inline qkv::AttentionOptions options_of(const Case& c, qkv::DType param_dtype = qkv::DType::f64,
                                        qkv::Path path = qkv::Path::automatic) {
  qkv::AttentionOptions o;
  o.score = c.score;
  o.scale = c.scale;
  o.normalize = c.normalize;
  o.causal = c.causal;
  if (c.mask_kind != MaskKind::none) o.mask = tensor_of(c.mask_shape, c.mask, c.mask_dtype);
  o.key_lengths = c.key_lengths;
  if (uses_w(c.score)) o.params.w = tensor_of({c.Dq, c.Dk}, c.w, param_dtype);
  if (uses_additive(c.score)) {
    o.params.w_q = tensor_of({c.A, c.Dq}, c.w_q, param_dtype);
    o.params.w_k = tensor_of({c.A, c.Dk}, c.w_k, param_dtype);
    o.params.v = tensor_of({c.A}, c.w_v, param_dtype);
  }
  o.need_weights = o.need_logsumexp = o.need_scores = true;
  o.path = path;
  return o;
}

inline qkv::AttentionResult run_library(const Case& c, qkv::DType dtype = qkv::DType::f64,
                                        qkv::Path path = qkv::Path::automatic) {
  return qkv::attention(tensor_of(c.q_shape(), c.q, dtype), tensor_of(c.k_shape(), c.k, dtype),
                        tensor_of(c.v_shape(), c.v, dtype), options_of(c, dtype, path));
}

// The row-major values of a tensor (whatever its strides) as doubles.
inline std::vector<double> values_of(const qkv::Tensor& t) {
  std::vector<double> x(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) x[static_cast<size_t>(i)] = t.value(i);
  return x;
}

inline std::string index_string(const qkv::Shape& shape, int64_t flat) {
  qkv::Shape index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return shape_string(index);
}

inline ::testing::AssertionResult has_shape(std::string_view what, const qkv::Tensor& got,
                                            const qkv::Shape& shape, qkv::DType dtype) {
  if (!got.defined()) return ::testing::AssertionFailure() << what << " is undefined";
  if (got.shape() != shape)
    return ::testing::AssertionFailure() << what << " has shape " << shape_string(got.shape())
                                         << ", expected " << shape_string(shape);
  if (got.dtype() != dtype)
    return ::testing::AssertionFailure() << what << " has dtype " << qkv::dtype_name(got.dtype())
                                         << ", expected " << qkv::dtype_name(dtype);
  return ::testing::AssertionSuccess();
}

// |got − want| ≤ tol_i for every element, tol_i = rtol·scale_i + atol; NaN must meet NaN and ±∞
// the same ∞. Prints the first few misses with their [b, h, i, ·] index.
inline ::testing::AssertionResult near(std::string_view what, const qkv::Tensor& got,
                                       const qkv::Shape& shape, qkv::DType dtype,
                                       const std::vector<double>& want,
                                       const std::vector<double>& scale, double rtol,
                                       double atol = 0) {
  if (auto ok = has_shape(what, got, shape, dtype); !ok) return ok;
  int64_t misses = 0;
  double worst = 0;
  std::ostringstream os;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.value(i), w = want[static_cast<size_t>(i)];
    const double tol = rtol * (scale.empty() ? std::abs(w) : scale[static_cast<size_t>(i)]) + atol;
    bool ok;
    if (std::isnan(w))
      ok = std::isnan(g);
    else if (std::isinf(w))
      ok = g == w;
    else
      ok = std::isfinite(g) && std::abs(g - w) <= tol;
    if (std::isfinite(w) && std::isfinite(g) && tol > 0)
      worst = std::max(worst, std::abs(g - w) / tol);
    if (!ok && misses++ < 4)
      os << "\n  " << what << index_string(shape, i) << " = " << g << ", expected " << w
         << " (|diff| " << std::abs(g - w) << " > tol " << tol << ")";
  }
  if (misses)
    return ::testing::AssertionFailure()
           << misses << " of " << got.numel() << " elements of " << what << " differ" << os.str();
  return ::testing::AssertionSuccess() << "worst |diff|/tol " << worst;
}

// Every result of `got` against the float64 oracle: out, weights, logsumexp, scores (where
// visible) and logits, with the derived kRtol bound.
inline ::testing::AssertionResult matches_oracle(const Case& c, const qkv::AttentionResult& got,
                                                 qkv::DType dtype = qkv::DType::f64) {
  const Naive r = naive_attention(c);
  if (auto ok = near("out", got.out, c.out_shape(), dtype, r.out, r.out_scale, kRtol); !ok)
    return ok;
  if (auto ok =
          near("weights", got.weights, c.weights_shape(), dtype, r.weights, r.weights_scale, kRtol);
      !ok)
    return ok;
  if (auto ok = near("logsumexp", got.logsumexp, c.lse_shape(), dtype, r.lse, r.lse_scale, kRtol);
      !ok)
    return ok;
  if (auto ok =
          near("logits", got.logits, c.weights_shape(), dtype, r.logits, r.logits_scale, kRtol);
      !ok)
    return ok;
  // scores are specified only where a key is visible (masked keys are never read).
  if (auto ok = has_shape("scores", got.scores, c.weights_shape(), dtype); !ok) return ok;
  std::vector<double> scores = values_of(got.scores);
  for (size_t i = 0; i < scores.size(); ++i)
    if (!r.visible[i]) scores[i] = kNaN;
  const qkv::Tensor masked_scores = qkv::Tensor::from(c.weights_shape(), scores).to(dtype);
  return near("scores", masked_scores, c.weights_shape(), dtype, r.scores, r.scores_scale, kRtol);
}

}  // namespace qkv_test
