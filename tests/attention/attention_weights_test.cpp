// Exact weights without the L×S matrix (qkv/attention_weights.h): whole rows are the float64
// reference's weights R of the same float32 inputs; single weights from the fused forward's row
// softmax are off from R only by that softmax's logsumexp, which the rule of docs/CONVENTIONS.md
// §1.1 judges (the plain float32 loops of bench/cases/naive_fp32.h the yardstick N).
#include "qkv/attention_weights.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cases/naive_fp32.h"
#include "usage_error.h"

namespace qkv {
namespace {

using cases::kOutputFactor;
using cases::naive_row;
using cases::NaiveProblem;
using cases::NaiveRow;
using cases::rule_tolerance;
using ::testing::HasSubstr;
constexpr auto error_of = test::usage_error_of;

Tensor normal(Shape shape, std::mt19937_64& rng, float sigma = 1) {
  Tensor t(std::move(shape), DType::f32);
  std::normal_distribution<float> n(0, sigma);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(rng);
  return t;
}

std::vector<float> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  return {c.data<float>(), c.data<float>() + c.numel()};
}

// One problem [B, Hq, L, D] × [B, Hkv, S, D] with its forward's options.
struct Problem {
  Tensor q, k, v;
  AttentionOptions o;
};

// The float64 mask value the tests give (exact in float32), or 0.
double mask_value(const Problem& p, int64_t b, int64_t h, int64_t i, int64_t j) {
  const Tensor& m = p.o.mask;
  if (!m.defined()) return 0;
  const int64_t B = m.dim(0), H = m.dim(1);  // the tests' masks are rank 4
  const int64_t at = (((b % B) * H + h % H) * m.dim(2) + i) * m.dim(3) + j;
  if (m.dtype() == DType::b8) return m.data<bool>()[at] ? 0 : -INFINITY;
  return m.value(at);
}

// N: naive float32 weights of batch b, head h, every row, row-major [L, S] in double.
std::vector<double> naive_weights(const Problem& p, int64_t b, int64_t h) {
  const int64_t B = p.q.dim(0), Hq = p.q.dim(1), Hkv = p.k.dim(1), L = p.q.dim(2), S = p.k.dim(2),
                D = p.q.dim(3);
  NaiveProblem<float> n{.B = B, .Hq = Hq, .Hkv = Hkv, .L = L, .S = S, .Dq = D, .Dk = D, .Dv = D};
  n.q = values(p.q), n.k = values(p.k), n.v = values(p.v);
  n.scale = static_cast<float>(p.o.scale.value_or(1.0 / std::sqrt(static_cast<double>(D))));
  n.visible = [&](int64_t bb, int64_t hh, int64_t i, int64_t j) {
    if (!p.o.key_lengths.empty() && j >= p.o.key_lengths[static_cast<std::size_t>(bb)])
      return false;
    if (p.o.causal == Causal::top_left && j > i) return false;
    if (p.o.causal == Causal::bottom_right && j > i + S - L) return false;
    return mask_value(p, bb, hh, i, j) != -INFINITY;
  };
  n.bias = [&](int64_t bb, int64_t hh, int64_t i, int64_t j) {
    return static_cast<float>(mask_value(p, bb, hh, i, j));
  };
  std::vector<double> w(static_cast<std::size_t>(L * S), 0.0);
  NaiveRow<float> r;
  for (int64_t i = 0; i < L; ++i) {
    naive_row(n, b, h, i, r);
    for (std::size_t t = 0; t < r.keys.size(); ++t)
      w[static_cast<std::size_t>(i * S + r.keys[t])] = r.p[t];
  }
  return w;
}

// R: the float64 reference's weights of the same inputs, [B, Hq, L, S] float64.
Tensor reference_weights(const Problem& p) {
  AttentionOptions o = p.o;
  o.need_weights = true, o.path = Path::reference;
  if (o.mask.defined() && o.mask.dtype() != DType::b8) o.mask = o.mask.to(DType::f64);
  return attention(p.q.to(DType::f64), p.k.to(DType::f64), p.v.to(DType::f64), o).weights;
}

// max|a − R| over batch b, head h of R [B, Hq, L, S].
double max_error(const std::vector<double>& a, const Tensor& r, int64_t b, int64_t h) {
  const int64_t per = r.dim(2) * r.dim(3), base = (b * r.dim(1) + h) * per;
  double e = 0;
  for (int64_t t = 0; t < per; ++t)
    e = std::max(e, std::abs(a[static_cast<std::size_t>(t)] - r.value(base + t)));
  return e;
}

// What the rule allows X (every row of b, h) against R, N the yardstick.
double tolerance(const Problem& p, const Tensor& r, int64_t b, int64_t h) {
  return rule_tolerance(max_error(naive_weights(p, b, h), r, b, h), kOutputFactor);
}

std::vector<int64_t> all_rows(int64_t n) {
  std::vector<int64_t> rows(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) rows[static_cast<std::size_t>(i)] = i;
  return rows;
}

// The float64 reference's logsumexp of the same inputs, [B, Hq, L].
Tensor reference_lse(const Problem& p) {
  AttentionOptions o = p.o;
  o.need_logsumexp = true, o.path = Path::reference;
  if (o.mask.defined() && o.mask.dtype() != DType::b8) o.mask = o.mask.to(DType::f64);
  return attention(p.q.to(DType::f64), p.k.to(DType::f64), p.v.to(DType::f64), o).logsumexp;
}

// Naive float32 logsumexp of row i of (b, h).
double naive_lse(const Problem& p, int64_t b, int64_t h, int64_t i) {
  const int64_t D = p.q.dim(3), S = p.k.dim(2), L = p.q.dim(2);
  NaiveProblem<float> n{.B = p.q.dim(0),
                        .Hq = p.q.dim(1),
                        .Hkv = p.k.dim(1),
                        .L = L,
                        .S = S,
                        .Dq = D,
                        .Dk = D,
                        .Dv = D};
  n.q = values(p.q), n.k = values(p.k), n.v = values(p.v);
  n.scale = static_cast<float>(p.o.scale.value_or(1.0 / std::sqrt(static_cast<double>(D))));
  n.visible = [&](int64_t bb, int64_t hh, int64_t ii, int64_t j) {
    if (!p.o.key_lengths.empty() && j >= p.o.key_lengths[static_cast<std::size_t>(bb)])
      return false;
    if (p.o.causal == Causal::top_left && j > ii) return false;
    if (p.o.causal == Causal::bottom_right && j > ii + S - L) return false;
    return mask_value(p, bb, hh, ii, j) != -INFINITY;
  };
  n.bias = [&](int64_t bb, int64_t hh, int64_t ii, int64_t j) {
    return static_cast<float>(mask_value(p, bb, hh, ii, j));
  };
  NaiveRow<float> r;
  naive_row(n, b, h, i, r);
  return r.lse;
}

// Every (b, h) of p, every row: weight_rows is the float64 reference's row (and so within the
// rule); weights_at, from the fused forward's max and sum, is off from it by no more than that
// softmax's logsumexp is, and that logsumexp passes the rule for logsumexp (§1.1). A weight off by
// twice the tolerance fails each check.
void expect_exact(const Problem& p) {
  AttentionOptions o = p.o;
  o.keep_for_backward = true;
  ASSERT_EQ(chosen_path(p.q, p.k, p.v, o), Path::fused);
  const AttentionResult f = attention(p.q, p.k, p.v, o);
  const Tensor r = reference_weights(p), lse = reference_lse(p);
  const int64_t L = p.q.dim(2), S = p.k.dim(2), D = p.q.dim(3);
  const double scale = p.o.scale.value_or(1.0 / std::sqrt(static_cast<double>(D)));
  // The kernels' units (flash_attention.h): raw scores without a mask for 0 < scale ≤ 1.
  const double unit = !p.o.mask.defined() && scale > 0 && scale <= 1 ? scale : 1.0;
  for (int64_t b = 0; b < p.q.dim(0); ++b)
    for (int64_t h = 0; h < p.q.dim(1); ++h) {
      const Tensor x = weight_rows(p.q, p.k, p.o, b, h, all_rows(L));
      std::vector<double> xs(x.data<double>(), x.data<double>() + x.numel());
      const double tol = tolerance(p, r, b, h);
      EXPECT_LE(max_error(xs, r, b, h), 1e-12) << "batch " << b << ", head " << h;
      xs[xs.size() / 2 + 3] += 2 * tol;
      EXPECT_GT(max_error(xs, r, b, h), tol) << "batch " << b << ", head " << h;
      std::vector<std::pair<int64_t, int64_t>> every;
      for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < S; ++j) every.emplace_back(i, j);
      const Tensor at = weights_at(p.q, p.k, {f.saved_max, f.saved_sum}, p.o, b, h, every);
      double lse_error = 0, naive_error = 0;
      for (int64_t i = 0; i < L; ++i) {
        const int64_t row = (b * p.q.dim(1) + h) * L + i;
        const double m = f.saved_max.value(row), reference = lse.value(row);
        if (std::isinf(reference)) {  // a row that sees nothing: its weights are 0
          for (int64_t j = 0; j < S; ++j) EXPECT_EQ(at.value(i * S + j), 0.0);
          continue;
        }
        const double saved = unit * m + std::log(f.saved_sum.value(row));
        const double delta = std::abs(saved - reference);
        lse_error = std::max(lse_error, delta);
        naive_error = std::max(naive_error, std::abs(naive_lse(p, b, h, i) - reference));
        for (int64_t j = 0; j < S; ++j) {
          const double w = at.value(i * S + j), want = r.value(row * S + j);
          // Beside Δlse, float64 rounding of logits in the hundreds: 1e-12 relative.
          const double bound = want * (std::expm1(delta) + 1e-12) + 1e-15;
          EXPECT_LE(std::abs(w - want), bound)
              << "batch " << b << ", head " << h << ", " << i << " → " << j;
          EXPECT_GT(std::abs(w + 2 * bound + 1e-12 - want), bound);
        }
      }
      EXPECT_LE(lse_error, rule_tolerance(naive_error, kOutputFactor))
          << "batch " << b << ", head " << h;
    }
}

