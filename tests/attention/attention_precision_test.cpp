// Precision::bf16 above the kernels (qkv/attention_types.h, docs/CONVENTIONS.md §1.1b): the one
// rounding to bfloat16 (kernels/cpu/bf16.h, which the reference path and the dense layers use
// too) against the format's definition, the reference path that
// computes in float64 from q, k, v (and dout) rounded to bfloat16, the tolerance rule's yardstick
// N_b (bench/cases/naive_fp32.h) and its checker, and the fused path's bf16 against that rule.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cases/naive_fp32.h"
#include "kernels/cpu/bf16.h"
#include "qkv/attention.h"
#include "simd_targets.h"

namespace qkv {
namespace {

Tensor normal(Shape shape, std::mt19937_64& rng, float sigma = 1) {
  Tensor t(std::move(shape), DType::f32);
  std::normal_distribution<float> n(0, sigma);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(rng);
  return t;
}

Tensor rounded(const Tensor& t) {
  Tensor r = t.contiguous().clone();
  for (int64_t i = 0; i < r.numel(); ++i) r.data<float>()[i] = cpu::round_bf16(r.data<float>()[i]);
  return r;
}

std::vector<double> values(const Tensor& t) {
  const Tensor c = t.contiguous().to(DType::f64);
  return {c.data<double>(), c.data<double>() + c.numel()};
}

// The same dtype, shape and values, bit for bit (float32 widens to float64 exactly).
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const std::vector<double> x = values(a), y = values(b);
  return std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e = std::max(e, std::abs(a[i] - b[i]));
  return e;
}

// ---- the rounding ----

TEST(Bf16Rounding, NearestTiesToEvenWithNaNAndInfinityKept) {
  const float ulp_at_one = std::ldexp(1.0f, -7);
  EXPECT_EQ(cpu::round_bf16(1.0f), 1.0f);
  EXPECT_EQ(cpu::round_bf16(1.0f + ulp_at_one / 2), 1.0f);                      // a tie: 1 is even
  EXPECT_EQ(cpu::round_bf16(1.0f + 1.5f * ulp_at_one), 1.0f + 2 * ulp_at_one);  // a tie: up to even
  EXPECT_EQ(cpu::round_bf16(1.0f + 0.51f * ulp_at_one), 1.0f + ulp_at_one);
  EXPECT_EQ(cpu::round_bf16(-1.0f - 0.49f * ulp_at_one), -1.0f);
  EXPECT_EQ(cpu::round_bf16(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(cpu::round_bf16(-std::numeric_limits<float>::infinity()),
            -std::numeric_limits<float>::infinity());
  // The largest float32 lies past bfloat16's largest (0x7F7F) by more than half a step.
  EXPECT_EQ(cpu::round_bf16(std::numeric_limits<float>::max()),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(cpu::to_bf16(std::bit_cast<float>(0x7F7F0000u)), 0x7F7F);
  // A NaN whose payload is only in the dropped half stays NaN, not ∞; its sign is kept.
  const float low_nan = std::bit_cast<float>(0xFF800001u);
  EXPECT_TRUE(std::isnan(cpu::round_bf16(low_nan)));
  EXPECT_TRUE(std::signbit(cpu::round_bf16(low_nan)));
  EXPECT_EQ(std::bit_cast<uint32_t>(cpu::round_bf16(-0.0f)), 0x80000000u);
  // A result below the smallest normal (2⁻¹²⁶) is flushed to 0 of its sign, as vdpbf16ps reads it.
  EXPECT_EQ(std::bit_cast<uint32_t>(cpu::round_bf16(std::ldexp(1.0f, -130))), 0u);
  EXPECT_EQ(std::bit_cast<uint32_t>(cpu::round_bf16(-std::ldexp(1.0f, -130))), 0x80000000u);
  EXPECT_EQ(cpu::round_bf16(std::ldexp(1.0f, -126)), std::ldexp(1.0f, -126));
}

// kernels/cpu/bf16.h's bit-level rounding against naive_bf16, written from the format's definition:
// every exponent, subnormals, ties and near-ties, and random bit patterns.
TEST(Bf16Rounding, TheBitRoundingIsTheDefinitionsOnEveryKindOfFloat) {
  std::mt19937_64 rng(31);
  std::vector<uint32_t> patterns;
  for (uint32_t e = 0; e < 256; ++e)
    for (uint32_t low : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu})
      for (uint32_t kept : {0x00u, 0x01u, 0x7Fu, 0x7Eu}) {
        const uint32_t bits = (e << 23) | (kept << 16) | low;
        patterns.push_back(bits), patterns.push_back(bits | 0x80000000u);
      }
  for (int i = 0; i < 1'000'000; ++i) patterns.push_back(static_cast<uint32_t>(rng()));
  int64_t checked = 0;
  for (const uint32_t bits : patterns) {
    const float x = std::bit_cast<float>(bits);
    const float got = cpu::round_bf16(x), want = cases::naive_bf16(x);
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << bits;
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
        << "x = " << x << " (bits 0x" << std::hex << bits << ")";
    ++checked;
  }
  EXPECT_GT(checked, 990'000);
}

// ---- the reference path ----

// Every score's learned matrices, for a [.., 8] query and key.
ScoreParams params_for(Score score, std::mt19937_64& rng) {
  ScoreParams p;
  if (score == Score::general) p.w = normal({8, 8}, rng, 0.3f);
  if (score == Score::additive)
    p.w_q = normal({5, 8}, rng, 0.3f), p.w_k = normal({5, 8}, rng, 0.3f), p.v = normal({5}, rng);
  return p;
}

// bf16 on the reference path is, bit for bit, fp32 on the inputs rounded first: every score,
// forward (out, weights, logsumexp, scores) and backward (dout rounded too).
TEST(AttentionPrecision, TheReferencesBf16IsItsFp32OnTheRoundedInputsForEveryScore) {
  std::mt19937_64 rng(32);
  const Tensor q = normal({2, 7, 8}, rng), k = normal({2, 9, 8}, rng), v = normal({2, 9, 6}, rng);
  const Tensor dout = normal({2, 7, 6}, rng);
  for (const Score score : all_scores()) {
    SCOPED_TRACE(std::string(to_string(score)));
    AttentionOptions o{.score = score,
                       .params = params_for(score, rng),
                       .need_weights = true,
                       .need_logsumexp = true,
                       .need_scores = true,
                       .path = Path::reference};
    const AttentionResult fp32 = attention(rounded(q), rounded(k), rounded(v), o);
    const AttentionResult unrounded = attention(q, k, v, o);
    o.precision = Precision::bf16;
    const AttentionResult bf16 = attention(q, k, v, o);
    EXPECT_TRUE(same_bits(bf16.out, fp32.out));
    EXPECT_TRUE(same_bits(bf16.weights, fp32.weights));
    EXPECT_TRUE(same_bits(bf16.logsumexp, fp32.logsumexp));
    EXPECT_TRUE(same_bits(bf16.scores, fp32.scores));
    // The option has an effect: the unrounded inputs give other numbers.
    if (score != Score::uniform) EXPECT_FALSE(same_bits(bf16.weights, unrounded.weights));
    EXPECT_FALSE(same_bits(bf16.out, unrounded.out));

    const AttentionGrads g = attention_backward(dout, q, k, v, o);
    o.precision = Precision::fp32;
    const AttentionGrads want =
        attention_backward(rounded(dout), rounded(q), rounded(k), rounded(v), o);
    EXPECT_TRUE(same_bits(g.dq, want.dq));
    EXPECT_TRUE(same_bits(g.dk, want.dk));
    EXPECT_TRUE(same_bits(g.dv, want.dv));
    EXPECT_EQ(g.dscale, want.dscale);
    if (score == Score::general) EXPECT_TRUE(same_bits(g.dparams.w, want.dparams.w));
  }
}

// float64 inputs are rounded through float32 (kernels/cpu/bf16.h rounds a float) and give float64
// R_b.
TEST(AttentionPrecision, Float64InputsAreRoundedTooAndStayFloat64) {
  std::mt19937_64 rng(33);
  const Tensor q = normal({5, 8}, rng), k = normal({6, 8}, rng), v = normal({6, 3}, rng);
  const AttentionOptions bf16{.path = Path::reference, .precision = Precision::bf16};
  const AttentionResult r = attention(q.to(DType::f64), k.to(DType::f64), v.to(DType::f64), bf16);
  ASSERT_EQ(r.out.dtype(), DType::f64);
  const AttentionResult want = attention(rounded(q).to(DType::f64), rounded(k).to(DType::f64),
                                         rounded(v).to(DType::f64), {.path = Path::reference});
  EXPECT_TRUE(same_bits(r.out, want.out));
  // NaN in a query row stays NaN through the rounding (NaN in, NaN out).
  Tensor q_nan = q.clone();
  q_nan.data<float>()[8] = std::numeric_limits<float>::quiet_NaN();
  const AttentionResult nan = attention(q_nan, k, v, bf16);
  EXPECT_TRUE(std::isnan(nan.out.data<float>()[3]));
  EXPECT_FALSE(std::isnan(nan.out.data<float>()[0]));
}

// ---- the rule of §1.1b ----

// The naive problem of a scaled-dot [B, H, L, D] case (no mask): q, k, v as the tensors hold them.
cases::NaiveProblem<float> naive_of(const Tensor& q, const Tensor& k, const Tensor& v) {
  cases::NaiveProblem<float> n;
  n.B = q.dim(0), n.Hq = q.dim(1), n.Hkv = k.dim(1), n.L = q.dim(2), n.S = k.dim(2);
  n.Dq = n.Dk = q.dim(3), n.Dv = v.dim(3);
  n.q.assign(q.data<float>(), q.data<float>() + q.numel());
  n.k.assign(k.data<float>(), k.data<float>() + k.numel());
  n.v.assign(v.data<float>(), v.data<float>() + v.numel());
  n.scale = static_cast<float>(1 / std::sqrt(static_cast<double>(n.Dk)));
  return n;
}

// The checker of §1.1b: max|X − R_b| ≤ factor·max|N_b − R_b| + kFloor over the entries where R_b
// is finite (N(0, 1) data: all of them).
::testing::AssertionResult within_bf16_rule(const char* what, const std::vector<double>& x,
                                            const std::vector<double>& naive,
                                            const std::vector<double>& ref, double factor) {
  const double xr = max_abs_diff(x, ref), nr = max_abs_diff(naive, ref);
  const double tol = cases::rule_tolerance(nr, factor);
  char line[200];
  std::snprintf(line, sizeof line, "%s: max|X-R_b| = %.3e, max|N_b-R_b| = %.3e, tol = %.3e", what,
                xr, nr, tol);
  if (xr <= tol) return ::testing::AssertionSuccess() << line;
  return ::testing::AssertionFailure() << line;
}

struct Bf16Case {
  Tensor q, k, v, dout;
  std::vector<double> ref_out, ref_dq, ref_dk, ref_dv;  // R_b: float64 on the rounded inputs
  cases::NaiveForward naive;                            // N_b
  cases::NaiveGrads naive_grads;
};

Bf16Case make_case(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Bf16Case c;
  // GQA, L ≠ S, odd sizes.
  c.q = normal({1, 4, 37, 24}, rng), c.k = normal({1, 2, 53, 24}, rng);
  c.v = normal({1, 2, 53, 16}, rng), c.dout = normal({1, 4, 37, 16}, rng);
  const AttentionOptions ref{.path = Path::reference, .precision = Precision::bf16};
  const Tensor q64 = c.q.to(DType::f64), k64 = c.k.to(DType::f64), v64 = c.v.to(DType::f64);
  c.ref_out = values(attention(q64, k64, v64, ref).out);
  const AttentionGrads g = attention_backward(c.dout.to(DType::f64), q64, k64, v64, ref);
  c.ref_dq = values(g.dq), c.ref_dk = values(g.dk), c.ref_dv = values(g.dv);
  const cases::NaiveProblem<float> n = cases::bf16_problem(naive_of(c.q, c.k, c.v));
  c.naive = cases::naive_forward(n);
  c.naive_grads = cases::naive_backward(n, values(c.dout));
  return c;
}

TEST(Bf16Rule, TheCheckerAcceptsTheReferenceAndTheNaiveAndRejectsAPerturbedResult) {
  const Bf16Case c = make_case(34);
  const double out_factor = cases::kOutputFactor, grad_factor = cases::kGradFactor;
  EXPECT_TRUE(within_bf16_rule("out", c.ref_out, c.naive.out, c.ref_out, out_factor));
  EXPECT_TRUE(within_bf16_rule("out", c.naive.out, c.naive.out, c.ref_out, out_factor));
  for (const auto& [what, naive, ref] : {std::tuple{"dq", &c.naive_grads.dq, &c.ref_dq},
                                         std::tuple{"dk", &c.naive_grads.dk, &c.ref_dk},
                                         std::tuple{"dv", &c.naive_grads.dv, &c.ref_dv}}) {
    EXPECT_TRUE(within_bf16_rule(what, *ref, *naive, *ref, grad_factor));
    EXPECT_TRUE(within_bf16_rule(what, *naive, *naive, *ref, grad_factor));
    // One entry moved by 1.05 × the allowance past R_b fails.
    std::vector<double> off = *ref;
    off[7] += 1.05 * cases::rule_tolerance(max_abs_diff(*naive, *ref), grad_factor);
    EXPECT_FALSE(within_bf16_rule(what, off, *naive, *ref, grad_factor));
  }
  std::vector<double> off = c.ref_out;
  off[11] -= 1.05 * cases::rule_tolerance(max_abs_diff(c.naive.out, c.ref_out), out_factor);
  EXPECT_FALSE(within_bf16_rule("out", off, c.naive.out, c.ref_out, out_factor));
  // The yardstick is bf16's, not fp32's: N_b is far from the float64 result of the unrounded
  // inputs, and the fp32 naive result is far closer to it.
  const Tensor q64 = c.q.to(DType::f64), k64 = c.k.to(DType::f64), v64 = c.v.to(DType::f64);
  const std::vector<double> exact = values(attention(q64, k64, v64).out);
  const cases::NaiveForward n32 = cases::naive_forward(naive_of(c.q, c.k, c.v));
  EXPECT_GT(max_abs_diff(c.naive.out, exact), 100 * max_abs_diff(n32.out, exact));
}

// What bf16 costs (docs/CONVENTIONS.md §1.1b): the errors of R_b and N_b against the float64
// result of the unrounded inputs, within the first-order estimates stated there, and printed.
TEST(Bf16Rule, TheErrorAgainstTheUnroundedInputsIsWhatTheRoundingPredicts) {
  const Bf16Case c = make_case(35);
  const Tensor q64 = c.q.to(DType::f64), k64 = c.k.to(DType::f64), v64 = c.v.to(DType::f64);
  const std::vector<double> exact = values(attention(q64, k64, v64).out);
  const AttentionGrads g = attention_backward(c.dout.to(DType::f64), q64, k64, v64);
  const double input_rounding = max_abs_diff(c.ref_out, exact);
  const double whole = max_abs_diff(c.naive.out, exact);
  const double dq = max_abs_diff(c.naive_grads.dq, values(g.dq));
  const double dk = max_abs_diff(c.naive_grads.dk, values(g.dk));
  const double dv = max_abs_diff(c.naive_grads.dv, values(g.dv));
  const double fp32 = max_abs_diff(cases::naive_forward(naive_of(c.q, c.k, c.v)).out, exact);
  std::printf(
      "bf16 against float64 of the unrounded inputs (N(0,1), D 24): out R_b %.3e, N_b %.3e; "
      "N_b's dq %.3e, dk %.3e, dv %.3e; N_b against R_b: out %.3e; fp32 naive out %.3e\n",
      input_rounding, whole, dq, dk, dv, max_abs_diff(c.naive.out, c.ref_out), fp32);
  // §1.1b's worst-case first-order bound on an output, per row: the logits move by at most
  // 2u·scale·|q||k| and v, P by u relative: 2u·scale·max|q||k|·max|v − out| + 2u·max|v|, u = 2⁻⁸.
  const double u = std::ldexp(1.0, -8), scale = 1 / std::sqrt(24.0);
  double qk = 0, vmax = 0;
  for (int64_t i = 0; i < c.q.numel() / 24; ++i) {
    double a = 0;
    for (int d = 0; d < 24; ++d) a += c.q.data<float>()[i * 24 + d] * c.q.data<float>()[i * 24 + d];
    for (int64_t j = 0; j < c.k.numel() / 24; ++j) {
      double b = 0;
      for (int d = 0; d < 24; ++d)
        b += c.k.data<float>()[j * 24 + d] * c.k.data<float>()[j * 24 + d];
      qk = std::max(qk, std::sqrt(a * b));
    }
  }
  for (int64_t i = 0; i < c.v.numel(); ++i)
    vmax = std::max(vmax, std::abs(double(c.v.data<float>()[i])));
  const double bound = 2 * u * scale * qk * 2 * vmax + 2 * u * vmax;
  EXPECT_LT(whole, bound);
  // And it is not vacuous: the measured error is a sizable part of u·max|v|, far above fp32's.
  EXPECT_GT(whole, 0.1 * u * vmax);
}

// ---- the fused path (the kernels honour FlashProblem::precision: the lead's "flash bf16:") ----

TEST(AttentionPrecision, TheFusedBf16PassesTheRuleAndIsNotTheFp32Result) {
  const Bf16Case c = make_case(36);
  const AttentionOptions fused{.path = Path::fused, .precision = Precision::bf16};
  const AttentionResult x = attention(c.q, c.k, c.v, fused);
  const AttentionGrads g = attention_backward(c.dout, c.q, c.k, c.v, fused);
  const ::testing::AssertionResult checks[] = {
      within_bf16_rule("out", values(x.out), c.naive.out, c.ref_out, cases::kOutputFactor),
      within_bf16_rule("dq", values(g.dq), c.naive_grads.dq, c.ref_dq, cases::kGradFactor),
      within_bf16_rule("dk", values(g.dk), c.naive_grads.dk, c.ref_dk, cases::kGradFactor),
      within_bf16_rule("dv", values(g.dv), c.naive_grads.dv, c.ref_dv, cases::kGradFactor)};
  for (const ::testing::AssertionResult& r : checks) {
    EXPECT_TRUE(r);
    std::printf("fused bf16 %s\n", r.message());
  }
  // The kernels rounded: the fp32 kernel's result is another.
  const AttentionResult fp32 = attention(c.q, c.k, c.v, {.path = Path::fused});
  EXPECT_FALSE(same_bits(x.out, fp32.out));
  // And the rule tells them apart: the float32 kernel's output is no bf16 result (measured 6.2e-3
  // against an allowance of 5.0e-3 here).
  EXPECT_FALSE(
      within_bf16_rule("fp32 out", values(fp32.out), c.naive.out, c.ref_out, cases::kOutputFactor));
  // The saved forward of a bf16 run serves its own backward, bit for bit.
  AttentionOptions kept = fused;
  kept.keep_for_backward = true;
  const AttentionResult forward = attention(c.q, c.k, c.v, kept);
  const AttentionGrads saved = attention_backward(c.dout, c.q, c.k, c.v, forward, kept);
  EXPECT_TRUE(same_bits(saved.dq, g.dq));
  EXPECT_TRUE(same_bits(saved.dv, g.dv));
}

// The fused bf16 forward and backward across the kernels' tiles, on every SIMD target (dpbf16 and
// its emulation on AVX3 alike: the bits are the same): more query rows and keys than a tile of
// each (the backward's key chunks and their partial dQs), odd head dims with Dv ≠ Dk (a bf16 row
// padded by a zero), odd row and key counts (the pairs' zero partners), GQA, both causal
// alignments, and one query row (decoding).
struct SweepShape {
  int64_t B, Hq, Hkv, L, S, Dk, Dv;
  Causal causal;
};

QKV_PER_SIMD_TARGET(FusedBf16);

TEST_P(FusedBf16, PassesTheRuleAcrossTheTiles) {
  const SweepShape shapes[] = {{1, 2, 1, 300, 601, 40, 24, Causal::top_left},
                               {2, 4, 2, 257, 257, 64, 64, Causal::none},
                               {1, 2, 2, 129, 700, 33, 17, Causal::bottom_right},
                               {1, 4, 1, 1, 1025, 64, 64, Causal::none},
                               {1, 3, 3, 513, 97, 16, 16, Causal::bottom_right}};
  uint64_t seed = 40;
  for (const SweepShape& sh : shapes) {
    SCOPED_TRACE("B " + std::to_string(sh.B) + " H " + std::to_string(sh.Hq) + "/" +
                 std::to_string(sh.Hkv) + " L " + std::to_string(sh.L) + " S " +
                 std::to_string(sh.S) + " D " + std::to_string(sh.Dk) + "/" +
                 std::to_string(sh.Dv) + " " + std::string(to_string(sh.causal)));
    std::mt19937_64 rng(seed++);
    const Tensor q = normal({sh.B, sh.Hq, sh.L, sh.Dk}, rng),
                 k = normal({sh.B, sh.Hkv, sh.S, sh.Dk}, rng);
    const Tensor v = normal({sh.B, sh.Hkv, sh.S, sh.Dv}, rng),
                 dout = normal({sh.B, sh.Hq, sh.L, sh.Dv}, rng);
    const AttentionOptions ref{
        .causal = sh.causal, .path = Path::reference, .precision = Precision::bf16};
    const Tensor q64 = q.to(DType::f64), k64 = k.to(DType::f64), v64 = v.to(DType::f64);
    const std::vector<double> ref_out = values(attention(q64, k64, v64, ref).out);
    const AttentionGrads rg = attention_backward(dout.to(DType::f64), q64, k64, v64, ref);
    cases::NaiveProblem<float> n = cases::bf16_problem(naive_of(q, k, v));
    const int64_t L = sh.L, S = sh.S;
    if (sh.causal == Causal::top_left)
      n.visible = [](int64_t, int64_t, int64_t i, int64_t j) { return j <= i; };
    if (sh.causal == Causal::bottom_right)
      n.visible = [L, S](int64_t, int64_t, int64_t i, int64_t j) { return j <= i + S - L; };
    const cases::NaiveForward nf = cases::naive_forward(n);
    const cases::NaiveGrads ng = cases::naive_backward(n, values(dout));
    const AttentionOptions fused{
        .causal = sh.causal, .path = Path::fused, .precision = Precision::bf16};
    const AttentionResult x = attention(q, k, v, fused);
    const AttentionGrads g = attention_backward(dout, q, k, v, fused);
    EXPECT_TRUE(within_bf16_rule("out", values(x.out), nf.out, ref_out, cases::kOutputFactor));
    EXPECT_TRUE(within_bf16_rule("dq", values(g.dq), ng.dq, values(rg.dq), cases::kGradFactor));
    EXPECT_TRUE(within_bf16_rule("dk", values(g.dk), ng.dk, values(rg.dk), cases::kGradFactor));
    EXPECT_TRUE(within_bf16_rule("dv", values(g.dv), ng.dv, values(rg.dv), cases::kGradFactor));
  }
}

}  // namespace
}  // namespace qkv
