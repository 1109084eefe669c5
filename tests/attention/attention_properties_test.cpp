// Properties qkv::attention must have whatever its implementation: softmax rows sum to 1, keys are
// a set (permuting keys with their values changes nothing), a huge scale is an argmax, rows with
// nothing to attend to are 0 (never NaN), NaN/∞ poison exactly the rows that read them, masked
// keys are never read, scale 0 is the plain average, and equivalent spellings of one problem
// (GQA vs repeated heads, bool vs float mask, key_lengths vs a padding mask) agree.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/reference/naive_attention.h"
#include "qkv/attention.h"

namespace qkv_test {
namespace {

using qkv::Causal;
using qkv::DType;
using qkv::Normalize;
using qkv::Score;

class AttentionProperties : public ::testing::TestWithParam<Score> {};

std::string param_name(const ::testing::TestParamInfo<Score>& info) {
  return score_name(info.param);
}

// Σ_j w_ij = 1 for every row that sees a key (0 for one that sees none). The sum of S ≤ 40 weights
// in [0, 1] carries ≤ S·u ≈ 4.4e-15 rounding on top of each weight's own 1e-12-relative error.
TEST_P(AttentionProperties, SoftmaxRowsSumToOne) {
  Case c = make_case(GetParam(), 2, 4, 2, 13, 40, 8, 8, 5, 7001);
  set_bool_mask(c, {c.B, c.Hq, c.L, c.S}, 0.6, 7002);
  c.causal = Causal::bottom_right;
  c.key_lengths = {40, 0};  // batch 1 sees nothing at all
  SCOPED_TRACE(c.describe());
  const qkv::AttentionResult got = run_library(c);
  ASSERT_TRUE(has_shape("weights", got.weights, c.weights_shape(), DType::f64));
  const Naive r = naive_attention(c);
  const std::vector<double> w = values_of(got.weights);
  for (int64_t row = 0; row < c.B * c.Hq * c.L; ++row) {
    const bool any = std::any_of(r.visible.begin() + row * c.S, r.visible.begin() + (row + 1) * c.S,
                                 [](unsigned char x) { return x != 0; });
    const double sum = std::accumulate(w.begin() + row * c.S, w.begin() + (row + 1) * c.S, 0.0);
    if (any)
      EXPECT_NEAR(sum, 1.0, 1e-12) << "row " << row;
    else
      EXPECT_EQ(sum, 0.0) << "fully masked row " << row;
  }
}

// Keys and values form a set: permuting them together (and the mask's key axis with them) permutes
// the weights the same way and leaves out unchanged, to the summation-order bound.
TEST_P(AttentionProperties, PermutingKeysAndValuesTogetherLeavesOutUnchanged) {
  Case c = make_case(GetParam(), 2, 2, 1, 9, 23, 6, 6, 4, 7101);
  set_bool_mask(c, {c.B, 1, c.L, c.S}, 0.7, 7102);
  SCOPED_TRACE(c.describe());
  std::vector<int64_t> perm(c.S);
  std::iota(perm.begin(), perm.end(), 0);
  std::reverse(perm.begin(), perm.end());
  std::rotate(perm.begin(), perm.begin() + 5, perm.end());
  Case p = c;
  for (int64_t bg = 0; bg < c.B * c.Hkv; ++bg)
    for (int64_t j = 0; j < c.S; ++j) {
      for (int64_t d = 0; d < c.Dk; ++d)
        p.k[(bg * c.S + j) * c.Dk + d] = c.k[(bg * c.S + perm[j]) * c.Dk + d];
      for (int64_t d = 0; d < c.Dv; ++d)
        p.v[(bg * c.S + j) * c.Dv + d] = c.v[(bg * c.S + perm[j]) * c.Dv + d];
    }
  for (int64_t bi = 0; bi < c.B * c.L; ++bi)
    for (int64_t j = 0; j < c.S; ++j) p.mask[bi * c.S + j] = c.mask[bi * c.S + perm[j]];
  const qkv::AttentionResult a = run_library(c), b = run_library(p);
  const Naive r = naive_attention(c);
  EXPECT_TRUE(near("out(permuted)", b.out, c.out_shape(), DType::f64, values_of(a.out), r.out_scale,
                   2 * kRtol));
  std::vector<double> w = values_of(a.weights), wp(w.size()), wscale(w.size());
  for (int64_t row = 0; row < c.B * c.Hq * c.L; ++row)
    for (int64_t j = 0; j < c.S; ++j) {
      wp[row * c.S + j] = w[row * c.S + perm[j]];
      wscale[row * c.S + j] = r.weights_scale[row * c.S + perm[j]];
    }
  EXPECT_TRUE(
      near("weights(permuted)", b.weights, c.weights_shape(), DType::f64, wp, wscale, 2 * kRtol));
}

// A row with nothing to attend to — by a bool mask, a float mask of −∞, key_lengths 0,
// bottom_right with L > S, or no keys at all — gives out 0, weights 0, logsumexp −∞, no NaN.
TEST_P(AttentionProperties, FullyMaskedRowsAreZeroNeverNaN) {
  const Score score = GetParam();
  for (int variant = 0; variant < 5; ++variant) {
    for (Normalize normalize : {Normalize::softmax, Normalize::none}) {
      if (score == Score::uniform && normalize == Normalize::none) continue;
      Case c = make_case(score, 2, 2, 2, 6, variant == 4 ? 0 : 4, 3, 3, 3, 7200 + variant);
      c.normalize = normalize;
      std::string how;
      if (variant == 0) {
        how = "bool mask all false";
        set_bool_mask(c, {c.B, c.Hq, c.L, c.S}, 1.0, 1);
        for (auto& m : c.mask) m = 0;
      } else if (variant == 1) {
        how = "float mask all -inf";
        set_float_mask(c, {1, 1, 1, c.S}, 1.0, DType::f64, 1);
      } else if (variant == 2) {
        how = "key_lengths 0";
        c.key_lengths = {0, 0};
      } else if (variant == 3) {
        how = "bottom_right with L > S: first L - S rows";
        c.causal = Causal::bottom_right;
      } else {
        how = "S = 0";
      }
      SCOPED_TRACE(c.describe() + " (" + how + ")");
      const qkv::AttentionResult got = run_library(c);
      const Naive r = naive_attention(c);
      EXPECT_TRUE(matches_oracle(c, got));
      const std::vector<double> out = values_of(got.out), w = values_of(got.weights),
                                lse = values_of(got.logsumexp);
      for (double x : out) ASSERT_FALSE(std::isnan(x));
      for (double x : w) ASSERT_FALSE(std::isnan(x));
      int64_t masked_rows = 0;
      for (int64_t row = 0; row < c.B * c.Hq * c.L; ++row) {
        if (r.lse[row] != -kInf) continue;
        ++masked_rows;
        EXPECT_EQ(lse[row], -kInf) << "row " << row;
        for (int64_t d = 0; d < c.Dv; ++d) EXPECT_EQ(out[row * c.Dv + d], 0.0) << "row " << row;
        for (int64_t j = 0; j < c.S; ++j) EXPECT_EQ(w[row * c.S + j], 0.0) << "row " << row;
      }
      EXPECT_GT(masked_rows, 0);
    }
  }
}

// NaN in one query row makes that output row NaN (every column) and no other row.
TEST_P(AttentionProperties, NaNInOneQueryRowPoisonsOnlyThatRow) {
  const Score score = GetParam();
  // uniform too: its score ignores q, but NaN in q still makes the row NaN
  // (docs/CONVENTIONS.md §1.4).
  for (double bad : {kNaN, -kInf}) {
    Case c = make_case(score, 2, 2, 1, 5, 7, 4, 4, 3, 7300);
    c.causal = Causal::bottom_right;
    const int64_t b = 1, h = 0, i = 3;
    Case clean = c;
    c.q[((b * c.Hq + h) * c.L + i) * c.Dq + 1] = bad;
    SCOPED_TRACE(c.describe() + " q[1, 0, 3, 1] = " + std::to_string(bad));
    const qkv::AttentionResult got = run_library(c);
    const Naive r = naive_attention(clean);
    std::vector<double> want = r.out;
    const int64_t row = (b * c.Hq + h) * c.L + i;
    for (int64_t d = 0; d < c.Dv; ++d) want[row * c.Dv + d] = kNaN;
    EXPECT_TRUE(near("out", got.out, c.out_shape(), DType::f64, want, r.out_scale, kRtol));
  }
}

// NaN or ∞ in key j (of k or of v) makes NaN exactly the rows that can see key j: with causal
// top_left, queries i ≥ j of the heads that read that kv head; every other row is untouched.
TEST_P(AttentionProperties, NonFiniteKeyPoisonsExactlyTheRowsThatSeeIt) {
  const Score score = GetParam();
  struct Poison {
    const char* where;
    double value;
  };
  for (const Poison p : {Poison{"k", kNaN}, Poison{"k", kInf}, Poison{"v", kNaN}, Poison{"v", kInf},
                         Poison{"v", -kInf}}) {
    if (score == Score::uniform && std::string(p.where) == "k") continue;  // uniform never reads k
    for (Normalize normalize : {Normalize::softmax, Normalize::none}) {
      if (score == Score::uniform && normalize == Normalize::none) continue;
      Case c = make_case(score, 1, 4, 2, 8, 8, 3, 3, 2, 7400);
      c.causal = Causal::top_left;
      c.normalize = normalize;
      const int64_t g = 1, j = 5;  // kv head 1 is read by query heads 2 and 3
      Case clean = c;
      if (std::string(p.where) == "k")
        c.k[(g * c.S + j) * c.Dk + 2] = p.value;
      else
        for (int64_t d = 0; d < c.Dv; ++d) c.v[(g * c.S + j) * c.Dv + d] = p.value;
      SCOPED_TRACE(c.describe() + " " + p.where + "[0, 1, 5, :] = " + std::to_string(p.value));
      const qkv::AttentionResult got = run_library(c);
      const Naive r = naive_attention(clean);
      std::vector<double> want = r.out;
      for (int64_t h = 2; h < 4; ++h)
        for (int64_t i = j; i < c.L; ++i)
          for (int64_t d = 0; d < c.Dv; ++d) want[(h * c.L + i) * c.Dv + d] = kNaN;
      EXPECT_TRUE(near("out", got.out, c.out_shape(), DType::f64, want, r.out_scale, kRtol));
    }
  }
}

// Masked keys are never read: NaN in the k and v of keys hidden by key_lengths, by the bool mask
// (for every query) and by causal top_left (keys j ≥ L when L < S) changes nothing.
TEST_P(AttentionProperties, MaskedKeysAreNeverRead) {
  Case c = make_case(GetParam(), 2, 2, 1, 5, 9, 4, 4, 3, 7500);
  c.causal = Causal::top_left;  // keys 5..8 are seen by no query
  c.key_lengths = {7, 9};       // and batch 0 hides keys 7, 8 as well
  set_bool_mask(c, {c.S}, 1.0, 1);
  c.mask[2] = 0;  // key 2 hidden from everyone
  SCOPED_TRACE(c.describe() + " with NaN in k, v of keys 2, 5, 6, 7, 8");
  Case poisoned = c;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t j : {2, 5, 6, 7, 8}) {
      for (int64_t d = 0; d < c.Dk; ++d) poisoned.k[(b * c.S + j) * c.Dk + d] = kNaN;
      for (int64_t d = 0; d < c.Dv; ++d) poisoned.v[(b * c.S + j) * c.Dv + d] = kNaN;
    }
  const qkv::AttentionResult got = run_library(poisoned);
  const Naive r = naive_attention(c);
  EXPECT_TRUE(near("out", got.out, c.out_shape(), DType::f64, r.out, r.out_scale, kRtol));
  EXPECT_TRUE(near("weights", got.weights, c.weights_shape(), DType::f64, r.weights,
                   r.weights_scale, kRtol));
  EXPECT_TRUE(
      near("logsumexp", got.logsumexp, c.lse_shape(), DType::f64, r.lse, r.lse_scale, kRtol));
}

// A negative scale is allowed (it prefers the worst-matching keys) and is what the oracle says.
TEST_P(AttentionProperties, NegativeScaleIsAllowed) {
  Case c = make_case(GetParam(), 1, 2, 2, 7, 9, 5, 5, 3, 7600);
  c.scale = -1.7;
  c.causal = Causal::bottom_right;
  SCOPED_TRACE(c.describe());
  EXPECT_TRUE(matches_oracle(c, run_library(c)));
}

// GQA is sharing, nothing more: Hkv heads read by Hq/Hkv query heads each give what the same kv
// heads repeated (head h reads kv head h / (Hq / Hkv)) give with Hkv = Hq.
TEST_P(AttentionProperties, GroupedQueryEqualsRepeatedHeads) {
  for (int64_t hkv : {1, 2}) {
    Case c = make_case(GetParam(), 2, 4, hkv, 6, 10, 3, 3, 2, 7700 + hkv);
    set_bool_mask(c, {c.B, 1, c.L, c.S}, 0.7, 7710);
    SCOPED_TRACE(c.describe());
    Case rep = c;
    rep.Hkv = c.Hq;
    rep.k.clear();
    rep.v.clear();
    const int64_t ratio = c.Hq / c.Hkv;
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.Hq; ++h) {
        const int64_t g = h / ratio;
        auto kb = c.k.begin() + (b * c.Hkv + g) * c.S * c.Dk;
        auto vb = c.v.begin() + (b * c.Hkv + g) * c.S * c.Dv;
        rep.k.insert(rep.k.end(), kb, kb + c.S * c.Dk);
        rep.v.insert(rep.v.end(), vb, vb + c.S * c.Dv);
      }
    const qkv::AttentionResult a = run_library(c), b = run_library(rep);
    const Naive r = naive_attention(c);
    EXPECT_TRUE(near("out(repeated heads)", b.out, c.out_shape(), DType::f64, values_of(a.out),
                     r.out_scale, 2 * kRtol));
  }
}