TEST(AttentionWeights, GroupedCausalRowsWithKeyLengthsEqualTheReference) {
  std::mt19937_64 rng(1);
  // Raw-score units (no mask, scale 1/√24): GQA, bottom-right causal, L ≠ S, odd sizes.
  Problem p{normal({2, 4, 37, 24}, rng),
            normal({2, 2, 53, 24}, rng),
            normal({2, 2, 53, 24}, rng),
            {.causal = Causal::bottom_right, .key_lengths = {53, 40}}};
  expect_exact(p);
}

TEST(AttentionWeights, MaskedRowsInLogitUnitsEqualTheReference) {
  std::mt19937_64 rng(2);
  // A float mask (exact in float32) and a scale above 1: the kernels keep logits, not raw scores.
  Problem p{normal({1, 3, 29, 16}, rng),
            normal({1, 3, 29, 16}, rng),
            normal({1, 3, 29, 16}, rng),
            {.scale = 1.5, .causal = Causal::top_left}};
  Tensor mask({1, 3, 29, 29}, DType::f32);
  for (int64_t t = 0; t < mask.numel(); ++t)
    mask.data<float>()[t] = t % 7 == 0 ? -INFINITY : 0.25f * static_cast<float>(t % 5);
  p.o.mask = mask;
  expect_exact(p);
  // A bool mask that hides a whole row: its weights are 0, as the reference's.
  Tensor hide({1, 1, 29, 29}, DType::b8);
  for (int64_t t = 0; t < hide.numel(); ++t) hide.data<bool>()[t] = t / 29 != 4 && t % 3 != 0;
  p.o = {.causal = Causal::none, .mask = hide};
  expect_exact(p);
}

