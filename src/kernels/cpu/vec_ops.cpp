// Highway implementations of vec_ops.h. This file is compiled once per target instruction set
// (hwy/foreach_target.h re-includes it); HWY_DYNAMIC_DISPATCH picks one at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/vec_ops.cpp"
#include "kernels/cpu/vec_ops.h"

#include <cmath>
#include <limits>

#include "hwy/foreach_target.h"  // must come before highway.h
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace qkv::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// 2^x = 2^n · 2^f with n = round(x), f = x − n ∈ [−½, ½]. 2^f = e^(f ln 2) by its Taylor series
// to degree 7: the first omitted term is (½ ln 2)^8 / 8! ≈ 5.2e-9, below half an fp32 ulp.
// Measured over x ∈ [−126, 0] in steps of 2^-10: max relative error 0.48 ε (ε = 2^-23)
// (tests/kernels/cpu/vec_ops_test.cpp). 2^n is built in the exponent bits; x < −126 gives 0.
template <class D, class V>
HWY_INLINE V Exp2Fraction(D d, V f) {
  V p = hn::Set(d, 1.5252733804059841e-05f);
  p = hn::MulAdd(p, f, hn::Set(d, 1.5403530393381608e-04f));
  p = hn::MulAdd(p, f, hn::Set(d, 1.3333558146428443e-03f));
  p = hn::MulAdd(p, f, hn::Set(d, 9.6181291076284772e-03f));
  p = hn::MulAdd(p, f, hn::Set(d, 5.5504108664821580e-02f));
  p = hn::MulAdd(p, f, hn::Set(d, 2.4022650695910071e-01f));
  p = hn::MulAdd(p, f, hn::Set(d, 6.9314718055994531e-01f));
  return hn::MulAdd(p, f, hn::Set(d, 1.0f));
}

template <class D, class V>
HWY_INLINE V Exp2(D d, V x) {
  const hn::RebindToSigned<D> di;
  const auto tiny = hn::Lt(x, hn::Set(d, -126.0f));
  x = hn::Max(x, hn::Set(d, -126.0f));
  x = hn::Min(x, hn::Set(d, 127.0f));
  const V n = hn::Round(x);
  const V p = Exp2Fraction(d, hn::Sub(x, n));
  const auto bits = hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127)));
  return hn::IfThenZeroElse(tiny, hn::Mul(p, hn::BitCast(d, bits)));
}

// Exp2 of the softmax's exponents x ≤ 0 (not NaN) in three fewer steps, the same bits for
// x ≥ −126: no upper clamp, and no compare for the tiny ones — x is clamped at −127, whose
// exponent field 0 makes the product exactly 0. So 0 below −126.5, and between −126.5 and −126 a
// subnormal where Exp2 gives 0. (The softmax's exp is ~14% of the fused forward: issue 12.)
template <class D, class V>
HWY_INLINE V Exp2NonPositive(D d, V x) {
  const hn::RebindToSigned<D> di;
  x = hn::Max(x, hn::Set(d, -127.0f));
  const V n = hn::Round(x);
  const V p = Exp2Fraction(d, hn::Sub(x, n));
  const auto bits = hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127)));
  return hn::Mul(p, hn::BitCast(d, bits));
}

void ScaleRow(float* x, int64_t n, float a) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  const auto va = hn::Set(d, a);
  int64_t j = 0;
  for (; j + N <= n; j += N) hn::StoreU(hn::Mul(hn::LoadU(d, x + j), va), d, x + j);
  for (; j < n; ++j) x[j] *= a;
}

bool AddBiasRow(float* x, const float* bias, int64_t n, float a) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  const float ninf = -std::numeric_limits<float>::infinity();
  const auto va = hn::Set(d, a), vninf = hn::Set(d, ninf);
  auto infinite = hn::FirstN(d, 0);
  int64_t j = 0;
  for (; j + N <= n; j += N) {
    const auto b = hn::LoadU(d, bias + j);
    const auto sum = hn::MulAdd(b, va, hn::LoadU(d, x + j));
    const auto masked = hn::Eq(b, vninf);
    infinite = hn::Or(infinite, hn::AndNot(masked, hn::IsInf(sum)));
    hn::StoreU(hn::IfThenElse(masked, vninf, sum), d, x + j);
  }
  bool overflow = !hn::AllFalse(d, infinite);
  for (; j < n; ++j) {
    x[j] = bias[j] == ninf ? ninf : x[j] + bias[j] * a;
    overflow = overflow || (bias[j] != ninf && std::isinf(x[j]));
  }
  return overflow;
}

