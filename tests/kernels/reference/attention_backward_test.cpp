// qkv::attention_backward against float64 finite differences of the independent oracle.
//
// loss = Σ out ∘ G for a random G, so dout = G and ∂loss/∂x is what attention_backward returns
// for every input x: q, k, v, the score's parameters and the scale. The finite differences
// differentiate naive_attention (naive_attention.h), not the library's forward, so a
// forward bug cannot cancel a backward bug.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/reference/naive_attention.h"
#include "qkv/attention.h"

namespace qkv_test {
namespace {

using qkv::Causal;
using qkv::DType;
using qkv::Normalize;
using qkv::Path;
using qkv::Score;

// Finite differences: the 5-point central stencil
//   f'(x) ≈ (f(x−2h) − 8 f(x−h) + 8 f(x+h) − f(x+2h)) / 12h,
// truncation error h⁴ |f⁽⁵⁾| / 30, rounding error ≈ 1.5 ε_f / h with ε_f ≲ 1e-14 the float64
// rounding of one loss evaluation on these small shapes. Measured over every case below (all
// scores): FD at h = 1e-3 is off by up to 1.6e-9 (truncation; cosine on D = 2), while FD at
// h = 5e-4 agrees with h = 2.5e-4 to ≤ 1e-10 and with h = 1e-4 to ≤ 3.2e-10 (there rounding takes
// over). So h = 5e-4, error ≲ 1e-10. Laplace's |q − k| has kinks: laplace data keeps every
// |q_d − k_d| ≥ 5e-3 > 2h, so the stencil never straddles one.
constexpr double kStep = 5e-4;
// A gradient g passes when |g − fd| ≤ kGradAtol + kGradRtol·|fd| (gradients here are ≤ ~35):
// ≥ 100× the FD error above, and 1e4× below the smallest error worth catching (the 1e-4
// perturbation of BackwardChecker.HasTeeth).
constexpr double kGradAtol = 1e-8;
constexpr double kGradRtol = 1e-7;

double loss(const Case& c, const std::vector<double>& g) {
  const Naive r = naive_attention(c);
  double s = 0;
  for (size_t i = 0; i < g.size(); ++i) s += r.out[i] * g[i];
  return s;
}

// d loss / d x by the stencil, x an element of c (restored afterwards).
double derivative(Case& c, double& x, const std::vector<double>& g) {
  const double x0 = x;
  auto f = [&](double step) {
    x = x0 + step;
    const double y = loss(c, g);
    x = x0;
    return y;
  };
  return (f(-2 * kStep) - 8 * f(-kStep) + 8 * f(kStep) - f(2 * kStep)) / (12 * kStep);
}

struct FdGrads {
  std::vector<double> dq, dk, dv, dw, dw_q, dw_k, dw_v;
  double dscale = 0;
};

FdGrads finite_differences(const Case& original, const std::vector<double>& g) {
  Case c = original;
  c.scale = c.scale_value();  // the default scale becomes explicit so that it can move
  FdGrads fd;
  auto all = [&](std::vector<double>& x, std::vector<double>& dx) {
    dx.resize(x.size());
    for (size_t i = 0; i < x.size(); ++i) dx[i] = derivative(c, x[i], g);
  };
  all(c.q, fd.dq);
  all(c.k, fd.dk);
  all(c.v, fd.dv);
  all(c.w, fd.dw);
  all(c.w_q, fd.dw_q);
  all(c.w_k, fd.dw_k);
  all(c.w_v, fd.dw_v);
  fd.dscale = derivative(c, *c.scale, g);
  return fd;
}

::testing::AssertionResult grad_near(std::string_view what, const qkv::Tensor& got,
                                     const qkv::Shape& shape, DType dtype,
                                     const std::vector<double>& fd) {
  return near(what, got, shape, dtype, fd, {}, kGradRtol, kGradAtol);
}

::testing::AssertionResult scalar_near(std::string_view what, double got, double fd) {
  const double tol = kGradAtol + kGradRtol * std::abs(fd);
  if (std::isfinite(got) && std::abs(got - fd) <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << " = " << got << ", finite differences give " << fd << " (|diff| "
         << std::abs(got - fd) << " > tol " << tol << ")";
}

// Every gradient of `got` against finite differences of the oracle.
::testing::AssertionResult grads_match(const Case& c, const qkv::AttentionGrads& got,
                                       const std::vector<double>& g) {
  const FdGrads fd = finite_differences(c, g);
  const DType f64 = DType::f64;
  if (auto ok = grad_near("dq", got.dq, c.q_shape(), f64, fd.dq); !ok) return ok;
  if (auto ok = grad_near("dk", got.dk, c.k_shape(), f64, fd.dk); !ok) return ok;
  if (auto ok = grad_near("dv", got.dv, c.v_shape(), f64, fd.dv); !ok) return ok;
  if (uses_w(c.score))
    if (auto ok = grad_near("dparams.w", got.dparams.w, {c.Dq, c.Dk}, f64, fd.dw); !ok) return ok;
  if (uses_additive(c.score)) {
    if (auto ok = grad_near("dparams.w_q", got.dparams.w_q, {c.A, c.Dq}, f64, fd.dw_q); !ok)
      return ok;
    if (auto ok = grad_near("dparams.w_k", got.dparams.w_k, {c.A, c.Dk}, f64, fd.dw_k); !ok)
      return ok;
    if (auto ok = grad_near("dparams.v", got.dparams.v, {c.A}, f64, fd.dw_v); !ok) return ok;
  }
  return scalar_near("dscale", got.dscale, fd.dscale);
}

// Laplace's −Σ|q_d − k_d| is not differentiable where q_d = k_d; nudge k until every pair that
// shares a head group and a dimension is at least 5e-3 apart (DESIGN: avoid ties).
void separate_for_laplace(Case& c) {
  if (c.score != Score::laplace) return;
  const int64_t ratio = c.Hq / c.Hkv;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t g = 0; g < c.Hkv; ++g)
      for (int64_t j = 0; j < c.S; ++j)
        for (int64_t d = 0; d < c.Dk; ++d) {
          double& kv = c.k[((b * c.Hkv + g) * c.S + j) * c.Dk + d];
          for (bool clash = true; clash;) {
            clash = false;
            for (int64_t h = g * ratio; h < (g + 1) * ratio; ++h)
              for (int64_t i = 0; i < c.L; ++i)
                if (std::abs(c.q[((b * c.Hq + h) * c.L + i) * c.Dq + d] - kv) < 5e-3) clash = true;
            if (clash) kv += 0.0123;
          }
        }
}

struct BackwardSpec {
  const char* name;
  int64_t B, Hq, Hkv, L, S, Dq, Dk, Dv;
  void (*setup)(Case&);
};

const BackwardSpec kBackwardSpecs[] = {
    {"plain", 1, 1, 1, 3, 4, 3, 3, 2, [](Case&) {}},
    {"GQA 2 + bottom_right + bool mask with a fully masked row", 2, 4, 2, 5, 6, 3, 4, 3,
     [](Case& c) {
       c.scale = 0.7;
       c.causal = Causal::bottom_right;
       set_bool_mask(c, {c.B, 1, c.L, c.S}, 0.8, c.seed + 1);
       for (int64_t j = 0; j < c.S; ++j) c.mask[1 * c.S + j] = 0;  // b = 0, query 1: nothing
     }},
    {"top_left with L > S + key_lengths, negative scale", 1, 2, 1, 6, 4, 2, 3, 3,
     [](Case& c) {
       c.scale = -0.6;
       c.causal = Causal::top_left;
       c.key_lengths = {3};
     }},
    {"float mask with -inf + normalize none", 2, 2, 2, 4, 5, 3, 3, 2,
     [](Case& c) {
       set_float_mask(c, {c.L, c.S}, 0.25, DType::f64, c.seed + 2);
       if (c.score != Score::uniform) c.normalize = Normalize::none;
     }},
    {"multi-query (GQA 4) + normalize none + top_left", 1, 4, 1, 3, 3, 2, 2, 2,
     [](Case& c) {
       c.causal = Causal::top_left;
       if (c.score != Score::uniform) c.normalize = Normalize::none;
     }},
    {"GQA 2 + key_lengths 0 and S + float32 mask", 2, 2, 1, 3, 5, 4, 2, 3,
     [](Case& c) {
       c.key_lengths = {0, 5};
       set_float_mask(c, {c.B, c.Hq, c.L, c.S}, 0.1, DType::f32, c.seed + 3);
     }},
};

class BackwardVsFiniteDifferences : public ::testing::TestWithParam<std::tuple<Score, Path>> {};

TEST_P(BackwardVsFiniteDifferences, EveryGradient) {
  const auto [score, path] = GetParam();
  for (size_t si = 0; si < std::size(kBackwardSpecs); ++si) {
    const BackwardSpec& s = kBackwardSpecs[si];
    Case c = make_case(score, s.B, s.Hq, s.Hkv, s.L, s.S, s.Dq, s.Dk, s.Dv,
                       3000 + 17 * si + static_cast<uint64_t>(score));
    s.setup(c);
    separate_for_laplace(c);
    const std::vector<double> g = Normal(c.seed + 99).vec(numel_of(c.out_shape()));
    SCOPED_TRACE(c.describe() + " (" + s.name + ") path=" + path_name(path) + " dout=N(0,1) seed " +
                 std::to_string(c.seed + 99));
    const qkv::AttentionGrads got = qkv::attention_backward(
        tensor_of(c.out_shape(), g, DType::f64), tensor_of(c.q_shape(), c.q, DType::f64),
        tensor_of(c.k_shape(), c.k, DType::f64), tensor_of(c.v_shape(), c.v, DType::f64),
        options_of(c, DType::f64, path));
    EXPECT_TRUE(grads_match(c, got, g));

    // Exact zeros: a query that sees nothing has dq = 0; a key nobody sees has dk = dv = 0.
    const Naive r = naive_attention(c);
    if (!got.dq.defined() || !got.dk.defined() || !got.dv.defined()) continue;
    const int64_t ratio = c.Hq / c.Hkv;
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.Hq; ++h)
        for (int64_t i = 0; i < c.L; ++i) {
          const int64_t row = (b * c.Hq + h) * c.L + i;
          bool any = false;
          for (int64_t j = 0; j < c.S; ++j) any = any || r.visible[row * c.S + j];
          if (any) continue;
          for (int64_t d = 0; d < c.Dq; ++d)
            EXPECT_EQ(got.dq.value(row * c.Dq + d), 0.0)
                << "dq of fully masked row [" << b << ", " << h << ", " << i << "], d=" << d;
        }
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t g2 = 0; g2 < c.Hkv; ++g2)
        for (int64_t j = 0; j < c.S; ++j) {
          bool seen = false;
          for (int64_t h = g2 * ratio; h < (g2 + 1) * ratio; ++h)
            for (int64_t i = 0; i < c.L; ++i)
              seen = seen || r.visible[((b * c.Hq + h) * c.L + i) * c.S + j];
          if (seen) continue;
          const int64_t key = (b * c.Hkv + g2) * c.S + j;
          for (int64_t d = 0; d < c.Dk; ++d)
            EXPECT_EQ(got.dk.value(key * c.Dk + d), 0.0) << "dk of unseen key " << key;
          for (int64_t d = 0; d < c.Dv; ++d)
            EXPECT_EQ(got.dv.value(key * c.Dv + d), 0.0) << "dv of unseen key " << key;
        }
  }
}