TEST(AttentionWeights, LogitsInTheHundredsStayExact) {
  std::mt19937_64 rng(3);
  // Logits of a few hundred (a sink head's scale): a float32 logsumexp would be off by |lse|·2⁻²⁴.
  Problem p{normal({1, 2, 40, 32}, rng, 4),
            normal({1, 2, 40, 32}, rng, 4),
            normal({1, 2, 40, 32}, rng),
            {.scale = 1, .causal = Causal::top_left}};
  expect_exact(p);
}

TEST(AttentionWeights, NaNStaysInItsRowAndMaskedKeysWeighNothing) {
  std::mt19937_64 rng(4);
  Tensor q = normal({3, 11, 8}, rng);  // rank 3: [H, L, D]
  const Tensor k = normal({3, 11, 8}, rng);
  const AttentionOptions o{.causal = Causal::top_left};
  q.data<float>()[(1 * 11 + 6) * 8 + 2] = NAN;  // head 1, row 6
  const AttentionResult f =
      attention(q, k, k, {.causal = Causal::top_left, .keep_for_backward = true});
  const RowSoftmax s{f.saved_max, f.saved_sum};
  const Tensor rows = weight_rows(q, k, o, 0, 1, {5, 6, 10});
  const Tensor at = weights_at(q, k, s, o, 0, 1, {{5, 0}, {10, 9}, {6, 3}, {6, 7}, {5, 8}});
  EXPECT_NEAR(at.value(0), rows.value(0 * 11 + 0), 1e-6);
  EXPECT_NEAR(at.value(1), rows.value(2 * 11 + 9), 1e-6);
  EXPECT_TRUE(std::isnan(at.value(2)));  // row 6 sees key 3: NaN, as the forward's row
  EXPECT_TRUE(std::isnan(rows.value(1 * 11 + 3)));
  EXPECT_EQ(at.value(3), 0.0);  // key 7 comes later: masked, 0
  EXPECT_EQ(rows.value(1 * 11 + 7), 0.0);
  EXPECT_EQ(at.value(4), 0.0);
  double sum = 0;
  for (int64_t j = 0; j < 11; ++j) sum += rows.value(2 * 11 + j);
  EXPECT_NEAR(sum, 1.0, 1e-12);
}

TEST(AttentionWeights, WhatIsNotAFusedForwardsSoftmaxIsRefused) {
  std::mt19937_64 rng(5);
  const Tensor q = normal({2, 5, 4}, rng);
  const AttentionResult f = attention(q, q, q, {.keep_for_backward = true});
  const RowSoftmax s{f.saved_max, f.saved_sum};
  EXPECT_THAT(error_of([&] { weight_rows(q, q, {.score = Score::cosine}, 0, 0, {0}); }),
              HasSubstr("do not apply to score cosine"));
  EXPECT_THAT(error_of([&] {
                weights_at(q, q, {f.saved_max, Tensor()}, {}, 0, 0, {{0, 0}});
              }),
              HasSubstr("the row softmax's sum is missing; expected float32 [2, 5]"));
  EXPECT_THAT(error_of([&] { weight_rows(q, q, {}, 0, 2, {0}); }),
              HasSubstr("head 2 is out of range; expected batch 0–0 and head 0–1"));
  EXPECT_THAT(error_of([&] {
                weights_at(q, q, s, {}, 0, 1, {{0, 5}});
              }),
              HasSubstr("key 5 is out of range; expected 0–4"));
}

}  // namespace
}  // namespace qkv
