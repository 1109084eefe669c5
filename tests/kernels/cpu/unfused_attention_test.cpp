// The unfused OpenBLAS baseline of `qkv bench attention` (src/kernels/cpu/unfused_attention.h)
// against the float64 reference, forward and backward, with the tolerance rule of
// docs/CONVENTIONS.md §1.1: max|X − R| ≤ 2·max|N − R| + 1e-6 for out and logsumexp, 4·… for
// dq, dk, dv, where N is the plain fp32 loop below. It must be right for its timings to mean
// anything: every mask kind, both causal alignments, key lengths, grouped-query heads, a single
// query row (its GEMV/GER path), rows with nothing to attend to, empty shapes, both ways of
// threading. The sweeps' shapes, and the benchmark's cases it is timed on, come from the case
// registry (bench/cases/attention_cases.h).
#include "kernels/cpu/unfused_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cases/attention_cases.h"
#include "qkv/attention.h"
#include "simd_targets.h"

namespace {

using qkv::Causal;
using qkv::DType;
using qkv::Tensor;
using qkv::cpu::BlasThreading;

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Spec {
  int64_t B = 1, Hq = 1, Hkv = 1, L = 1, S = 1, D = 8;
  Causal causal = Causal::none;
  std::vector<int64_t> key_lengths;  // empty: none
  bool bias = false;                 // a float mask [B, 1, L, S] with some −∞
  uint64_t seed = 1;

  std::string describe() const {
    std::ostringstream os;
    os << "B=" << B << " Hq=" << Hq << " Hkv=" << Hkv << " L=" << L << " S=" << S << " D=" << D
       << " causal=" << qkv::to_string(causal) << " key_lengths=" << key_lengths.size()
       << " bias=" << bias << " seed=" << seed;
    return os.str();
  }
};

// A registry case (Dk = Dv) as a Spec.
Spec spec_of(const qkv::cases::AttentionCase& c, uint64_t seed) {
  return {.B = c.B,
          .Hq = c.Hq,
          .Hkv = c.Hkv,
          .L = c.L,
          .S = c.S,
          .D = c.Dk,
          .causal = c.causal,
          .seed = seed};
}

// Inputs in float32 (the kernel's) and the same values in float64 (the reference's).
struct Problem {
  Spec s;
  Tensor q, k, v, dout, bias;  // float32; bias [B, 1, L, S] or undefined
  qkv::cpu::FlashProblem p;
};

Tensor normal(const qkv::Shape& shape, std::mt19937_64& rng) {
  std::normal_distribution<float> n;
  Tensor t(shape, DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(rng);
  return t;
}

Problem make(const Spec& s) {
  Problem x{.s = s};
  std::mt19937_64 rng(s.seed);
  x.q = normal({s.B, s.Hq, s.L, s.D}, rng);
  x.k = normal({s.B, s.Hkv, s.S, s.D}, rng);
  x.v = normal({s.B, s.Hkv, s.S, s.D}, rng);
  x.dout = normal({s.B, s.Hq, s.L, s.D}, rng);
  auto view = [](const Tensor& t) {
    return qkv::cpu::View{.data = t.data<float>(),
                          .stride = {t.strides()[0], t.strides()[1], t.strides()[2]}};
  };
  qkv::cpu::FlashProblem& p = x.p;
  p.B = s.B, p.Hq = s.Hq, p.Hkv = s.Hkv, p.L = s.L, p.S = s.S, p.Dk = s.D, p.Dv = s.D;
  p.scale = static_cast<float>(1 / std::sqrt(double(s.D)));
  p.causal = s.causal;
  p.q = view(x.q), p.k = view(x.k), p.v = view(x.v);
  if (s.bias) {
    x.bias = normal({s.B, 1, s.L, s.S}, rng);
    float* b = x.bias.data<float>();
    for (int64_t i = 0; i < x.bias.numel(); ++i) b[i] = i % 5 == 2 ? -kInf : b[i];
    p.bias = b;
    p.bias_stride[0] = s.L * s.S, p.bias_stride[1] = 0, p.bias_stride[2] = s.S,
    p.bias_stride[3] = 1;
  }
  if (!s.key_lengths.empty()) p.key_lengths = s.key_lengths.data();
  return x;
}

qkv::AttentionOptions reference_options(const Spec& s, const Problem& x) {
  qkv::AttentionOptions o;
  o.causal = s.causal;
  o.key_lengths = s.key_lengths;
  if (s.bias) o.mask = x.bias.to(DType::f64);
  o.need_logsumexp = true;
  o.path = qkv::Path::reference;
  return o;
}

// N: fp32, one loop per formula, sequential sums (forward and backward).
struct Naive {
  std::vector<float> out, lse, dq, dk, dv;
};

Naive naive(const Problem& x) {
  const Spec& s = x.s;
  const int64_t G = s.Hq / s.Hkv, D = s.D;
  Naive r;
  r.out.assign(s.B * s.Hq * s.L * D, 0), r.lse.assign(s.B * s.Hq * s.L, -kInf);
  r.dq.assign(r.out.size(), 0), r.dk.assign(s.B * s.Hkv * s.S * D, 0), r.dv = r.dk;
  const float* q = x.q.data<float>();
  const float* k = x.k.data<float>();
  const float* v = x.v.data<float>();
  const float* g = x.dout.data<float>();
  const float scale = x.p.scale;
  std::vector<float> p(s.S), dp(s.S);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.Hq; ++h)
      for (int64_t i = 0; i < s.L; ++i) {
        const int64_t kv = b * s.Hkv + h / G, row = (b * s.Hq + h) * s.L + i;
        float m = -kInf;
        for (int64_t j = 0; j < s.S; ++j) {
          bool visible = s.key_lengths.empty() || j < s.key_lengths[b];
          if (s.causal == Causal::top_left) visible = visible && j <= i;
          if (s.causal == Causal::bottom_right) visible = visible && j <= i + s.S - s.L;
          float x_ij = -kInf;
          if (visible) {
            float dot = 0;
            for (int64_t d = 0; d < D; ++d) dot += q[row * D + d] * k[(kv * s.S + j) * D + d];
            x_ij = scale * dot + (s.bias ? x.bias.data<float>()[(b * s.L + i) * s.S + j] : 0.0f);
          }
          p[j] = x_ij;
          m = std::max(m, x_ij);
        }
        if (m == -kInf) continue;  // nothing visible: out 0, lse −∞, gradient 0
        float sum = 0;
        for (int64_t j = 0; j < s.S; ++j) sum += p[j] = std::exp(p[j] - m);
        r.lse[row] = m + std::log(sum);
        for (int64_t j = 0; j < s.S; ++j) p[j] /= sum;
        float rowsum = 0;
        for (int64_t j = 0; j < s.S; ++j) {
          dp[j] = 0;
          for (int64_t d = 0; d < D; ++d) {
            r.out[row * D + d] += p[j] * v[(kv * s.S + j) * D + d];
            dp[j] += g[row * D + d] * v[(kv * s.S + j) * D + d];
          }
          rowsum += p[j] * dp[j];
        }
        for (int64_t j = 0; j < s.S; ++j) {
          const float ds = p[j] * (dp[j] - rowsum);
          for (int64_t d = 0; d < D; ++d) {
            r.dv[(kv * s.S + j) * D + d] += p[j] * g[row * D + d];
            r.dq[row * D + d] += scale * ds * k[(kv * s.S + j) * D + d];
            r.dk[(kv * s.S + j) * D + d] += scale * ds * q[row * D + d];
          }
        }
      }
  return r;
}

// max|x − r| over finite r; where r is ±∞ (a logsumexp), x must equal it.
double error(const std::vector<float>& x, const Tensor& r) {
  const double* ref = r.data<double>();
  double e = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isinf(ref[i])) {
      if (x[i] != ref[i]) return kInf;
      continue;
    }
    if (!std::isfinite(x[i])) return kInf;
    e = std::max(e, std::abs(x[i] - ref[i]));
  }
  return e;
}

