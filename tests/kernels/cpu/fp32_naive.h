// tests/kernels/cpu/fp32_naive.h — the "plain fp32 naive result N" of docs/CONVENTIONS.md §1.1 for
// the dot-product scores (scaled-dot, dot) under softmax, forward and backward, on a test's Case:
// the loops are bench/cases/naive_fp32.h's (shared with `qkv bench attention`'s check), on the
// Case as naive_problem<T>() (kernels/reference/naive_attention.h) gives it.
//
// Templated on the arithmetic type: <float> is N, the yardstick of the tolerance rule; <double> is
// checked against the library's float64 reference in flash_test_support.h and flash_*_test.cpp,
// which shows the formulas are right and N differs from the reference only by rounding.
//
// Also dscale_rounding_sigma(): the rounding error to expect in ∂loss/∂scale computed in float32
// (a scalar, so "4× the naive error" would be a coin toss; see the function).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "cases/naive_fp32.h"
#include "kernels/reference/naive_attention.h"

namespace qkv_test {

using qkv::cases::NaiveForward;
using qkv::cases::NaiveGrads;

template <class T>
NaiveForward naive_forward(const Case& c) {
  return qkv::cases::naive_forward(naive_problem<T>(c));
}

// Gradients of loss = Σ out ∘ dout. Per row, ∂loss/∂scale is accumulated in T, rows in double.
template <class T>
NaiveGrads naive_backward(const Case& c, const std::vector<double>& dout) {
  return qkv::cases::naive_backward(naive_problem<T>(c), dout);
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
  const qkv::cases::NaiveProblem<double> n = naive_problem<double>(c);
  const double scale = c.scale_value(), abs_scale = std::abs(scale);
  const double sqrt_dk = std::sqrt(static_cast<double>(c.Dk));
  const double sqrt_dv = std::sqrt(static_cast<double>(c.Dv));
  double var = 0;  // in units of u²
  qkv::cases::NaiveRow<double> r;
  std::vector<double> a, ex, ep, dp, b, out, out_var;
  for (int64_t bi = 0; bi < c.B; ++bi)
    for (int64_t h = 0; h < c.Hq; ++h)
      for (int64_t i = 0; i < c.L; ++i) {
        qkv::cases::naive_row(n, bi, h, i, r);
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