// The default scale (options.scale empty) still reports ∂loss/∂scale at that default.
TEST_P(BackwardVsFiniteDifferences, DefaultScaleAndRank3) {
  const auto [score, path] = GetParam();
  Case c = make_case(score, 1, 4, 2, 4, 5, 3, 3, 2, 4100 + static_cast<uint64_t>(score), 3);
  c.causal = Causal::bottom_right;
  separate_for_laplace(c);
  const std::vector<double> g = Normal(c.seed + 99).vec(numel_of(c.out_shape()));
  SCOPED_TRACE(c.describe() + " path=" + path_name(path));
  const qkv::AttentionGrads got = qkv::attention_backward(
      tensor_of(c.out_shape(), g, DType::f64), tensor_of(c.q_shape(), c.q, DType::f64),
      tensor_of(c.k_shape(), c.k, DType::f64), tensor_of(c.v_shape(), c.v, DType::f64),
      options_of(c, DType::f64, path));
  EXPECT_TRUE(grads_match(c, got, g));
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<Score, Path>>& info) {
  return score_name(std::get<0>(info.param)) + "_" + path_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllScores, BackwardVsFiniteDifferences,
                         ::testing::Combine(::testing::ValuesIn(every_score()),
                                            ::testing::Values(Path::reference, Path::automatic)),
                         param_name);