void check(const Spec& s, BlasThreading threading, int threads) {
  SCOPED_TRACE(s.describe() + " threading=" + std::to_string(static_cast<int>(threading)) +
               " threads=" + std::to_string(threads));
  const Problem x = make(s);
  const qkv::AttentionOptions o = reference_options(s, x);
  const Tensor q64 = x.q.to(DType::f64), k64 = x.k.to(DType::f64), v64 = x.v.to(DType::f64);
  const qkv::AttentionResult ref = qkv::attention(q64, k64, v64, o);
  const qkv::AttentionGrads gref = qkv::attention_backward(x.dout.to(DType::f64), q64, k64, v64, o);
  const Naive n = naive(x);

  std::vector<float> out(n.out.size()), lse(n.lse.size()), dq(n.dq.size()), dk(n.dk.size()),
      dv(n.dv.size());
  qkv::cpu::unfused_forward(x.p, out.data(), lse.data(), threads, threading);
  qkv::cpu::unfused_backward(x.p, x.dout.data<float>(), lse.data(), dq.data(), dk.data(), dv.data(),
                             threads, threading);

  struct Item {
    const char* name;
    const std::vector<float>& fast;
    const std::vector<float>& plain;
    const Tensor& reference;
    double factor;
  };
  for (const Item& it :
       {Item{"out", out, n.out, ref.out, 2}, Item{"lse", lse, n.lse, ref.logsumexp, 2},
        Item{"dq", dq, n.dq, gref.dq, 4}, Item{"dk", dk, n.dk, gref.dk, 4},
        Item{"dv", dv, n.dv, gref.dv, 4}}) {
    const double naive_error = error(it.plain, it.reference);
    ASSERT_TRUE(std::isfinite(naive_error)) << it.name << ": the naive fp32 result itself";
    EXPECT_LE(error(it.fast, it.reference), it.factor * naive_error + 1e-6) << it.name;
  }
}

