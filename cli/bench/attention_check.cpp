// Slices of a benchmark case, their float64 reference and naive fp32 results, and the checks.
#include "bench/attention_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "cases/naive_fp32.h"

namespace qkv::cli::bench {
namespace {

// Rows [first, first + n) of head h in batch 0 of a contiguous [B, H, N, D] float32 tensor.
Tensor rows_of(const Tensor& t, int64_t h, int64_t first, int64_t n) {
  const int64_t N = t.dim(2), D = t.dim(3);
  Tensor s({1, 1, n, D}, DType::f32);
  std::memcpy(s.data<float>(), t.data<float>() + (h * N + first) * D,
              static_cast<std::size_t>(n * D) * sizeof(float));
  return s;
}

// The plain fp32 result N of the tolerance rule (bench/cases/naive_fp32.h) on the slice: q [n, D],
// k, v [S, D]; query i sees keys j ≤ i + S − n when causal (bottom-right).
cases::NaiveProblem<float> naive_problem(const Slice& s) {
  cases::NaiveProblem<float> p;
  p.L = s.rows, p.S = s.S, p.Dq = p.Dk = p.Dv = s.D;
  p.q.assign(s.q.data<float>(), s.q.data<float>() + s.rows * s.D);
  p.k.assign(s.k.data<float>(), s.k.data<float>() + s.S * s.D);
  p.v.assign(s.v.data<float>(), s.v.data<float>() + s.S * s.D);
  p.scale = static_cast<float>(s.options.scale.value_or(1.0 / std::sqrt(double(s.D))));
  if (s.options.causal == Causal::bottom_right) {
    const int64_t shift = s.S - s.rows;
    p.visible = [shift](int64_t, int64_t, int64_t i, int64_t j) { return j <= i + shift; };
  }
  return p;
}

// max|x − r|; +∞ when x holds a NaN or ∞ (the reference of N(0, 1) data is finite).
template <class X>
double max_error(const X* x, const double* r, int64_t n) {
  double e = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return std::numeric_limits<double>::infinity();
    e = std::max(e, std::abs(static_cast<double>(x[i]) - r[i]));
  }
  return e;
}

std::string sci(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2e", x);
  return buffer;
}

void require(const std::string& case_name, const std::string& what, const Slice& s, double error,
             double naive, double factor) {
  const double allowed = cases::rule_tolerance(naive, factor);
  if (error <= allowed) return;
  throw Error("bench attention: case " + case_name + ": " + what +
                  " differs from the float64 reference by " + sci(error) + " on head " +
                  std::to_string(s.head) + ", query rows " + std::to_string(s.first_row) + ".." +
                  std::to_string(s.first_row + s.rows - 1) + " (allowed " + sci(allowed) + " = " +
                  std::to_string(static_cast<int>(factor)) + " × the naive fp32 error " +
                  sci(naive) + " + 1e-6); its timing would mean nothing",
              Error::Kind::runtime);
}

}  // namespace

Slice make_slice(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout, bool causal,
                 int64_t head, int64_t rows, bool backward, Precision precision) {
  Slice s;
  s.L = q.dim(2), s.S = k.dim(2), s.D = q.dim(3);
  s.head = head;
  s.rows = std::min(rows, s.L);
  s.first_row = s.L - s.rows;
  const int64_t kv = head / (q.dim(1) / k.dim(1));
  s.q = rows_of(q, head, s.first_row, s.rows);
  s.k = rows_of(k, kv, 0, s.S);
  s.v = rows_of(v, kv, 0, s.S);
  if (backward) s.dout = rows_of(dout, head, s.first_row, s.rows);
  s.options.causal = causal ? Causal::bottom_right : Causal::none;
  s.options.precision = precision;

  // The reference path rounds the inputs itself under bf16 (qkv/attention_types.h).
  AttentionOptions ref = s.options;
  ref.path = Path::reference;
  const Tensor q64 = s.q.to(DType::f64), k64 = s.k.to(DType::f64), v64 = s.v.to(DType::f64);
  s.ref_out = attention(q64, k64, v64, ref).out;
  const bool bf16 = precision == Precision::bf16;
  AttentionOptions exact = ref;
  exact.precision = Precision::fp32;
  if (bf16) s.exact_out = attention(q64, k64, v64, exact).out;
  const cases::NaiveProblem<float> naive =
      bf16 ? cases::bf16_problem(naive_problem(s)) : naive_problem(s);
  s.naive_out_error =
      max_error(cases::naive_forward(naive).out.data(), s.ref_out.data<double>(), s.rows * s.D);
  if (backward) {
    const AttentionGrads g = attention_backward(s.dout.to(DType::f64), q64, k64, v64, ref);
    s.ref_dq = g.dq, s.ref_dk = g.dk, s.ref_dv = g.dv;
    if (bf16) {
      const AttentionGrads e = attention_backward(s.dout.to(DType::f64), q64, k64, v64, exact);
      s.exact_dq = e.dq, s.exact_dk = e.dk, s.exact_dv = e.dv;
    }
    const float* dout = s.dout.data<float>();
    const cases::NaiveGrads n =
        cases::naive_backward(naive, std::vector<double>(dout, dout + s.rows * s.D));
    s.naive_dq_error = max_error(n.dq.data(), g.dq.data<double>(), s.rows * s.D);
    s.naive_dk_error = max_error(n.dk.data(), g.dk.data<double>(), s.S * s.D);
    s.naive_dv_error = max_error(n.dv.data(), g.dv.data<double>(), s.S * s.D);
  }
  return s;
}

