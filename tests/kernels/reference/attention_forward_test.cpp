// qkv::attention forward against the independent float64 triple loop of naive_attention.h.
//
// Every scoring function is swept over awkward sizes (L, S ∈ {0, 1, 2, 17, 97}, D ∈ {1, 8, 21},
// Dv ≠ Dk, Dq ≠ Dk where the score allows it, GQA ratios 1/2/4) and over every kind of mask, on
// both paths. The tolerance kRtol = 1e-12 and the error scales it multiplies are derived in
// naive_attention.h: 20× the worst-case float64 rounding of any summation order.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "cases/naive_fp32.h"
#include "kernels/reference/naive_attention.h"
#include "qkv/attention.h"

namespace qkv_test {
namespace {

using qkv::Causal;
using qkv::DType;
using qkv::Normalize;
using qkv::Path;
using qkv::Score;

struct ShapeSpec {
  int64_t B, Hq, Hkv, L, S, Dq, Dk, Dv;
};

// Dq is used only by general and additive (the other scores force Dq = Dk).
const ShapeSpec kShapes[] = {
    {1, 1, 1, 0, 5, 8, 8, 8},      // no queries at all
    {1, 2, 1, 3, 0, 8, 8, 8},      // no keys: every row is fully masked
    {1, 1, 1, 1, 1, 1, 1, 1},      // the smallest problem
    {2, 2, 2, 2, 2, 8, 8, 8},      //
    {1, 2, 2, 1, 17, 21, 21, 21},  // one query (decoding)
    {2, 4, 2, 17, 17, 21, 8, 21},  // GQA 2, Dq ≠ Dk, Dv ≠ Dk
    {1, 4, 1, 17, 97, 1, 8, 8},    // multi-query (GQA 4), L < S
    {1, 4, 4, 97, 17, 8, 21, 1},   // L > S, Dv = 1
    {1, 2, 1, 97, 97, 21, 21, 8},  // GQA 2, the largest
    {2, 1, 1, 97, 2, 8, 1, 21},    // Dk = 1
};

// The masks of the sweep. Each takes the case (sizes and data set) and a seed for its own data.
struct MaskSpec {
  const char* name;
  std::function<void(Case&, uint64_t)> apply;
};

const std::vector<MaskSpec>& mask_specs() {
  static const std::vector<MaskSpec> specs = {
      {"none", [](Case&, uint64_t) {}},
      {"causal top_left", [](Case& c, uint64_t) { c.causal = Causal::top_left; }},
      {"causal bottom_right", [](Case& c, uint64_t) { c.causal = Causal::bottom_right; }},
      {"bool [B,Hq,L,S]",
       [](Case& c, uint64_t s) {
         set_bool_mask(c, {c.B, c.Hq, c.L, c.S}, 0.7, s);
       }},
      {"bool [L,S] + bottom_right",
       [](Case& c, uint64_t s) {
         set_bool_mask(c, {c.L, c.S}, 0.5, s);
         c.causal = Causal::bottom_right;
       }},
      {"bool [B,1,1,S] + top_left",
       [](Case& c, uint64_t s) {
         set_bool_mask(c, {c.B, 1, 1, c.S}, 0.8, s);
         c.causal = Causal::top_left;
       }},
      {"float64 [1,Hq,L,S]",
       [](Case& c, uint64_t s) {
         set_float_mask(c, {1, c.Hq, c.L, c.S}, 0.2, DType::f64, s);
       }},
      {"float32 [B,1,L,S]",
       [](Case& c, uint64_t s) {
         set_float_mask(c, {c.B, 1, c.L, c.S}, 0.2, DType::f32, s);
       }},
      {"key_lengths",
       [](Case& c, uint64_t s) {
         Normal rng(s);
         for (int64_t b = 0; b < c.B; ++b) c.key_lengths.push_back(rng.integer(0, c.S));
       }},
      {"key_lengths + bool [S] + top_left",
       [](Case& c, uint64_t s) {
         Normal rng(s);
         for (int64_t b = 0; b < c.B; ++b) c.key_lengths.push_back(rng.integer(c.S / 2, c.S));
         set_bool_mask(c, {c.S}, 0.75, s + 1);
         c.causal = Causal::top_left;
       }},
      {"float64 [L,S] + bottom_right",
       [](Case& c, uint64_t s) {
         set_float_mask(c, {c.L, c.S}, 0.1, DType::f64, s);
         c.causal = Causal::bottom_right;
       }},
  };
  return specs;
}

class ForwardVsNaive : public ::testing::TestWithParam<std::tuple<Score, Path>> {};

// Shapes up to 17 meet every mask; the shapes with a 97 meet 4 of the 11, rotating, so that every
// mask meets them without the full product. Every 4th case normalizes with `none`, and the scale
// cycles through default, 0.37 and −0.8.
TEST_P(ForwardVsNaive, MatchesTripleLoop) {
  const auto [score, path] = GetParam();
  const auto& masks = mask_specs();
  int cases = 0;
  for (size_t si = 0; si < std::size(kShapes); ++si) {
    const ShapeSpec& sh = kShapes[si];
    const bool large = sh.L == 97 || sh.S == 97;
    for (size_t t = 0; t < (large ? 4 : masks.size()); ++t) {
      const size_t mi = large ? (si * 4 + t) % masks.size() : t;
      const uint64_t seed = 1000 * (si + 1) + 10 * t + static_cast<uint64_t>(score);
      Case c = make_case(score, sh.B, sh.Hq, sh.Hkv, sh.L, sh.S, sh.Dq, sh.Dk, sh.Dv, seed);
      masks[mi].apply(c, seed + 7);
      if ((si + t) % 4 == 3 && score != Score::uniform) c.normalize = Normalize::none;
      if ((si + t) % 3 == 1) c.scale = 0.37;
      if ((si + t) % 3 == 2) c.scale = -0.8;
      SCOPED_TRACE(c.describe() + " (" + masks[mi].name + ") path=" + path_name(path));
      const qkv::AttentionResult got = run_library(c, DType::f64, path);
      EXPECT_TRUE(matches_oracle(c, got));
      ++cases;
    }
  }
  EXPECT_EQ(cases, 6 * 11 + 4 * 4);
}

// Large logits (scale 3 on D = 21: |logit| up to ~60) stress the max-subtraction of the softmax.
TEST_P(ForwardVsNaive, LargeLogits) {
  const auto [score, path] = GetParam();
  Case c = make_case(score, 1, 2, 1, 17, 33, 21, 21, 8, 77);
  c.scale = 3.0;
  set_bool_mask(c, {c.L, c.S}, 0.6, 78);
  SCOPED_TRACE(c.describe() + " path=" + path_name(path));
  EXPECT_TRUE(matches_oracle(c, run_library(c, DType::f64, path)));
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<Score, Path>>& info) {
  return score_name(std::get<0>(info.param)) + "_" + path_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllScores, ForwardVsNaive,
                         ::testing::Combine(::testing::ValuesIn(every_score()),
                                            ::testing::Values(Path::reference, Path::automatic)),
                         param_name);

// ---- float32 inputs ----

// float32 in → float32 out, within what fp32 itself can do (docs/CONVENTIONS.md §1.1): for the
// result X, the float64 oracle R and the plain fp32 triple loop N on the same (fp32) inputs,
// max|X − R| ≤ 2·max|N − R| + 1e-6 per tensor.
::testing::AssertionResult fp32_close(std::string_view what, const qkv::Tensor& got,
                                      const qkv::Shape& shape, const std::vector<double>& r,
                                      const std::vector<double>& n) {
  if (auto ok = has_shape(what, got, shape, DType::f32); !ok) return ok;
  double naive_err = 0;
  for (size_t i = 0; i < r.size(); ++i)
    if (std::isfinite(r[i])) naive_err = std::max(naive_err, std::abs(n[i] - r[i]));
  const double tol = qkv::cases::rule_tolerance(naive_err, qkv::cases::kOutputFactor);
  return near(what, got, shape, DType::f32, r, {}, 0, tol) << " (tol " << tol << ")";
}

class ForwardFloat32 : public ::testing::TestWithParam<Score> {};

TEST_P(ForwardFloat32, WithinFp32RoundingOfFloat64) {
  const Score score = GetParam();
  const ShapeSpec shapes[] = {
      {1, 1, 1, 1, 1, 1, 1, 1}, {2, 4, 2, 17, 23, 21, 8, 21}, {1, 2, 1, 97, 97, 8, 21, 8}};
  for (size_t si = 0; si < std::size(shapes); ++si) {
    const ShapeSpec& sh = shapes[si];
    Case c = make_case(score, sh.B, sh.Hq, sh.Hkv, sh.L, sh.S, sh.Dq, sh.Dk, sh.Dv, 500 + si);
    if (si == 1) set_float_mask(c, {c.B, 1, c.L, c.S}, 0.2, DType::f32, 501);
    if (si == 2) c.causal = Causal::bottom_right;
    round_to_float(c);
    SCOPED_TRACE(c.describe() + " dtype=float32");
    const qkv::AttentionResult got = run_library(c, DType::f32);
    const Naive r = naive_attention(c);
    const qkv::cases::NaiveForward n =
        qkv::cases::naive_forward(naive_problem<float>(c), /*need_weights=*/true);
    EXPECT_TRUE(fp32_close("out", got.out, c.out_shape(), r.out, n.out));
    EXPECT_TRUE(fp32_close("weights", got.weights, c.weights_shape(), r.weights, n.weights));
    EXPECT_TRUE(fp32_close("logsumexp", got.logsumexp, c.lse_shape(), r.lse, n.lse));
  }
}

INSTANTIATE_TEST_SUITE_P(AllScores, ForwardFloat32, ::testing::ValuesIn(every_score()),
                         [](const auto& info) { return score_name(info.param); });

// Any float64 input makes the results float64 (and then as exact as the float64 oracle).
TEST(ForwardDtype, AnyFloat64InputGivesFloat64Results) {
  Case c = make_case(Score::scaled_dot, 2, 2, 1, 5, 7, 4, 4, 3, 321);
  round_to_float(c);
  const DType combos[][3] = {{DType::f32, DType::f64, DType::f64},
                             {DType::f64, DType::f32, DType::f32},
                             {DType::f32, DType::f32, DType::f64}};
  for (const auto& d : combos) {
    SCOPED_TRACE(c.describe() + " dtypes q=" + std::string(qkv::dtype_name(d[0])) + " k=" +
                 std::string(qkv::dtype_name(d[1])) + " v=" + std::string(qkv::dtype_name(d[2])));
    const qkv::AttentionResult got =
        qkv::attention(tensor_of(c.q_shape(), c.q, d[0]), tensor_of(c.k_shape(), c.k, d[1]),
                       tensor_of(c.v_shape(), c.v, d[2]), options_of(c));
    EXPECT_TRUE(matches_oracle(c, got, DType::f64));
  }
}

// ---- ranks and layouts ----

// [L, D] inputs (B = H = 1) and [H, L, D] inputs (B = 1, GQA across H) give q's rank back.
TEST(ForwardRank, Rank2And3MatchRank4) {
  for (Score score : every_score()) {
    Case c2 = make_case(score, 1, 1, 1, 6, 9, 5, 4, 3, 41, /*rank=*/2);
    set_bool_mask(c2, {c2.L, c2.S}, 0.7, 42);
    Case c3 = make_case(score, 1, 4, 2, 6, 9, 5, 4, 3, 43, /*rank=*/3);
    c3.causal = Causal::bottom_right;
    c3.key_lengths = {8};
    for (const Case* c : {&c2, &c3}) {
      SCOPED_TRACE(c->describe());
      EXPECT_TRUE(matches_oracle(*c, run_library(*c)));
      Case c4 = *c;  // the same problem spelled at rank 4
      c4.rank = 4;
      EXPECT_TRUE(matches_oracle(c4, run_library(c4)));
    }
  }
}

// q, k, v as transposed views of [B, L, H, D] projection outputs (non-contiguous) give what their
// contiguous copies give.
TEST(ForwardLayout, StridedViewsMatchContiguousCopies) {
  for (Score score : {Score::scaled_dot, Score::general, Score::additive, Score::cosine}) {
    Case c = make_case(score, 2, 4, 2, 7, 11, 6, 5, 3, 61);
    set_bool_mask(c, {c.B, 1, c.L, c.S}, 0.8, 62);
    c.causal = Causal::bottom_right;
    SCOPED_TRACE(c.describe() + " q/k/v transposed views of [B, L, H, D]");
    // [B, H, L, D] values → a contiguous [B, L, H, D] tensor → transpose(1, 2) view.
    auto view_of = [](const std::vector<double>& x, int64_t B, int64_t H, int64_t L, int64_t D) {
      std::vector<double> blhd(x.size());
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t l = 0; l < L; ++l)
            for (int64_t d = 0; d < D; ++d)
              blhd[((b * L + l) * H + h) * D + d] = x[((b * H + h) * L + l) * D + d];
      return qkv::Tensor::from({B, L, H, D}, blhd).transpose(1, 2);
    };
    const qkv::Tensor q = view_of(c.q, c.B, c.Hq, c.L, c.Dq);
    const qkv::Tensor k = view_of(c.k, c.B, c.Hkv, c.S, c.Dk);
    const qkv::Tensor v = view_of(c.v, c.B, c.Hkv, c.S, c.Dv);
    ASSERT_FALSE(q.is_contiguous());
    ASSERT_EQ(q.shape(), c.q_shape());
    const qkv::AttentionOptions o = options_of(c);
    const qkv::AttentionResult strided = qkv::attention(q, k, v, o);
    const qkv::AttentionResult copied =
        qkv::attention(q.contiguous(), k.contiguous(), v.contiguous(), o);
    EXPECT_TRUE(matches_oracle(c, strided));
    EXPECT_TRUE(matches_oracle(c, copied));
    // and the two agree with each other to the same bound
    const Naive r = naive_attention(c);
    EXPECT_TRUE(near("out(strided vs contiguous)", strided.out, c.out_shape(), DType::f64,
                     values_of(copied.out), r.out_scale, kRtol));
  }
}

}  // namespace
}  // namespace qkv_test