// The checker has teeth: it accepts a correct gradient obtained another way (finite differences
// at half the step) and rejects the same gradient with one element off by 1e-4, or dscale off by
// 1e-4 — and so does it for the library's own gradient.
TEST(BackwardChecker, HasTeeth) {
  Case c = make_case(Score::scaled_dot, 1, 2, 1, 4, 5, 3, 3, 2, 4242);
  c.causal = Causal::bottom_right;
  const std::vector<double> g = Normal(4343).vec(numel_of(c.out_shape()));
  SCOPED_TRACE(c.describe());
  const FdGrads fd = finite_differences(c, g);

  // A correct gradient from elsewhere: the plain 3-point stencil at h = 1e-5 (truncation
  // h²|f'''|/6 ≲ 1e-10, rounding ε_f/h ≲ 1e-9).
  Case ce = c;
  ce.scale = ce.scale_value();
  std::vector<double> dq3(ce.q.size());
  for (size_t i = 0; i < ce.q.size(); ++i) {
    const double x0 = ce.q[i];
    ce.q[i] = x0 + 1e-5;
    const double up = loss(ce, g);
    ce.q[i] = x0 - 1e-5;
    const double down = loss(ce, g);
    ce.q[i] = x0;
    dq3[i] = (up - down) / 2e-5;
  }
  const qkv::Tensor correct = qkv::Tensor::from(c.q_shape(), dq3);
  EXPECT_TRUE(grad_near("dq (3-point FD)", correct, c.q_shape(), DType::f64, fd.dq));
  std::vector<double> off = dq3;
  off[5] += 1e-4;
  EXPECT_FALSE(grad_near("dq (perturbed)", qkv::Tensor::from(c.q_shape(), off), c.q_shape(),
                         DType::f64, fd.dq));
  EXPECT_FALSE(scalar_near("dscale (perturbed)", fd.dscale + 1e-4, fd.dscale));
  EXPECT_TRUE(scalar_near("dscale", fd.dscale, fd.dscale));

  // The library's gradient, perturbed, must fail the full check.
  qkv::AttentionGrads got = qkv::attention_backward(
      tensor_of(c.out_shape(), g, DType::f64), tensor_of(c.q_shape(), c.q, DType::f64),
      tensor_of(c.k_shape(), c.k, DType::f64), tensor_of(c.v_shape(), c.v, DType::f64),
      options_of(c));
  ASSERT_TRUE(grads_match(c, got, g));
  qkv::AttentionGrads bad = got;
  bad.dk = got.dk.clone();
  bad.dk.data<double>()[3] += 1e-4;
  EXPECT_FALSE(grads_match(c, bad, g));
  bad = got;
  bad.dv = got.dv.clone();
  bad.dv.data<double>()[bad.dv.numel() - 1] -= 1e-4;
  EXPECT_FALSE(grads_match(c, bad, g));
  bad = got;
  bad.dscale += 1e-4;
  EXPECT_FALSE(grads_match(c, bad, g));
}

