// bench/cases/naive_fp32.h — the tolerance rule of docs/CONVENTIONS.md §1.1 and its yardstick, the
// "plain fp32 naive result N", stated once for the kernel tests (tests/kernels), the check that
// `qkv bench attention` runs before timing (cli/bench/attention_check.cpp) and the ring attention
// test (tests/distributed). Written from the formulas alone, one loop per formula over plain
// row-major std::vector<T>, never from src/: it is what the library is measured against.
//
//   s_ij = q_i·k_j (or the caller's score),  x_ij = scale·s_ij + bias_ij,
//   P_ij = exp(x_ij − m_i) / Σ_l exp(x_il − m_i),  lse_i = m_i + log Σ_l exp(x_il − m_i),
//   out_i = Σ_j P_ij v_j                                                          (forward)
//   dv_j += P_ij dout_i,  dP_ij = dout_i·v_j,  D_i = Σ_j P_ij dP_ij,
//   dS_ij = P_ij (dP_ij − D_i),  dq_i += scale·dS_ij k_j,  dk_j += scale·dS_ij q_i,
//   ∂loss/∂scale = Σ_ij dS_ij s_ij                                                (backward)
//
// Templated on the arithmetic type: <float> is N (fp32 storage, fp32 accumulation, std::exp); the
// tests check <double> against the library's float64 reference, which shows the formulas here are
// right and N differs from the reference only by rounding. Keys a query cannot see are never read.
// Header only, on the standard library alone.
//
// bf16 (docs/CONVENTIONS.md §1.1b): bf16_problem() rounds q, k and v to bfloat16 and sets
// NaiveProblem::bf16_products, which rounds each product's other input as it is taken: P before
// P·V (forward); P before Pᵀ·dO, dO before dO·Vᵀ and Pᵀ·dO, and dX = ∂/∂x before dX·K and
// dXᵀ·Q (backward). <float> is then N_b, the yardstick of the bf16 rule.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

namespace qkv::cases {

// ---- the rule (docs/CONVENTIONS.md §1.1) ----

// A float32 result X passes when, per tensor, max|X − R| ≤ factor·max|N − R| + kFloor: factor 2 for
// outputs (out, logsumexp), 4 for gradients (dq, dk, dv); R the float64 reference.
inline constexpr double kOutputFactor = 2, kGradFactor = 4, kFloor = 1e-6;

// The largest max|X − R| the rule allows, given max|N − R|.
inline double rule_tolerance(double naive_error, double factor) {
  return factor * naive_error + kFloor;
}

// ---- bfloat16, from its definition ----

// x rounded to the nearest bfloat16 (8 significant bits, float32's exponent range), ties to even;
// NaN and ±∞ kept, a finite value past the largest bfloat16 (2¹²⁸ − 2¹²⁰) becomes ±∞, and one
// whose rounding lies below the smallest normal 2⁻¹²⁶ becomes 0 of its sign (vdpbf16ps treats
// bf16 subnormals as zero, and qkv's rounding flushes them so that every path sees the same
// inputs). Written from the format, with no bit tricks, so that it checks the library's
// bit-level rounding (kernels/cpu/bf16.h) rather than repeating it: the unit in the last place
// of |x| ∈ [2^e, 2^(e+1)) is 2^(e−7), and no smaller than bfloat16's subnormal step 2^−133.
inline float naive_bf16(float x) {
  if (!std::isfinite(x) || x == 0) return x;
  const int e = std::max(std::ilogb(x), -126);
  const double ulp = std::ldexp(1.0, e - 7);
  // nearbyint rounds half to even in the default rounding mode; x/ulp and the product are exact.
  const double r = std::nearbyint(static_cast<double>(x) / ulp) * ulp;
  const double largest = std::ldexp(255.0, 120);  // 0x7F7F: (2⁸ − 1)·2¹²⁰
  if (std::abs(r) > largest)
    return x > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  if (std::abs(r) < std::ldexp(1.0, -126)) return x > 0 ? 0.0f : -0.0f;
  return static_cast<float>(r);
}

// A product's input as the bf16 rule takes it: rounded to bfloat16 when `bf16`, else as it is.
template <class T>
T product_input(T x, bool bf16) {
  return bf16 ? static_cast<T>(naive_bf16(static_cast<float>(x))) : x;
}

// ---- N ----

// One problem: q [B, Hq, L, Dq], k [B, Hkv, S, Dk], v [B, Hkv, S, Dv], row-major, in T. Query head
// h reads key/value head h / (Hq / Hkv) (grouped-query attention).
template <class T>
struct NaiveProblem {
  int64_t B = 1, Hq = 1, Hkv = 1, L = 1, S = 1, Dq = 1, Dk = 1, Dv = 1;
  std::vector<T> q, k, v;
  T scale = 1;
  // May query i of (b, h) see key j? Every key when empty.
  std::function<bool(int64_t b, int64_t h, int64_t i, int64_t j)> visible;
  // Added to the logit of a visible key (a float mask); 0 when empty.
  std::function<T(int64_t b, int64_t h, int64_t i, int64_t j)> bias;
  // score(q_i, k_j) before the scale; q_i·k_j (Dq = Dk) when empty. The backward needs q_i·k_j.
  std::function<T(int64_t b, int64_t h, int64_t i, int64_t j)> score;
  // docs/CONVENTIONS.md §1.1b: P, dO and dX rounded to bfloat16 before the products that take
  // them (q, k and v are rounded once, by bf16_problem).
  bool bf16_products = false;

