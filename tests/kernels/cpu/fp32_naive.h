// tests/kernels/cpu/fp32_naive.h — the "plain fp32 naive result N" of docs/CONVENTIONS.md §1.1 for
// the dot-product scores (scaled-dot, dot) under softmax, forward and backward, written from the
// formulas alone (never from src/):
//
//   s_ij = q_i·k_j,  x_ij = scale·s_ij + bias_ij,  P_ij = exp(x_ij − m_i) / Σ_l exp(x_il − m_i),
//   out_i = Σ_j P_ij v_j,  lse_i = m_i + log Σ_l exp(x_il − m_i)                  (forward)
//   dv_j += P_ij dout_i,  dP_ij = dout_i·v_j,  D_i = Σ_j P_ij dP_ij,
//   dS_ij = P_ij (dP_ij − D_i),  dq_i += scale·dS_ij k_j,  dk_j += scale·dS_ij q_i,
//   ∂loss/∂scale = Σ_ij dS_ij s_ij                                                  (backward)
//
// Templated on the arithmetic type: <float> is N (fp32 storage, fp32 accumulation, std::exp), the
// yardstick of the tolerance rule; <double> is checked against the library's float64 reference in
// flash_test_support.h and flash_*_test.cpp, which shows the formulas here are right and N differs
// from the reference only by rounding. Masked keys are never read, as the API promises.
//
// Also dscale_rounding_sigma(): the rounding error to expect in ∂loss/∂scale computed in float32
// (a scalar, so "4× the naive error" would be a coin toss; see the function).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/reference/naive_attention.h"

namespace qkv_test {

// The case's inputs converted once to T, and the row-by-row softmax over the visible keys.
template <class T>
class NaiveFp {
 public:
  explicit NaiveFp(const Case& c)
      : c_(c),
        q_(c.q.begin(), c.q.end()),
        k_(c.k.begin(), c.k.end()),
        v_(c.v.begin(), c.v.end()),
        scale_(static_cast<T>(c.scale_value())) {}

  // One query row (b, h, i): its visible keys, their scores s, logits x and probabilities p.
  struct Row {
    std::vector<int64_t> keys;
    std::vector<T> s, x, p;
    T lse = -std::numeric_limits<T>::infinity();
    const T* q = nullptr;
    int64_t kv = 0;  // (b, kv head) flat index
  };

  void row(int64_t b, int64_t h, int64_t i, Row& r) const {
    const Case& c = c_;
    r.keys.clear(), r.s.clear(), r.x.clear(), r.p.clear();
    r.lse = -std::numeric_limits<T>::infinity();
    r.kv = b * c.Hkv + h / (c.Hq / c.Hkv);  // grouped-query attention
    r.q = &q_[static_cast<size_t>(((b * c.Hq + h) * c.L + i) * c.Dk)];
    for (int64_t j = 0; j < c.S; ++j) {
      if (!visible(c, b, h, i, j)) continue;
      const T* k = key(r.kv, j);
      T s = 0;
      for (int64_t d = 0; d < c.Dk; ++d) s += r.q[d] * k[d];
      const T bias =
          c.mask_kind == MaskKind::additive ? static_cast<T>(mask_at(c, b, h, i, j)) : T(0);
      r.keys.push_back(j);
      r.s.push_back(s);
      r.x.push_back(scale_ * s + bias);
    }
    if (r.keys.empty()) return;  // nothing to attend to: out 0, lse −∞, gradient 0
    T m = -std::numeric_limits<T>::infinity();
    for (T x : r.x) m = std::max(m, x);
    T sum = 0;
    for (T x : r.x) sum += std::exp(x - m);
    for (T x : r.x) r.p.push_back(std::exp(x - m) / sum);
    r.lse = m + std::log(sum);
  }

  const T* key(int64_t kv, int64_t j) const {
    return &k_[static_cast<size_t>((kv * c_.S + j) * c_.Dk)];
  }
  const T* value(int64_t kv, int64_t j) const {
    return &v_[static_cast<size_t>((kv * c_.S + j) * c_.Dv)];
  }
  T scale() const { return scale_; }

 private:
  const Case& c_;
  std::vector<T> q_, k_, v_;
  T scale_;
};

struct NaiveForward {
  std::vector<double> out, lse;  // row-major [B, Hq, L, Dv] and [B, Hq, L]
};

template <class T>
NaiveForward naive_forward(const Case& c) {
  const NaiveFp<T> n(c);
  NaiveForward f;
  f.out.assign(static_cast<size_t>(c.B * c.Hq * c.L * c.Dv), 0.0);
  f.lse.assign(static_cast<size_t>(c.B * c.Hq * c.L), -kInf);
  typename NaiveFp<T>::Row r;
  std::vector<T> acc(static_cast<size_t>(c.Dv));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h)
      for (int64_t i = 0; i < c.L; ++i) {
        n.row(b, h, i, r);
        const int64_t row = (b * c.Hq + h) * c.L + i;
        f.lse[static_cast<size_t>(row)] = static_cast<double>(r.lse);
        std::fill(acc.begin(), acc.end(), T(0));
        for (size_t t = 0; t < r.keys.size(); ++t) {
          const T* v = n.value(r.kv, r.keys[t]);
          for (int64_t d = 0; d < c.Dv; ++d) acc[d] += r.p[t] * v[d];
        }
        for (int64_t d = 0; d < c.Dv; ++d)
          f.out[static_cast<size_t>(row * c.Dv + d)] = static_cast<double>(acc[d]);
      }
  return f;
}