float MaxRow(const float* x, int64_t n, uint32_t* seen) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  const float ninf = -std::numeric_limits<float>::infinity();
  float m = ninf;
  bool bad = false, minus_inf = false;
  int64_t j = 0;
  if (n >= N) {
    const auto vninf = hn::Set(d, ninf), zero = hn::Zero(d);
    // x·0 is NaN for a NaN or ±∞ and 0 otherwise; −∞ is told apart by its own mask.
    auto vm = vninf, vbad = zero;
    auto vminus = hn::FirstN(d, 0);
    for (; j + N <= n; j += N) {
      const auto x_j = hn::LoadU(d, x + j);
      const auto is_minus = hn::Eq(x_j, vninf);
      vm = hn::Max(vm, x_j);
      vbad = hn::Add(vbad, hn::IfThenZeroElse(is_minus, hn::Mul(x_j, zero)));
      vminus = hn::Or(vminus, is_minus);
    }
    m = hn::GetLane(hn::MaxOfLanes(d, vm));
    bad = std::isnan(hn::GetLane(hn::SumOfLanes(d, vbad)));
    minus_inf = !hn::AllFalse(d, vminus);
  }
  for (; j < n; ++j) {
    m = x[j] > m ? x[j] : m;
    bad = bad || std::isnan(x[j]) || x[j] == -ninf;
    minus_inf = minus_inf || x[j] == ninf;
  }
  *seen = (bad ? uint32_t{kSawNaNOrPlusInf} : 0u) | (minus_inf ? uint32_t{kSawMinusInf} : 0u);
  return m;
}

float ExpSubRow(const float* s, float* p, int64_t n, float m, float c, float a) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  const auto vm = hn::Set(d, m), vc = hn::Set(d, c), va = hn::Set(d, a);
  auto sum = hn::Zero(d);
  int64_t j = 0;
  for (; j + N <= n; j += N) {
    const auto e = Exp2NonPositive(d, hn::Mul(hn::MulSub(hn::LoadU(d, s + j), va, vm), vc));
    hn::StoreU(e, d, p + j);
    sum = hn::Add(sum, e);
  }
  float total = hn::GetLane(hn::SumOfLanes(d, sum));
  // The tail goes through the same polynomial, one lane at a time.
  const hn::CappedTag<float, 1> d1;
  for (; j < n; ++j) {
    const float e = hn::GetLane(Exp2NonPositive(d1, hn::Set(d1, std::fma(s[j], a, -m) * c)));
    p[j] = e;
    total += e;
  }
  return total;
}

float SoftmaxGradRow(const float* p, const float* x, const float* raw, float* ds, int64_t n,
                     float dd, float scale) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  const float ninf = -std::numeric_limits<float>::infinity();
  const auto vd = hn::Set(d, dd), vninf = hn::Set(d, ninf), vscale = hn::Set(d, scale);
  auto acc = hn::Zero(d);
  int64_t j = 0;
  for (; j + N <= n; j += N) {
    const auto masked = hn::Eq(hn::LoadU(d, x + j), vninf);
    const auto g =
        hn::IfThenZeroElse(masked, hn::Mul(hn::LoadU(d, p + j), hn::Sub(hn::LoadU(d, ds + j), vd)));
    acc = hn::Add(acc, hn::IfThenZeroElse(masked, hn::Mul(g, hn::LoadU(d, raw + j))));
    hn::StoreU(hn::Mul(g, vscale), d, ds + j);
  }
  float total = hn::GetLane(hn::SumOfLanes(d, acc));
  for (; j < n; ++j) {
    const float g = x[j] == ninf ? 0.0f : p[j] * (ds[j] - dd);
    if (x[j] != ninf) total += g * raw[j];
    ds[j] = g * scale;
  }
  return total;
}

