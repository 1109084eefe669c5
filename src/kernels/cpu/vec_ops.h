// Row operations of the fused attention kernels, vectorized with Highway and dispatched at run
// time to the best instruction set of the machine (AVX-512, AVX2, SSE4, ...).
#pragma once

#include <cstdint>

namespace qkv::cpu {

// x[j] *= a.
void scale_row(float* x, int64_t n, float a);
// x[j] = (bias[j] == −∞) ? −∞ : x[j] + bias[j]·a, for a contiguous bias row. Returns whether some
// x[j] + bias[j]·a with bias[j] above −∞ came out ±∞: an overflow (or an ∞ already there), which
// would otherwise pass for a mask.
bool add_bias_row(float* x, const float* bias, int64_t n, float a);
// What max_row saw among x[0, n), as bits.
enum : uint32_t { kSawNaNOrPlusInf = 1, kSawMinusInf = 2 };
// max_j x[j] (−∞ for n = 0), and *seen. The max may or may not see a NaN; *seen always does.
float max_row(const float* x, int64_t n, uint32_t* seen);
// p[j] = 2^((a·s[j] − m)·c), returning Σ p[j], with a·s[j] − m in one fused multiply-add.
// With a = 1, c = log2 e: exp(s[j] − m). With a = 1, c = scale·log2 e: exp(scale·(s[j] − m)) for
// raw scores s and a raw max m. With a = scale, c = log2 e: exp(scale·s[j] − lse). The difference
// is formed before any rounding of a large term, so large |s| and |m| lose nothing. Every
// exponent must be ≤ 0 (m at least the largest a·s[j], as in a softmax); exactly 0 where it is
// below −126.5 (−∞ included), exp2_approx's bits from −126 to 0.
float exp_sub_row(const float* s, float* p, int64_t n, float m, float c = 1.44269504088896340736f,
                  float a = 1.0f);
// The softmax backward of one row: with g[j] = (x[j] == −∞) ? 0 : p[j]·(dp[j] − d), writes
// ds[j] = scale·g[j] (ds holds dp on entry) and returns Σ g[j]·raw[j], the row's share of
// ∂loss/∂scale. Masked entries (logit x = −∞) are exactly 0 whatever dp or raw hold there; a
// visible entry whose p underflowed to 0 still passes a NaN in dp through, as the float64
// reference does.
float softmax_grad_row(const float* p, const float* x, const float* raw, float* ds, int64_t n,
                       float d, float scale);
// Whether every x[j] is finite (Σ x[j]·0 is 0 unless some x[j] is NaN or ±∞).
bool all_finite_row(const float* x, int64_t n);
// Σ a[j]·b[j], accumulated in float32 lanes.
float dot_row(const float* a, const float* b, int64_t n);

// x[j] = GELU(x[j]) = x[j]·Φ(x[j]), Φ the standard normal CDF (the erf form BERT uses, not the
// tanh approximation). Relative error a few 1e-7 (tests/kernels/cpu/vec_ops_test.cpp).
void gelu_row(float* x, int64_t n);

// dst = LayerNorm(x + residual)·gamma + beta over one row of d (residual may be null; dst may
// alias x or residual): (v − mean)/√(var + eps), var the biased variance, sums in float32 lanes.
void layer_norm_row(float* dst, const float* x, const float* residual, const float* gamma,
                    const float* beta, int64_t d, float eps);

// 2^x for one float by the same polynomial as exp2_sub_row (for tests of its accuracy).
float exp2_approx(float x);

// The instruction set the row operations dispatch to now, e.g. "AVX2" (for benchmarks' reports
// and for tests that run every compiled target).
const char* simd_target();

}  // namespace qkv::cpu