// Gradients have the shape and dtype of what they differentiate: float32 in, float32 gradients,
// close to the float64 gradients of the same values. Bound: fp32 gradients of these O(1) sums of
// ≤ 50 terms carry ≲ 50·6e-8·(Σ|terms| ≲ 30) ≈ 1e-4 absolute error; 1e-3 leaves 10× room and
// still catches a wrong formula (errors O(0.1)).
TEST(BackwardDtype, Float32InputsGiveFloat32Gradients) {
  for (Score score : every_score()) {
    Case c = make_case(score, 2, 2, 1, 5, 6, 4, 4, 3, 5000 + static_cast<uint64_t>(score));
    c.causal = Causal::top_left;
    round_to_float(c);
    std::vector<double> g = Normal(5001).vec(numel_of(c.out_shape()));
    for (double& e : g) e = static_cast<float>(e);
    SCOPED_TRACE(c.describe() + " dtype=float32");
    auto run = [&](DType dt) {
      return qkv::attention_backward(
          tensor_of(c.out_shape(), g, dt), tensor_of(c.q_shape(), c.q, dt),
          tensor_of(c.k_shape(), c.k, dt), tensor_of(c.v_shape(), c.v, dt), options_of(c, dt));
    };
    const qkv::AttentionGrads g32 = run(DType::f32), g64 = run(DType::f64);
    EXPECT_TRUE(near("dq", g32.dq, c.q_shape(), DType::f32, values_of(g64.dq), {}, 0, 1e-3));
    EXPECT_TRUE(near("dk", g32.dk, c.k_shape(), DType::f32, values_of(g64.dk), {}, 0, 1e-3));
    EXPECT_TRUE(near("dv", g32.dv, c.v_shape(), DType::f32, values_of(g64.dv), {}, 0, 1e-3));
    if (uses_w(score)) {
      EXPECT_TRUE(near("dparams.w", g32.dparams.w, {c.Dq, c.Dk}, DType::f32,
                       values_of(g64.dparams.w), {}, 0, 1e-3));
    }
    if (uses_additive(score)) {
      EXPECT_TRUE(near("dparams.w_q", g32.dparams.w_q, {c.A, c.Dq}, DType::f32,
                       values_of(g64.dparams.w_q), {}, 0, 1e-3));
      EXPECT_TRUE(near("dparams.w_k", g32.dparams.w_k, {c.A, c.Dk}, DType::f32,
                       values_of(g64.dparams.w_k), {}, 0, 1e-3));
      EXPECT_TRUE(near("dparams.v", g32.dparams.v, {c.A}, DType::f32, values_of(g64.dparams.v), {},
                       0, 1e-3));
    }
    EXPECT_NEAR(g32.dscale, g64.dscale, 1e-3 * (1 + std::abs(g64.dscale)));
  }
}