  const T* query(int64_t b, int64_t h, int64_t i) const {
    return &q[static_cast<size_t>(((b * Hq + h) * L + i) * Dq)];
  }
  // kv: the flat (b, kv head) index of NaiveRow.
  const T* key(int64_t kv, int64_t j) const { return &k[static_cast<size_t>((kv * S + j) * Dk)]; }
  const T* value(int64_t kv, int64_t j) const { return &v[static_cast<size_t>((kv * S + j) * Dv)]; }
};

// One query row (b, h, i): its visible keys, their scores s, logits x and probabilities p.
template <class T>
struct NaiveRow {
  std::vector<int64_t> keys;
  std::vector<T> s, x, p;
  T lse = -std::numeric_limits<T>::infinity();
  const T* q = nullptr;
  int64_t kv = 0;  // (b, kv head) flat index
};

template <class T>
void naive_row(const NaiveProblem<T>& n, int64_t b, int64_t h, int64_t i, NaiveRow<T>& r) {
  r.keys.clear(), r.s.clear(), r.x.clear(), r.p.clear();
  r.lse = -std::numeric_limits<T>::infinity();
  r.kv = b * n.Hkv + h / (n.Hq / n.Hkv);
  r.q = n.query(b, h, i);
  for (int64_t j = 0; j < n.S; ++j) {
    if (n.visible && !n.visible(b, h, i, j)) continue;
    T s = 0;
    if (n.score) {
      s = n.score(b, h, i, j);
    } else {
      const T* k = n.key(r.kv, j);
      for (int64_t d = 0; d < n.Dk; ++d) s += r.q[d] * k[d];
    }
    const T bias = n.bias ? n.bias(b, h, i, j) : T(0);
    r.keys.push_back(j);
    r.s.push_back(s);
    r.x.push_back(n.scale * s + bias);
  }
  if (r.keys.empty()) return;  // nothing to attend to: out 0, lse −∞, gradient 0
  T m = -std::numeric_limits<T>::infinity();
  for (T x : r.x) m = std::max(m, x);
  T sum = 0;
  for (T x : r.x) sum += std::exp(x - m);
  for (T x : r.x) r.p.push_back(std::exp(x - m) / sum);
  r.lse = m + std::log(sum);
}

struct NaiveForward {
  std::vector<double> out, lse;  // row-major [B, Hq, L, Dv] and [B, Hq, L]
  std::vector<double> weights;   // [B, Hq, L, S], 0 where unseen; only when asked for
};

template <class T>
NaiveForward naive_forward(const NaiveProblem<T>& n, bool need_weights = false) {
  NaiveForward f;
  const size_t rows = static_cast<size_t>(n.B * n.Hq * n.L);
  f.out.assign(rows * static_cast<size_t>(n.Dv), 0.0);
  f.lse.assign(rows, -std::numeric_limits<double>::infinity());
  if (need_weights) f.weights.assign(rows * static_cast<size_t>(n.S), 0.0);
  NaiveRow<T> r;
  std::vector<T> acc(static_cast<size_t>(n.Dv));
  for (int64_t b = 0; b < n.B; ++b)
    for (int64_t h = 0; h < n.Hq; ++h)
      for (int64_t i = 0; i < n.L; ++i) {
        naive_row(n, b, h, i, r);
        const int64_t row = (b * n.Hq + h) * n.L + i;
        f.lse[static_cast<size_t>(row)] = static_cast<double>(r.lse);
        std::fill(acc.begin(), acc.end(), T(0));
        for (size_t t = 0; t < r.keys.size(); ++t) {
          if (need_weights)
            f.weights[static_cast<size_t>(row * n.S + r.keys[t])] = static_cast<double>(r.p[t]);
          const T* v = n.value(r.kv, r.keys[t]);
          const T p = product_input(r.p[t], n.bf16_products);
          for (int64_t d = 0; d < n.Dv; ++d) acc[d] += p * v[d];
        }
        for (int64_t d = 0; d < n.Dv; ++d)
          f.out[static_cast<size_t>(row * n.Dv + d)] = static_cast<double>(acc[d]);
      }
  return f;
}

struct NaiveGrads {
  std::vector<double> dq, dk, dv;  // row-major, shaped like q, k, v
  double dscale = 0;
};

// Gradients of loss = Σ out ∘ dout (dout row-major [B, Hq, L, Dv]) for the score q·k (Dq = Dk).
// Per row, ∂loss/∂scale is accumulated in T, rows in double.
template <class T>
NaiveGrads naive_backward(const NaiveProblem<T>& n, const std::vector<double>& dout) {
  std::vector<T> dq(static_cast<size_t>(n.B * n.Hq * n.L * n.Dk), T(0));
  std::vector<T> dk(static_cast<size_t>(n.B * n.Hkv * n.S * n.Dk), T(0));
  std::vector<T> dv(static_cast<size_t>(n.B * n.Hkv * n.S * n.Dv), T(0));
  std::vector<T> dout_row(static_cast<size_t>(n.Dv)), dp;
  double dscale = 0;
  NaiveRow<T> r;
  for (int64_t b = 0; b < n.B; ++b)
    for (int64_t h = 0; h < n.Hq; ++h)
      for (int64_t i = 0; i < n.L; ++i) {
        naive_row(n, b, h, i, r);
        if (r.keys.empty()) continue;
        const int64_t row = (b * n.Hq + h) * n.L + i;
        for (int64_t d = 0; d < n.Dv; ++d)
          dout_row[d] = product_input(static_cast<T>(dout[static_cast<size_t>(row * n.Dv + d)]),
                                      n.bf16_products);
        // out_i = Σ_j P_ij v_j, so ∂/∂v_j += P_ij dout_i and ∂/∂P_ij = dout_i·v_j.
        dp.assign(r.keys.size(), T(0));
        T centre = 0;  // D_i = Σ_j P_ij dP_ij
        for (size_t t = 0; t < r.keys.size(); ++t) {
          const T* v = n.value(r.kv, r.keys[t]);
          T* dvj = &dv[static_cast<size_t>((r.kv * n.S + r.keys[t]) * n.Dv)];
          const T p = product_input(r.p[t], n.bf16_products);
          for (int64_t d = 0; d < n.Dv; ++d) {
            dvj[d] += p * dout_row[d];
            dp[t] += dout_row[d] * v[d];
          }
          centre += r.p[t] * dp[t];
        }
        // Softmax: ∂/∂x_ij = P_ij (dP_ij − D_i); x = scale·s + bias, so ∂/∂s = scale·∂/∂x and
        // ∂/∂scale = Σ ∂/∂x · s.
        T* dqi = &dq[static_cast<size_t>(row * n.Dk)];
        T row_dscale = 0;
        for (size_t t = 0; t < r.keys.size(); ++t) {
          const T ds = r.p[t] * (dp[t] - centre);
          row_dscale += ds * r.s[t];
          const T g = n.scale * product_input(ds, n.bf16_products);
          const T* k = n.key(r.kv, r.keys[t]);
          T* dkj = &dk[static_cast<size_t>((r.kv * n.S + r.keys[t]) * n.Dk)];
          for (int64_t d = 0; d < n.Dk; ++d) {
            dqi[d] += g * k[d];
            dkj[d] += g * r.q[d];
          }
        }
        dscale += static_cast<double>(row_dscale);
      }
  NaiveGrads g;
  g.dq.assign(dq.begin(), dq.end());
  g.dk.assign(dk.begin(), dk.end());
  g.dv.assign(dv.begin(), dv.end());
  g.dscale = dscale;
  return g;
}

// The same problem on bfloat16 inputs (§1.1b): q, k and v rounded, the products' other inputs
// rounded as they are taken. A caller's `score` must read the rounded q and k (the returned
// problem's) itself. dout is rounded by naive_backward.
template <class T>
NaiveProblem<T> bf16_problem(NaiveProblem<T> n) {
  for (std::vector<T>* t : {&n.q, &n.k, &n.v})
    for (T& x : *t) x = product_input(x, true);
  n.bf16_products = true;
  return n;
}

}  // namespace qkv::cases