// A bool mask and the float mask that is 0 where it is true and −∞ where false are one mask;
// key_lengths is the bool padding mask [B, 1, 1, S]; bottom_right equals top_left when L = S.
TEST_P(AttentionProperties, EquivalentMasksAgree) {
  Case c = make_case(GetParam(), 2, 2, 2, 7, 7, 4, 4, 3, 7800);
  set_bool_mask(c, {c.B, 1, c.L, c.S}, 0.7, 7801);
  const Naive r = naive_attention(c);
  SCOPED_TRACE(c.describe());
  const qkv::AttentionResult with_bool = run_library(c);
  Case f = c;
  f.mask_kind = MaskKind::additive;
  f.mask_dtype = DType::f64;
  for (double& m : f.mask) m = m != 0 ? 0.0 : -kInf;
  EXPECT_TRUE(near("out(float mask)", run_library(f).out, c.out_shape(), DType::f64,
                   values_of(with_bool.out), r.out_scale, 2 * kRtol));

  Case lengths = c;
  lengths.mask_kind = MaskKind::none;
  lengths.key_lengths = {3, 6};
  Case padding = lengths;
  padding.key_lengths.clear();
  set_bool_mask(padding, {c.B, 1, 1, c.S}, 1.0, 1);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t j = 0; j < c.S; ++j) padding.mask[b * c.S + j] = j < lengths.key_lengths[b];
  const Naive rl = naive_attention(lengths);
  EXPECT_TRUE(near("out(key_lengths vs padding mask)", run_library(padding).out, c.out_shape(),
                   DType::f64, values_of(run_library(lengths).out), rl.out_scale, 2 * kRtol));

  Case tl = c, br = c;
  tl.causal = Causal::top_left;
  br.causal = Causal::bottom_right;
  const Naive rt = naive_attention(tl);
  EXPECT_TRUE(near("out(bottom_right, L = S)", run_library(br).out, c.out_shape(), DType::f64,
                   values_of(run_library(tl).out), rt.out_scale, 2 * kRtol));
}