namespace {

// The slice's rows of one head of a full [B, H, L, D] result against the reference's.
double check_rows(const std::string& case_name, const std::string& what, const Slice& s,
                  const float* full, const Tensor& ref, double naive_error, double factor) {
  const float* rows = full + (s.head * s.L + s.first_row) * s.D;
  const double e = max_error(rows, ref.data<double>(), s.rows * s.D);
  require(case_name, what, s, e, naive_error, factor);
  return e;
}

}  // namespace

double check_forward(const std::string& case_name, const std::string& path, const Slice& s,
                     const float* out) {
  return check_rows(case_name, "the " + path + " forward", s, out, s.ref_out, s.naive_out_error,
                    cases::kOutputFactor);
}

double check_backward(const std::string& case_name, const std::string& path, const Slice& s,
                      const float* dq, const float* dk, const float* dv) {
  const double eq = max_error(dq, s.ref_dq.data<double>(), s.rows * s.D);
  const double ek = max_error(dk, s.ref_dk.data<double>(), s.S * s.D);
  const double ev = max_error(dv, s.ref_dv.data<double>(), s.S * s.D);
  require(case_name, "the " + path + " backward's dq", s, eq, s.naive_dq_error, cases::kGradFactor);
  require(case_name, "the " + path + " backward's dk", s, ek, s.naive_dk_error, cases::kGradFactor);
  require(case_name, "the " + path + " backward's dv", s, ev, s.naive_dv_error, cases::kGradFactor);
  return std::max({eq, ek, ev});
}

double check_dq_rows(const std::string& case_name, const std::string& path, const Slice& s,
                     const float* dq) {
  return check_rows(case_name, "the " + path + " backward's dq", s, dq, s.ref_dq, s.naive_dq_error,
                    cases::kGradFactor);
}

double exact_forward_error(const Slice& s, const float* out) {
  return max_error(out + (s.head * s.L + s.first_row) * s.D, s.exact_out.data<double>(),
                   s.rows * s.D);
}

double exact_backward_error(const Slice& s, const float* dq, const float* dk, const float* dv) {
  return std::max({max_error(dq, s.exact_dq.data<double>(), s.rows * s.D),
                   max_error(dk, s.exact_dk.data<double>(), s.S * s.D),
                   max_error(dv, s.exact_dv.data<double>(), s.S * s.D)});
}

double exact_dq_rows_error(const Slice& s, const float* dq) {
  return max_error(dq + (s.head * s.L + s.first_row) * s.D, s.exact_dq.data<double>(),
                   s.rows * s.D);
}

void check_finite(const std::string& case_name, const std::string& what, const float* x,
                  int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i]))
      throw Error("bench attention: case " + case_name + ": " + what + " has " +
                      (std::isnan(x[i]) ? "NaN" : "∞") + " at element " + std::to_string(i) +
                      " of N(0, 1) inputs; its timing would mean nothing",
                  Error::Kind::runtime);
}

}  // namespace qkv::cli::bench