bool AllFiniteRow(const float* x, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  const auto zero = hn::Zero(d);
  auto acc = zero;
  int64_t j = 0;
  for (; j + N <= n; j += N) acc = hn::MulAdd(hn::LoadU(d, x + j), zero, acc);
  float total = hn::GetLane(hn::SumOfLanes(d, acc));
  for (; j < n; ++j) total += x[j] * 0.0f;
  return total == 0.0f;
}

float DotRow(const float* a, const float* b, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  auto acc = hn::Zero(d);
  int64_t j = 0;
  for (; j + N <= n; j += N) acc = hn::MulAdd(hn::LoadU(d, a + j), hn::LoadU(d, b + j), acc);
  float total = hn::GetLane(hn::SumOfLanes(d, acc));
  for (; j < n; ++j) total += a[j] * b[j];
  return total;
}

// GELU(x) = x·Φ(x) = ½x·erfc(−x/√2), with erfc by the Chebyshev fit of Numerical Recipes (2nd ed.,
// §6.2, erfcc): erfc(z) = t·exp(−z² + P(t)), t = 1/(1 + z/2), fractional error < 1.2e-7 for z ≥ 0;
// erfc(−z) = 2 − erfc(z). Working with erfc keeps the relative accuracy where GELU is tiny
// (x ≪ 0), which 1 + erf(x/√2) would lose to cancellation.
template <class D, class V>
HWY_INLINE V GeluErf(D d, V x) {
  const V z = hn::Abs(hn::Mul(x, hn::Set(d, 0.70710678118654752f)));
  const V t = hn::Div(hn::Set(d, 1.0f), hn::MulAdd(z, hn::Set(d, 0.5f), hn::Set(d, 1.0f)));
  V p = hn::Set(d, 0.17087277f);
  p = hn::MulAdd(p, t, hn::Set(d, -0.82215223f));
  p = hn::MulAdd(p, t, hn::Set(d, 1.48851587f));
  p = hn::MulAdd(p, t, hn::Set(d, -1.13520398f));
  p = hn::MulAdd(p, t, hn::Set(d, 0.27886807f));
  p = hn::MulAdd(p, t, hn::Set(d, -0.18628806f));
  p = hn::MulAdd(p, t, hn::Set(d, 0.09678418f));
  p = hn::MulAdd(p, t, hn::Set(d, 0.37409196f));
  p = hn::MulAdd(p, t, hn::Set(d, 1.00002368f));
  p = hn::MulAdd(p, t, hn::Set(d, -1.26551223f));
  // exp(y) = 2^(y·log2 e); y ≤ −1.26 + small, so Exp2's range suffices (underflow → 0).
  const V y = hn::Sub(p, hn::Mul(z, z));
  const V erfc_z = hn::Mul(t, Exp2(d, hn::Mul(y, hn::Set(d, 1.44269504088896341f))));
  // Φ(x) = ½·erfc(−x/√2): for x ≥ 0 that is 1 − ½·erfc(z), for x < 0 it is ½·erfc(z).
  const V half_erfc = hn::Mul(erfc_z, hn::Set(d, 0.5f));
  const V phi =
      hn::IfThenElse(hn::Lt(x, hn::Zero(d)), half_erfc, hn::Sub(hn::Set(d, 1.0f), half_erfc));
  return hn::Mul(x, phi);
}

void GeluRow(float* x, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  int64_t j = 0;
  for (; j + N <= n; j += N) hn::StoreU(GeluErf(d, hn::LoadU(d, x + j)), d, x + j);
  const hn::CappedTag<float, 1> d1;
  for (; j < n; ++j) x[j] = hn::GetLane(GeluErf(d1, hn::Set(d1, x[j])));
}