INSTANTIATE_TEST_SUITE_P(AllScores, AttentionProperties, ::testing::ValuesIn(every_score()),
                         param_name);

// With scale 1e6, scaled-dot softmax is an argmax: exp(−1e6·gap) underflows to exactly 0 for any
// score gap > 7.5e-4 (exp(−745) is below the smallest double), the best key's weight is exactly
// exp(0)/1 = 1, and out is bitwise the best key's value row. Rows whose top two scores are closer
// than 1e-3 are skipped (counted, and most rows must be checked).
TEST(AttentionPropertiesScale, HugeScalePicksTheBestKeyExactly) {
  Case c = make_case(Score::scaled_dot, 2, 2, 1, 11, 19, 8, 8, 5, 7900);
  c.scale = 1e6;
  c.causal = Causal::bottom_right;
  SCOPED_TRACE(c.describe());
  const qkv::AttentionResult got = run_library(c);
  ASSERT_TRUE(has_shape("out", got.out, c.out_shape(), DType::f64));
  int64_t checked = 0, skipped = 0;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h)
      for (int64_t i = 0; i < c.L; ++i) {
        std::vector<std::pair<double, int64_t>> s;
        for (int64_t j = 0; j <= i + c.S - c.L; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < c.Dk; ++d)
            dot += c.q[((b * c.Hq + h) * c.L + i) * c.Dk + d] * c.k[(b * c.S + j) * c.Dk + d];
          s.push_back({dot, j});
        }
        std::sort(s.rbegin(), s.rend());
        if (s.size() > 1 && s[0].first - s[1].first < 1e-3) {
          ++skipped;
          continue;
        }
        ++checked;
        const int64_t best = s[0].second, row = (b * c.Hq + h) * c.L + i;
        for (int64_t d = 0; d < c.Dv; ++d)
          EXPECT_EQ(got.out.value(row * c.Dv + d), c.v[(b * c.S + best) * c.Dv + d])
              << "row [" << b << ", " << h << ", " << i << "] best key " << best << " d " << d;
      }
  EXPECT_GT(checked, 10 * skipped);
}