struct NaiveGrads {
  std::vector<double> dq, dk, dv;  // row-major, shaped like q, k, v
  double dscale = 0;
};

// Gradients of loss = Σ out ∘ dout. Per row, ∂loss/∂scale is accumulated in T, rows in double.
template <class T>
NaiveGrads naive_backward(const Case& c, const std::vector<double>& dout) {
  const NaiveFp<T> n(c);
  std::vector<T> dq(static_cast<size_t>(c.B * c.Hq * c.L * c.Dk), T(0));
  std::vector<T> dk(static_cast<size_t>(c.B * c.Hkv * c.S * c.Dk), T(0));
  std::vector<T> dv(static_cast<size_t>(c.B * c.Hkv * c.S * c.Dv), T(0));
  std::vector<T> dout_row(static_cast<size_t>(c.Dv)), dp;
  double dscale = 0;
  typename NaiveFp<T>::Row r;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h)
      for (int64_t i = 0; i < c.L; ++i) {
        n.row(b, h, i, r);
        if (r.keys.empty()) continue;
        const int64_t row = (b * c.Hq + h) * c.L + i;
        for (int64_t d = 0; d < c.Dv; ++d)
          dout_row[d] = static_cast<T>(dout[static_cast<size_t>(row * c.Dv + d)]);
        // out_i = Σ_j P_ij v_j, so ∂/∂v_j += P_ij dout_i and ∂/∂P_ij = dout_i·v_j.
        dp.assign(r.keys.size(), T(0));
        T centre = 0;  // D_i = Σ_j P_ij dP_ij
        for (size_t t = 0; t < r.keys.size(); ++t) {
          const T* v = n.value(r.kv, r.keys[t]);
          T* dvj = &dv[static_cast<size_t>((r.kv * c.S + r.keys[t]) * c.Dv)];
          for (int64_t d = 0; d < c.Dv; ++d) {
            dvj[d] += r.p[t] * dout_row[d];
            dp[t] += dout_row[d] * v[d];
          }
          centre += r.p[t] * dp[t];
        }
        // Softmax: ∂/∂x_ij = P_ij (dP_ij − D_i); x = scale·s + bias, so ∂/∂s = scale·∂/∂x and
        // ∂/∂scale = Σ ∂/∂x · s.
        T* dqi = &dq[static_cast<size_t>(row * c.Dk)];
        T row_dscale = 0;
        for (size_t t = 0; t < r.keys.size(); ++t) {
          const T ds = r.p[t] * (dp[t] - centre);
          row_dscale += ds * r.s[t];
          const T g = n.scale() * ds;
          const T* k = n.key(r.kv, r.keys[t]);
          T* dkj = &dk[static_cast<size_t>((r.kv * c.S + r.keys[t]) * c.Dk)];
          for (int64_t d = 0; d < c.Dk; ++d) {
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

// The rounding error to expect in ∂loss/∂scale = Σ_ij t_ij, t_ij = P_ij (dP_ij − D_i) s_ij, when it
// is computed from float32 data in float32 arithmetic: its standard deviation σ under the
// probabilistic model of rounding (Higham & Mary, "A new approach to probabilistic rounding error
// analysis", SISC 2019): every operation rounds with an independent error of mean 0 and size
// ≤ u = 2⁻²⁴, so independent errors add in quadrature (a dot product of n terms errs by
// ~√n·u·Σ|terms|, not n·u·Σ|terms| as in the worst case). Why not "4× the naive error" as for the
// tensors: for one scalar, |N − R| can be small by luck; and a worst-case bound (all n·u, all
// errors aligned) came out 4e4× the measured error, so loose that a 10% error in dscale passed.
//
// In units of u, for row i with n visible keys (a_ij = Σ_d |q_id k_jd|, b_ij = Σ_c |dout_ic v_jc|):
//   δx_ij   ≈ |scale|·√Dk·a_ij + |scale·s_ij| + |bias_ij| + |x_ij|   (dot, fp32 scale, ·, +)
//   δlse_i  ≈ √Σ_j (P_ij δx_ij)² + √n + |lse_i| + 2                   (Σ exp, log)
//   δP_ij/P ≈ δx_ij + |x_ij| + |lse_i| + 4 + [δlse_i, common to the row] (argument, exp, division)
//   δD_i    ≈ √Dv·Σ_c |dout_ic out_ic| + √Σ_c dout_ic² Σ_j (P_ij v_jc δP_ij/P)²  (as dout·out)
//             + √Σ_j (P_ij |dP_ij| δP_ij/P)² + √Σ_j (P_ij √Dv b_ij)² + √n Σ_j P_ij |dP_ij|
//                                                                     (as Σ_j P_ij dP_ij; both
//                                                                     added)
//   per term, independent: |t|·δP/P + P|dP − D|·√Dk·a + P|s|·√Dv·b + 2|t|
//   per row, common: δlse·(|Σ_j t_ij| + |D_i|·|Σ_j P_ij s_ij|) + δD_i·|Σ_j P_ij s_ij|
//                    + √Σ_k (Σ_{l≤k} t_il)²   (the float32 running sum along the row)
// σ = u·√(Σ per-term² + Σ per-row²). Rows are summed in double. Each estimate above is an upper
// estimate of its own standard deviation, so σ over-estimates: flash_test_support.h and
// flash_*_test.cpp checks that |N − R| ≤ σ on every case (the model must cover the textbook
// backward) and prints the largest |N − R|/σ and |X − R|/σ it meets.
inline double dscale_rounding_sigma(const Case& c, const std::vector<double>& dout) {
  constexpr double u = 0x1.0p-24;
  const NaiveFp<double> n(c);
  const double scale = c.scale_value(), abs_scale = std::abs(scale);
  const double sqrt_dk = std::sqrt(static_cast<double>(c.Dk));
  const double sqrt_dv = std::sqrt(static_cast<double>(c.Dv));
  double var = 0;  // in units of u²
  typename NaiveFp<double>::Row r;
  std::vector<double> a, ex, ep, dp, b, out, out_var;
  for (int64_t bi = 0; bi < c.B; ++bi)
    for (int64_t h = 0; h < c.Hq; ++h)
      for (int64_t i = 0; i < c.L; ++i) {
        n.row(bi, h, i, r);
        if (r.keys.empty()) continue;
        const size_t nk = r.keys.size();
        const double sqrt_n = std::sqrt(static_cast<double>(nk));
        const int64_t row = (bi * c.Hq + h) * c.L + i;
        const double* g = &dout[static_cast<size_t>(row * c.Dv)];
        a.assign(nk, 0), ex.assign(nk, 0), ep.assign(nk, 0), dp.assign(nk, 0), b.assign(nk, 0);
        out.assign(static_cast<size_t>(c.Dv), 0), out_var.assign(static_cast<size_t>(c.Dv), 0);
        double lse_var = 0;
        for (size_t t = 0; t < nk; ++t) {
          const double* k = n.key(r.kv, r.keys[t]);
          for (int64_t d = 0; d < c.Dk; ++d) a[t] += std::abs(r.q[d] * k[d]);
          const double bias = r.x[t] - scale * r.s[t];
          ex[t] = abs_scale * sqrt_dk * a[t] + std::abs(scale * r.s[t]) + std::abs(bias) +
                  std::abs(r.x[t]);
          lse_var += (r.p[t] * ex[t]) * (r.p[t] * ex[t]);
        }
        const double e_lse = std::sqrt(lse_var) + sqrt_n + std::abs(r.lse) + 2;
        double centre = 0, sum_ps = 0, e_centre_var = 0, sum_p_dp = 0;
        for (size_t t = 0; t < nk; ++t) {
          ep[t] = ex[t] + std::abs(r.x[t]) + std::abs(r.lse) + 4;
          const double* v = n.value(r.kv, r.keys[t]);
          for (int64_t d = 0; d < c.Dv; ++d) {
            dp[t] += g[d] * v[d];
            b[t] += std::abs(g[d] * v[d]);
            out[d] += r.p[t] * v[d];
            out_var[d] += (r.p[t] * v[d] * ep[t]) * (r.p[t] * v[d] * ep[t]);
          }
          centre += r.p[t] * dp[t];
          sum_ps += r.p[t] * r.s[t];
          sum_p_dp += r.p[t] * std::abs(dp[t]);
          e_centre_var += (r.p[t] * std::abs(dp[t]) * ep[t]) * (r.p[t] * std::abs(dp[t]) * ep[t]) +
                          (r.p[t] * sqrt_dv * b[t]) * (r.p[t] * sqrt_dv * b[t]);
        }
        double g_out = 0, g_out_var = 0;
        for (int64_t d = 0; d < c.Dv; ++d) {
          g_out += std::abs(g[d] * out[d]);
          g_out_var += g[d] * g[d] * out_var[d];
        }
        const double e_centre =
            sqrt_dv * g_out + std::sqrt(g_out_var) + std::sqrt(e_centre_var) + sqrt_n * sum_p_dp;
        double sum_t = 0, running = 0, running_var = 0;
        for (size_t t = 0; t < nk; ++t) {
          const double diff = dp[t] - centre, p = r.p[t], s = r.s[t];
          const double term = p * diff * s;
          sum_t += term;
          running += term;
          running_var += running * running;
          const double e_term = std::abs(term) * ep[t] + p * std::abs(diff) * sqrt_dk * a[t] +
                                p * std::abs(s) * sqrt_dv * b[t] + 2 * std::abs(term);
          var += e_term * e_term;
        }
        const double common = e_lse * (std::abs(sum_t) + std::abs(centre) * std::abs(sum_ps)) +
                              e_centre * std::abs(sum_ps);
        var += common * common + running_var;
      }
  return u * std::sqrt(var);
}

}  // namespace qkv_test
