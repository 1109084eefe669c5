// tests/kernels/cpu/flash_bf16_test.cpp — the fused kernels under Precision::bf16, called directly
// (kernels/cpu/flash_attention.h): what the rounding must and must not change. The error rule
// against the float64 reference of the rounded inputs (docs/CONVENTIONS.md §1.1b) is checked
// through the API with the other sweeps; here, what the rounding must and must not change.
//
// On inputs that are bf16 values already, rounding them changes nothing: the bf16 forward scores
// the same products as the fp32 one, summed in another order (bf16_tile.h: in pairs), so each
// logit differs by at most 2·γ_D·scale·Σ_d |q_d k_jd| (γ_D = D·u₃₂/(1 − D·u₃₂), u₃₂ = 2⁻²⁴, both
// sums against the exact one; Higham, Accuracy and Stability, §3.1), and so does the logsumexp
// (a soft max moves no more than its arguments), plus a few roundings of its own. The output
// differs from the fp32 one by the rounding of P before P·V, |Δout| ≤ u·Σ_j P̃_ij |v_jc| ≤
// u·max_j |v_jc| (u = 2⁻⁸), and by the logits' difference through the softmax, plus float32's
// rounding of both.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/flash_attention.h"
#include "simd_targets.h"

namespace qkv_test {
namespace {

using qkv::Causal;
using qkv::Precision;
namespace cpu = qkv::cpu;

// bf16 rounding written from its definition (kernels/cpu/bf16.h states it), apart from the
// kernels' bit arithmetic: the significand to 8 bits by the nearest, ties to even, in double
// arithmetic; a result below 2⁻¹²⁶ in magnitude (a bf16 subnormal) becomes a signed zero. (The
// tests' inputs stay far from overflow.)
float to_bf16_by_definition(float x) {
  if (!std::isfinite(x) || x == 0) return x;
  int e;
  const double m = std::frexp(static_cast<double>(x), &e);  // |m| in [0.5, 1)
  const double scaled = std::nearbyint(std::ldexp(m, 8));   // FE_TONEAREST: ties to even
  const double r = std::ldexp(scaled, e - 8);
  return std::abs(r) < 0x1p-126 ? std::copysign(0.0f, x) : static_cast<float>(r);
}

struct Problem {
  int64_t B, Hq, Hkv, L, S, D;
  Causal causal = Causal::none;
  std::vector<float> q, k, v;
  cpu::FlashProblem flash(Precision precision) const {
    cpu::FlashProblem p;
    p.B = B, p.Hq = Hq, p.Hkv = Hkv, p.L = L, p.S = S, p.Dk = D, p.Dv = D;
    p.scale = 1.0f / std::sqrt(static_cast<float>(D));
    p.causal = causal;
    p.q = {q.data(), {Hq * L * D, L * D, D}};
    p.k = {k.data(), {Hkv * S * D, S * D, D}};
    p.v = {v.data(), {Hkv * S * D, S * D, D}};
    p.precision = precision;
    return p;
  }
};

// N(0, 1) inputs, rounded to bf16 when `bf16_values`.
Problem make(int64_t B, int64_t Hq, int64_t Hkv, int64_t L, int64_t S, int64_t D, uint64_t seed,
             bool bf16_values, Causal causal = Causal::none) {
  Problem p{B, Hq, Hkv, L, S, D, causal, {}, {}, {}};
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  for (auto [x, n] :
       {std::pair{&p.q, B * Hq * L * D}, {&p.k, B * Hkv * S * D}, {&p.v, B * Hkv * S * D}}) {
    x->resize(n);
    for (float& e : *x) e = bf16_values ? to_bf16_by_definition(normal(rng)) : normal(rng);
  }
  return p;
}

struct Forward {
  std::vector<float> out, lse;
};
Forward forward(const Problem& pr, Precision precision, int threads) {
  Forward f{std::vector<float>(pr.B * pr.Hq * pr.L * pr.D),
            std::vector<float>(pr.B * pr.Hq * pr.L)};
  cpu::flash_forward(pr.flash(precision), f.out.data(), f.lse.data(), threads);
  return f;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

QKV_PER_SIMD_TARGET(FlashBf16);

TEST(FlashBf16Rounding, DefinitionRoundsAsExpected) {
  // The test's own rounding, against values worked by hand: 1 + 2⁻⁸ is a tie between 1 and
  // 1 + 2⁻⁷ (even: 1); 1 + 3·2⁻⁸ is a tie between 1 + 2⁻⁷ and 1 + 2⁻⁶ (even: the latter).
  EXPECT_EQ(to_bf16_by_definition(1.0f + 0x1p-8f), 1.0f);
  EXPECT_EQ(to_bf16_by_definition(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);
  EXPECT_EQ(to_bf16_by_definition(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);
  EXPECT_EQ(to_bf16_by_definition(-3.0f), -3.0f);
  EXPECT_EQ(std::bit_cast<uint32_t>(to_bf16_by_definition(-0x1p-127f)), 0x80000000u);
}

TEST_P(FlashBf16, OnBf16InputsOnlyTheOrderOfSumsAndPsRoundingDiffer) {
  for (const Problem& pr : {make(2, 4, 2, 129, 300, 64, 1, true),
                            make(1, 8, 2, 300, 600, 32, 2, true, Causal::top_left),
                            make(1, 4, 1, 1, 1500, 64, 3, true)}) {
    SCOPED_TRACE("L " + std::to_string(pr.L) + " S " + std::to_string(pr.S));
    const Forward f32 = forward(pr, Precision::fp32, 2);
    const Forward b16 = forward(pr, Precision::bf16, 2);
    // The largest scale·Σ_d |q_d k_jd| a row meets (every key: a bound for the causal case too).
    const double u32 = 0x1p-24, gamma = pr.D * u32 / (1 - pr.D * u32);
    const double scale = 1 / std::sqrt(static_cast<double>(pr.D));
    const int64_t G = pr.Hq / pr.Hkv;
    double worst_lse = 0, worst_ratio = 0;
    for (int64_t b = 0; b < pr.B; ++b)
      for (int64_t h = 0; h < pr.Hq; ++h)
        for (int64_t i = 0; i < pr.L; ++i) {
          const float* q = &pr.q[((b * pr.Hq + h) * pr.L + i) * pr.D];
          double magnitude = 0;
          for (int64_t j = 0; j < pr.S; ++j) {
            const float* k = &pr.k[((b * pr.Hkv + h / G) * pr.S + j) * pr.D];
            double sum = 0;
            for (int64_t d = 0; d < pr.D; ++d) sum += std::abs(static_cast<double>(q[d]) * k[d]);
            magnitude = std::max(magnitude, scale * sum);
          }
          const int64_t row = (b * pr.Hq + h) * pr.L + i;
          const double lse = f32.lse[row];
          const double bound = 2 * gamma * magnitude + 8 * u32 * std::abs(lse) + 1e-6;
          const double error = std::abs(static_cast<double>(b16.lse[row]) - lse);
          worst_lse = std::max(worst_lse, error);
          worst_ratio = std::max(worst_ratio, error / bound);
        }
    EXPECT_LE(worst_ratio, 1.0) << "largest |Δlse| " << worst_lse;
    // The output moves by P's rounding, within u·max|v| (plus what the logits' differences and
    // float32 add, far smaller), and moves.
    const float vmax = std::abs(*std::max_element(
        pr.v.begin(), pr.v.end(), [](float a, float b) { return std::abs(a) < std::abs(b); }));
    const double bound = 0x1p-8 * vmax + 1e-5;
    double worst = 0;
    for (size_t i = 0; i < f32.out.size(); ++i)
      worst = std::max(worst, static_cast<double>(std::abs(b16.out[i] - f32.out[i])));
    EXPECT_LE(worst, bound);
    EXPECT_GT(worst, 0.0) << "bf16 left P unrounded";
  }
}

TEST_P(FlashBf16, RoundsItsInputs) {
  // On arbitrary floats, bf16 equals bf16 on their roundings, bit for bit: the kernel rounds q, k
  // and v itself, and nothing else of them reaches the result.
  const Problem raw = make(1, 4, 2, 200, 333, 48, 4, false, Causal::bottom_right);
  Problem rounded = raw;
  for (auto* x : {&rounded.q, &rounded.k, &rounded.v})
    for (float& e : *x) e = to_bf16_by_definition(e);
  const Forward a = forward(raw, Precision::bf16, 2), b = forward(rounded, Precision::bf16, 2);
  EXPECT_TRUE(same_bits(a.out, b.out));
  EXPECT_TRUE(same_bits(a.lse, b.lse));
  EXPECT_FALSE(same_bits(forward(raw, Precision::fp32, 2).out, a.out));
}

TEST_P(FlashBf16, ThreadCountsGiveTheSameBits) {
  const Problem pr = make(1, 8, 2, 257, 700, 64, 5, false, Causal::top_left);
  const Forward one = forward(pr, Precision::bf16, 1);
  std::vector<float> dout(pr.B * pr.Hq * pr.L * pr.D);
  std::mt19937_64 rng(6);
  std::normal_distribution<float> normal;
  for (float& e : dout) e = normal(rng);
  std::vector<float> max(pr.B * pr.Hq * pr.L), sum(max.size());
  cpu::flash_forward(pr.flash(Precision::bf16), std::vector<float>(one.out).data(), nullptr, 1,
                     {max.data(), sum.data()});
  auto backward = [&](int threads) {
    std::vector<float> dq(pr.q.size()), dk(pr.k.size()), dv(pr.v.size());
    double dscale = 0;
    cpu::flash_backward(pr.flash(Precision::bf16), one.out.data(), dout.data(),
                        {max.data(), sum.data()}, dq.data(), dk.data(), dv.data(), &dscale,
                        threads);
    dq.insert(dq.end(), dk.begin(), dk.end());
    dq.insert(dq.end(), dv.begin(), dv.end());
    dq.push_back(static_cast<float>(dscale));
    return dq;
  };
  const std::vector<float> grads_one = backward(1);
  for (int threads : {2, 3, 8}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    const Forward many = forward(pr, Precision::bf16, threads);
    EXPECT_TRUE(same_bits(many.out, one.out));
    EXPECT_TRUE(same_bits(many.lse, one.lse));
    EXPECT_TRUE(same_bits(backward(threads), grads_one));
  }
}

}  // namespace
}  // namespace qkv_test