// Scale 0 makes every visible key equally likely: out is the plain average of the visible values,
// as Score::uniform gives it. The average of ≤ 15 values carries ≤ 15·u relative rounding.
TEST(AttentionPropertiesScale, ScaleZeroIsTheUniformAverage) {
  for (Score score : {Score::scaled_dot, Score::general, Score::laplace, Score::additive}) {
    Case c = make_case(score, 2, 2, 1, 6, 15, 4, 4, 3, 8000);
    c.scale = 0.0;
    c.causal = Causal::bottom_right;
    c.key_lengths = {12, 15};
    SCOPED_TRACE(c.describe());
    const qkv::AttentionResult got = run_library(c);
    Case u = c;
    u.score = Score::uniform;
    u.scale.reset();
    const qkv::AttentionResult uniform = run_library(u);
    std::vector<double> mean(numel_of(c.out_shape()), 0.0), scale(mean.size(), 0.0);
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.Hq; ++h)
        for (int64_t i = 0; i < c.L; ++i) {
          const int64_t last = std::min(i + c.S - c.L, c.key_lengths[b] - 1),
                        row = (b * c.Hq + h) * c.L + i;
          for (int64_t d = 0; d < c.Dv; ++d) {
            for (int64_t j = 0; j <= last; ++j) {
              mean[row * c.Dv + d] += c.v[(b * c.S + j) * c.Dv + d] / (last + 1);
              scale[row * c.Dv + d] += std::abs(c.v[(b * c.S + j) * c.Dv + d]) / (last + 1);
            }
          }
        }
    EXPECT_TRUE(near("out(scale 0)", got.out, c.out_shape(), DType::f64, mean, scale, 1e-13));
    EXPECT_TRUE(near("out(uniform)", uniform.out, c.out_shape(), DType::f64, mean, scale, 1e-13));
  }
}

}  // namespace
}  // namespace qkv_test