void check_every_threading(const Spec& s) {
  for (BlasThreading t :
       {BlasThreading::automatic, BlasThreading::per_head, BlasThreading::inside_gemm})
    for (int threads : {1, 2}) check(s, t, threads);
}

QKV_PER_SIMD_TARGET(UnfusedAttention);

TEST_P(UnfusedAttention, Shapes) {
  for (const qkv::cases::AttentionCase& c : qkv::cases::unfused_length_sweep())
    check_every_threading(spec_of(c, static_cast<uint64_t>(c.L * 1000 + c.S)));
}

TEST_P(UnfusedAttention, CausalBothAlignments) {
  for (const qkv::cases::AttentionCase& c : qkv::cases::unfused_causal_sweep())
    check_every_threading(spec_of(c, 1));
}

TEST_P(UnfusedAttention, GroupedQueryHeads) {
  for (const qkv::cases::AttentionCase& c : qkv::cases::unfused_gqa_sweep())
    check_every_threading(spec_of(c, c.L == 1 ? 8 : 7));  // the decode step: seed 8
}

// `qkv bench attention`'s cases, which time this baseline, at 1/64 of their lengths (a decode
// step keeps its one query), threaded as the benchmark runs it (the sweeps above take every way).
TEST_P(UnfusedAttention, BenchmarkCases) {
  uint64_t seed = 100;
  for (const qkv::cases::AttentionCase& c : qkv::cases::bench_cases())
    check(spec_of(qkv::cases::scaled(c, 64), seed++), BlasThreading::automatic, 2);
}

TEST_P(UnfusedAttention, KeyLengthsAndFloatMask) {
  // Batch 1 sees no key at all: its rows give 0, lse −∞ and no gradient.
  check_every_threading(
      {.B = 3, .Hq = 2, .Hkv = 1, .L = 13, .S = 20, .D = 8, .key_lengths = {20, 0, 5}});
  check_every_threading({.B = 2, .Hq = 2, .Hkv = 2, .L = 13, .S = 20, .D = 8, .bias = true});
  check_every_threading({.B = 2,
                         .Hq = 2,
                         .Hkv = 2,
                         .L = 13,
                         .S = 20,
                         .D = 8,
                         .causal = Causal::bottom_right,
                         .key_lengths = {7, 20},
                         .bias = true});
}

TEST_P(UnfusedAttention, EmptyShapes) {
  // No keys: out 0, lse −∞, dq 0. No queries: dk, dv 0.
  check({.Hq = 2, .Hkv = 2, .L = 5, .S = 0, .D = 8}, BlasThreading::automatic, 2);
  check({.Hq = 2, .Hkv = 2, .L = 0, .S = 5, .D = 8}, BlasThreading::automatic, 2);
}

}  // namespace
