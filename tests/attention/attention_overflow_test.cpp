// Overflow (qkv/attention.h): finite inputs whose score q·k, logit scale·q·k + bias or output lies
// beyond the range of the computation's precision — float32's for float32 inputs, float64's for
// float64 ones — have no representable softmax. Such a row is NaN in out, weights and logsumexp,
// and its gradients are NaN, on the fused path and the reference alike; the other rows are as if
// it were not there. Before issue 11, float32 inputs of 1e20 gave NaN on the fused path and
// finite numbers on the reference, and a score overflowing to −∞ passed for a mask.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "qkv/attention.h"
#include "simd_targets.h"

namespace qkv {
namespace {

Tensor normal(Shape shape, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d;
  Tensor t(std::move(shape), DType::f64);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = d(rng);
  return t.to(dtype);
}

void set_row(Tensor& t, int64_t row, double value) {
  const int64_t D = t.dim(-1);
  for (int64_t d = 0; d < D; ++d) {
    if (t.dtype() == DType::f32)
      t.data<float>()[row * D + d] = static_cast<float>(value);
    else
      t.data<double>()[row * D + d] = value;
  }
}

// Which of the L output rows are NaN (every column NaN, or none: asserted).
std::vector<bool> nan_rows(const Tensor& out) {
  const int64_t L = out.dim(-2), D = out.dim(-1);
  std::vector<bool> nan(L);
  for (int64_t i = 0; i < L; ++i) {
    int count = 0;
    for (int64_t d = 0; d < D; ++d) count += std::isnan(out.value(i * D + d));
    EXPECT_TRUE(count == 0 || count == D) << "row " << i << " is partly NaN";
    nan[i] = count == D;
  }
  return nan;
}

struct OverflowCase {
  std::string name;
  DType dtype;
  double q_value;  // query row 1 is set to this everywhere (others N(0, 1))
  double k_value;  // key row 2 is set to this everywhere
  std::optional<double> scale;
  double bias = 0;  // a float mask of this value on (row 1, key 2), 0 elsewhere; none if 0
  std::vector<bool> want_nan;
};

QKV_PER_SIMD_TARGET(AttentionOverflow);

TEST_P(AttentionOverflow, BothPathsMakeExactlyTheOverflowingRowsNaN) {
  const double f32max = std::numeric_limits<float>::max();
  const std::vector<OverflowCase> cases = {
      // q·k = 8·1e20·1e20 = 8e40 > FLT_MAX: row 1 overflows (+∞), the others see key 2 at
      // N(0,1)·1e20.
      {"q·k beyond float32", DType::f32, 1e20, 1e20, std::nullopt, 0, {false, true, false, false}},
      // −8e40: as −∞ it used to pass for a mask.
      {"q·k beyond float32, negative",
       DType::f32,
       -1e20,
       1e20,
       1.0,
       0,
       {false, true, false, false}},
      // q·k = 8e36 fits; ×1e3 does not: the scale overflows the logit.
      {"scale·q·k beyond float32", DType::f32, 1e18, 1e18, 1e3, 0, {false, true, false, false}},
      // Huge but within range: no overflow, finite results.
      {"within float32", DType::f32, 1e18, 1e18, 1.0, 0, {false, false, false, false}},
      // logit −2.4e38 plus a finite mask value −3e38 is −5.4e38: beyond float32.
      {"logit + mask beyond float32",
       DType::f32,
       -1e19,
       3e18,
       1.0,
       -0.9 * f32max,
       {false, true, false, false}},
      // Float64: 8·1e200·1e200 overflows double itself.
      {"q·k beyond float64", DType::f64, 1e200, 1e200, 1.0, 0, {false, true, false, false}},
      // 1e20-sized float64 inputs are fine in float64 (the float32 limit does not apply).
      {"float64 past float32's range",
       DType::f64,
       1e20,
       1e20,
       1.0,
       0,
       {false, false, false, false}},
  };
  for (const OverflowCase& c : cases) {
    SCOPED_TRACE(c.name);
    const int64_t L = 4, S = 5, D = 8;
    Tensor q = normal({L, D}, c.dtype, 1), k = normal({S, D}, c.dtype, 2),
           v = normal({S, D}, c.dtype, 3);
    set_row(q, 1, c.q_value);
    set_row(k, 2, c.k_value);
    AttentionOptions o{.score = Score::dot, .scale = c.scale, .need_logsumexp = true};
    if (c.bias != 0) {
      Tensor mask({L, S}, c.dtype);
      for (int64_t i = 0; i < L * S; ++i) {
        const double x = i == 1 * S + 2 ? c.bias : 0.0;
        if (c.dtype == DType::f32)
          mask.data<float>()[i] = static_cast<float>(x);
        else
          mask.data<double>()[i] = x;
      }
      o.mask = mask;
    }
    std::vector<Path> paths = {Path::reference};
    if (c.dtype == DType::f32) paths.push_back(Path::fused);
    for (Path path : paths) {
      SCOPED_TRACE(to_string(path));
      AttentionOptions po = o;
      po.path = path;
      const AttentionResult r = attention(q, k, v, po);
      EXPECT_EQ(nan_rows(r.out), c.want_nan);
      for (int64_t i = 0; i < L; ++i) {
        EXPECT_EQ(std::isnan(r.logsumexp.value(i)), c.want_nan[i]) << "lse of row " << i;
        if (!c.want_nan[i]) EXPECT_TRUE(std::isfinite(r.logsumexp.value(i))) << "row " << i;
      }
      // The gradients of an overflowing row are NaN, of the others finite.
      Tensor dout(r.out.shape(), c.dtype);
      for (int64_t i = 0; i < dout.numel(); ++i) {
        if (c.dtype == DType::f32)
          dout.data<float>()[i] = 1.0f;
        else
          dout.data<double>()[i] = 1.0;
      }
      const AttentionGrads g = attention_backward(dout, q, k, v, po);
      for (int64_t i = 0; i < L; ++i)
        EXPECT_EQ(std::isnan(g.dq.value(i * D)), c.want_nan[i]) << "dq of row " << i;
      if (path == Path::reference && o.mask.defined() == false) {
        // Weights: the reference's, NaN across the overflowing rows only.
        AttentionOptions wo = po;
        wo.need_weights = true;
        const AttentionResult w = attention(q, k, v, wo);
        for (int64_t i = 0; i < L; ++i)
          EXPECT_EQ(std::isnan(w.weights.value(i * S)), c.want_nan[i]) << "weights of row " << i;
      }
    }
  }
}

// The fused and reference results agree where nothing overflows, large values included.
TEST_P(AttentionOverflow, LargeFiniteLogitsAgreeAcrossPaths) {
  const int64_t L = 6, S = 7, D = 4;
  Tensor q = normal({L, D}, DType::f32, 11), k = normal({S, D}, DType::f32, 12),
         v = normal({S, D}, DType::f32, 13);
  for (int64_t i = 0; i < q.numel(); ++i) q.data<float>()[i] *= 1e18f;
  for (int64_t i = 0; i < k.numel(); ++i) k.data<float>()[i] *= 1e18f;  // |q·k| up to ~1e37
  const AttentionResult fused = attention(q, k, v, {.score = Score::dot, .path = Path::fused});
  const AttentionResult ref = attention(q, k, v, {.score = Score::dot, .path = Path::reference});
  for (int64_t i = 0; i < fused.out.numel(); ++i) {
    ASSERT_TRUE(std::isfinite(fused.out.value(i)));
    EXPECT_NEAR(fused.out.value(i), ref.out.value(i), 1e-5) << i;
  }
}

// A float64 mask on float32 inputs is read as float32 holds it, on every path: −1e300 (beyond
// −3.4e38) is −∞ there, so it masks its key, as it does on the fused path. Before issue 26 the
// reference (and the explained steps built on it) took it for a logit beyond float32's range and
// made the row NaN, while the fused path masked.
TEST_P(AttentionOverflow, AFloat64MaskBeyondFloat32MasksAFloat32Problem) {
  const int64_t L = 3, S = 4, D = 4;
  const Tensor q = normal({L, D}, DType::f32, 21), k = normal({S, D}, DType::f32, 22),
               v = normal({S, D}, DType::f32, 23);
  Tensor huge({L, S}, DType::f64), hidden({L, S}, DType::b8);
  for (int64_t i = 0; i < L * S; ++i) {
    const bool masked = i == 0 * S + 1 || i == 1 * S + 3;
    huge.data<double>()[i] = masked ? -1e300 : 0.0;
    hidden.data<bool>()[i] = !masked;
  }
  for (Path path : {Path::reference, Path::fused}) {
    SCOPED_TRACE(to_string(path));
    AttentionOptions with_huge{.mask = huge, .need_logsumexp = true, .path = path};
    AttentionOptions with_bool{.mask = hidden, .need_logsumexp = true, .path = path};
    if (path == Path::reference) with_huge.need_weights = with_bool.need_weights = true;
    const AttentionResult a = attention(q, k, v, with_huge), b = attention(q, k, v, with_bool);
    for (int64_t i = 0; i < a.out.numel(); ++i) {
      ASSERT_TRUE(std::isfinite(a.out.value(i))) << i;
      EXPECT_EQ(a.out.value(i), b.out.value(i)) << i;
    }
    for (int64_t i = 0; i < L; ++i) EXPECT_EQ(a.logsumexp.value(i), b.logsumexp.value(i)) << i;
    if (path == Path::reference) {
      EXPECT_EQ(a.weights.value(0 * S + 1), 0.0);
      EXPECT_EQ(a.weights.value(1 * S + 3), 0.0);
      for (int64_t i = 0; i < L * S; ++i) EXPECT_EQ(a.weights.value(i), b.weights.value(i)) << i;
    }
  }
  // Float64 inputs keep the mask's own value: −1e300 is a finite logit there, not a mask.
  const AttentionResult f64 = attention(q.to(DType::f64), k.to(DType::f64), v.to(DType::f64),
                                        {.mask = huge, .need_weights = true,
                                         .path = Path::reference});
  EXPECT_EQ(f64.weights.value(0 * S + 1), 0.0);  // exp(−1e300) underflows to 0 all the same
  EXPECT_TRUE(std::isfinite(f64.out.value(0)));
}

}  // namespace
}  // namespace qkv