// LayerNorm of one row in three vector passes: dst = x (+ residual) while summing, the variance
// about the mean (two-pass: no cancellation), then the normalization. Sums run in float32 lanes;
// each lane adds d/N terms, so the mean's error stays near ε·(d/N)·max|x|.
void LayerNormRow(float* dst, const float* x, const float* residual, const float* gamma,
                  const float* beta, int64_t d, float eps) {
  const hn::ScalableTag<float> df;
  const int64_t N = hn::Lanes(df);
  auto acc = hn::Zero(df);
  int64_t j = 0;
  for (; j + N <= d; j += N) {
    auto v = hn::LoadU(df, x + j);
    if (residual != nullptr) v = hn::Add(v, hn::LoadU(df, residual + j));
    hn::StoreU(v, df, dst + j);
    acc = hn::Add(acc, v);
  }
  float sum = hn::GetLane(hn::SumOfLanes(df, acc));
  for (; j < d; ++j) {
    dst[j] = residual != nullptr ? x[j] + residual[j] : x[j];
    sum += dst[j];
  }
  const float mean = sum / static_cast<float>(d);
  const auto m = hn::Set(df, mean);
  acc = hn::Zero(df);
  for (j = 0; j + N <= d; j += N) {
    const auto c = hn::Sub(hn::LoadU(df, dst + j), m);
    acc = hn::MulAdd(c, c, acc);
  }
  float var = hn::GetLane(hn::SumOfLanes(df, acc));
  for (; j < d; ++j) var += (dst[j] - mean) * (dst[j] - mean);
  var /= static_cast<float>(d);
  const float inv = 1.0f / std::sqrt(var + eps);
  const auto vinv = hn::Set(df, inv);
  for (j = 0; j + N <= d; j += N) {
    const auto c = hn::Mul(hn::Sub(hn::LoadU(df, dst + j), m), vinv);
    hn::StoreU(hn::MulAdd(c, hn::LoadU(df, gamma + j), hn::LoadU(df, beta + j)), df, dst + j);
  }
  for (; j < d; ++j) dst[j] = (dst[j] - mean) * inv * gamma[j] + beta[j];
}

float Exp2Approx(float x) {
  const hn::CappedTag<float, 1> d1;
  return hn::GetLane(Exp2(d1, hn::Set(d1, x)));
}

const char* SimdTarget() { return hwy::TargetName(HWY_TARGET); }

}  // namespace qkv::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv::cpu {

HWY_EXPORT(ScaleRow);
HWY_EXPORT(AddBiasRow);
HWY_EXPORT(MaxRow);
HWY_EXPORT(ExpSubRow);
HWY_EXPORT(SoftmaxGradRow);
HWY_EXPORT(DotRow);
HWY_EXPORT(AllFiniteRow);
HWY_EXPORT(Exp2Approx);
HWY_EXPORT(GeluRow);
HWY_EXPORT(LayerNormRow);
HWY_EXPORT(SimdTarget);

void scale_row(float* x, int64_t n, float a) { HWY_DYNAMIC_DISPATCH(ScaleRow)(x, n, a); }
bool add_bias_row(float* x, const float* bias, int64_t n, float a) {
  return HWY_DYNAMIC_DISPATCH(AddBiasRow)(x, bias, n, a);
}
float max_row(const float* x, int64_t n, uint32_t* seen) {
  return HWY_DYNAMIC_DISPATCH(MaxRow)(x, n, seen);
}
float exp_sub_row(const float* s, float* p, int64_t n, float m, float c, float a) {
  return HWY_DYNAMIC_DISPATCH(ExpSubRow)(s, p, n, m, c, a);
}
float softmax_grad_row(const float* p, const float* x, const float* raw, float* ds, int64_t n,
                       float d, float scale) {
  return HWY_DYNAMIC_DISPATCH(SoftmaxGradRow)(p, x, raw, ds, n, d, scale);
}
float dot_row(const float* a, const float* b, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(DotRow)(a, b, n);
}
bool all_finite_row(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(AllFiniteRow)(x, n); }
float exp2_approx(float x) { return HWY_DYNAMIC_DISPATCH(Exp2Approx)(x); }
const char* simd_target() { return HWY_DYNAMIC_DISPATCH(SimdTarget)(); }
void gelu_row(float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(GeluRow)(x, n); }
void layer_norm_row(float* dst, const float* x, const float* residual, const float* gamma,
                    const float* beta, int64_t d, float eps) {
  HWY_DYNAMIC_DISPATCH(LayerNormRow)(dst, x, residual, gamma, beta, d, eps);
}

}  // namespace qkv::cpu
#endif  // HWY_ONCE