// Strided q, k, v and dout (transposed views) give the gradients of their contiguous copies.
TEST(BackwardLayout, StridedViewsMatchContiguousCopies) {
  Case c = make_case(Score::general, 1, 2, 2, 4, 5, 3, 4, 2, 6000);
  c.causal = Causal::bottom_right;
  SCOPED_TRACE(c.describe());
  const std::vector<double> g = Normal(6001).vec(numel_of(c.out_shape()));
  // [B, H, L, D] contiguous vs the same values stored [B, L, H, D] and viewed back.
  auto view_of = [](const std::vector<double>& x, const qkv::Shape& s) {
    std::vector<double> blhd(x.size());
    for (int64_t b = 0; b < s[0]; ++b)
      for (int64_t h = 0; h < s[1]; ++h)
        for (int64_t l = 0; l < s[2]; ++l)
          for (int64_t d = 0; d < s[3]; ++d)
            blhd[((b * s[2] + l) * s[1] + h) * s[3] + d] =
                x[((b * s[1] + h) * s[2] + l) * s[3] + d];
    return qkv::Tensor::from({s[0], s[2], s[1], s[3]}, blhd).transpose(1, 2);
  };
  const qkv::AttentionOptions o = options_of(c);
  const qkv::AttentionGrads strided =
      qkv::attention_backward(view_of(g, c.out_shape()), view_of(c.q, c.q_shape()),
                              view_of(c.k, c.k_shape()), view_of(c.v, c.v_shape()), o);
  EXPECT_TRUE(grads_match(c, strided, g));
}

}  // namespace
}  // namespace qkv_test
