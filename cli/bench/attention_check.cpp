// Slices of a benchmark case, their float64 reference and naive fp32 results, and the checks.
#include "bench/attention_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

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

// The plain fp32 result, loop per formula with sequential sums: the N of the tolerance rule.
// q: [n, D], k, v: [S, D]; query i sees keys j < i + 1 + S − n when causal (bottom-right).
struct Naive {
  std::vector<float> prob, out, dq, dk, dv;
};

Naive naive_attention(const Slice& s, bool backward) {
  const int64_t n = s.rows, S = s.S, D = s.D;
  const float* q = s.q.data<float>();
  const float* k = s.k.data<float>();
  const float* v = s.v.data<float>();
  const float scale = static_cast<float>(s.options.scale.value_or(1.0 / std::sqrt(double(D))));
  const bool causal = s.options.causal == Causal::bottom_right;
  Naive r;
  r.prob.assign(static_cast<std::size_t>(n * S), 0.0f);
  r.out.assign(static_cast<std::size_t>(n * D), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t end = causal ? std::min(S, i + 1 + S - n) : S;
    float* p = &r.prob[i * S];
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < end; ++j) {
      float dot = 0;
      for (int64_t d = 0; d < D; ++d) dot += q[i * D + d] * k[j * D + d];
      p[j] = scale * dot;
      m = std::max(m, p[j]);
    }
    float sum = 0;
    for (int64_t j = 0; j < end; ++j) sum += p[j] = std::exp(p[j] - m);
    for (int64_t j = 0; j < end; ++j) p[j] /= sum;
    for (int64_t j = 0; j < end; ++j)
      for (int64_t d = 0; d < D; ++d) r.out[i * D + d] += p[j] * v[j * D + d];
  }
  if (!backward) return r;

  // dV = Pᵀ·dO; dP = dO·Vᵀ; dS = P ∘ (dP − rowsum(P ∘ dP)); dQ = scale·dS·K; dK = scale·dSᵀ·Q.
  const float* dout = s.dout.data<float>();
  r.dq.assign(static_cast<std::size_t>(n * D), 0.0f);
  r.dk.assign(static_cast<std::size_t>(S * D), 0.0f);
  r.dv.assign(static_cast<std::size_t>(S * D), 0.0f);
  std::vector<float> ds(static_cast<std::size_t>(S));
  for (int64_t i = 0; i < n; ++i) {
    const float* p = &r.prob[i * S];
    float rowsum = 0;
    for (int64_t j = 0; j < S; ++j) {
      float dp = 0;
      for (int64_t d = 0; d < D; ++d) dp += dout[i * D + d] * v[j * D + d];
      ds[j] = dp;
      rowsum += p[j] * dp;
    }
    for (int64_t j = 0; j < S; ++j) {
      ds[j] = p[j] * (ds[j] - rowsum);
      for (int64_t d = 0; d < D; ++d) {
        r.dv[j * D + d] += p[j] * dout[i * D + d];
        r.dq[i * D + d] += scale * ds[j] * k[j * D + d];
        r.dk[j * D + d] += scale * ds[j] * q[i * D + d];
      }
    }
  }
  return r;
}

// max|x − r|; +∞ when x holds a NaN or ∞ (the reference of N(0, 1) data is finite).
double max_error(const float* x, const double* r, int64_t n) {
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
  const double allowed = factor * naive + 1e-6;
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
                 int64_t head, int64_t rows, bool backward) {
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

  AttentionOptions ref = s.options;
  ref.path = Path::reference;
  const Tensor q64 = s.q.to(DType::f64), k64 = s.k.to(DType::f64), v64 = s.v.to(DType::f64);
  s.ref_out = attention(q64, k64, v64, ref).out;
  const Naive naive = naive_attention(s, backward);
  s.naive_out_error = max_error(naive.out.data(), s.ref_out.data<double>(), s.rows * s.D);
  if (backward) {
    const AttentionGrads g = attention_backward(s.dout.to(DType::f64), q64, k64, v64, ref);
    s.ref_dq = g.dq, s.ref_dk = g.dk, s.ref_dv = g.dv;
    s.naive_dq_error = max_error(naive.dq.data(), g.dq.data<double>(), s.rows * s.D);
    s.naive_dk_error = max_error(naive.dk.data(), g.dk.data<double>(), s.S * s.D);
    s.naive_dv_error = max_error(naive.dv.data(), g.dv.data<double>(), s.S * s.D);
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
  return check_rows(case_name, "the " + path + " forward", s, out, s.ref_out, s.naive_out_error, 2);
}

double check_backward(const std::string& case_name, const std::string& path, const Slice& s,
                      const float* dq, const float* dk, const float* dv) {
  const double eq = max_error(dq, s.ref_dq.data<double>(), s.rows * s.D);
  const double ek = max_error(dk, s.ref_dk.data<double>(), s.S * s.D);
  const double ev = max_error(dv, s.ref_dv.data<double>(), s.S * s.D);
  require(case_name, "the " + path + " backward's dq", s, eq, s.naive_dq_error, 4);
  require(case_name, "the " + path + " backward's dk", s, ek, s.naive_dk_error, 4);
  require(case_name, "the " + path + " backward's dv", s, ev, s.naive_dv_error, 4);
  return std::max({eq, ek, ev});
}

double check_dq_rows(const std::string& case_name, const std::string& path, const Slice& s,
                     const float* dq) {
  return check_rows(case_name, "the " + path + " backward's dq", s, dq, s.ref_dq, s.naive_dq_error,
                    4);
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
