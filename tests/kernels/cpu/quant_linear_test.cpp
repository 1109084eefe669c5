// The dense layer on a ggml type's blocks (kernels/cpu/quant_linear.h), on every SIMD target (and
// on AVX-512 with and without VNNI), for every type it reads:
// - float32: the bits of packed_linear on the matrix dequantized by core/gguf.h's dequantize()
//   (itself checked bit for bit against gguf-py: tests/core/ggml_quants_test.cpp);
// - int8: x's quantization as documented (q = round(x/d), d = max|x|/127, sums of 16), and each
//   output within float32's rounding of the float64 product of the dequantized row with the
//   dequantized q·d, and within the documented bound of the exact product with x.
#include "kernels/cpu/quant_linear.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/ggml_quants.h"
#include "core/gguf.h"
#include "core/half.h"
#include "kernels/cpu/kernel_samples.h"
#include "kernels/cpu/packed_linear.h"
#include "kernels/cpu/quant_blocks.h"
#include "simd_targets.h"

namespace qkv::cpu {
namespace {

using qkv_test::normal;
using qkv_test::same_bits;

constexpr uint32_t kTypes[] = {8, 2, 3, 6, 7, 12, 13, 14, 1, 30};  // Q8_0 … Q6_K, F16, BF16

// x to f16 by truncating its mantissa (the scales need not be rounded to nearest: they only need to
// be f16 values); magnitudes below f16's smallest normal become 0.
uint16_t to_f16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const int exponent = static_cast<int>((bits >> 23) & 0xFF) - 127 + 15;
  if (exponent <= 0) return sign;
  return static_cast<uint16_t>(sign | exponent << 10 | ((bits >> 13) & 0x3FF));
}

// out rows of `in` values of `type`: random bytes, the f16 scales set to finite values of the
// sizes real files have (Q6_K's int8 scales and the K-quants' 6-bit ones stay random).
QuantMatrix random_matrix(uint32_t type, int64_t out, int64_t in, unsigned seed) {
  std::mt19937 gen(seed);
  QuantMatrix w{.type = type, .out = out, .in = in, .row_bytes = ggml_bytes(type, in)};
  auto data = std::make_shared<AlignedBuffer<std::byte>>(w.row_bytes * out);
  for (std::size_t i = 0; i < data->size(); ++i) (*data)[i] = static_cast<std::byte>(gen());
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  auto put = [&](std::byte* p, float v) {
    const uint16_t h = to_f16(v);
    std::memcpy(p, &h, 2);
  };
  const GgmlBlock block = ggml_block(type);
  for (uint64_t at = 0; at < data->size(); at += block.bytes) {
    std::byte* p = data->data() + at;
    switch (type) {
      case 1:  // F16: a normal value
      case 30:
        if (type == 1)
          put(p, std::normal_distribution<float>(0, 0.1f)(gen));
        else {
          const float v = std::normal_distribution<float>(0, 0.1f)(gen);
          uint32_t bits;
          std::memcpy(&bits, &v, 4);
          const auto h = static_cast<uint16_t>(bits >> 16);
          std::memcpy(p, &h, 2);
        }
        break;
      case 14:
        put(p + 208, scale(gen));
        break;
      default:
        put(p, scale(gen));
        if (type == 3 || type == 7 || type == 12 || type == 13) put(p + 2, -scale(gen));
    }
  }
  w.data = std::move(data);
  return w;
}

std::vector<float> dequantized(const QuantMatrix& w) {
  std::vector<float> out(static_cast<std::size_t>(w.out * w.in));
  for (int64_t o = 0; o < w.out; ++o) dequantize(w.type, w.row(o), out.data() + o * w.in, w.in);
  return out;
}

std::string name(uint32_t type) { return ggml_type_label(type); }

QKV_PER_SIMD_TARGET(QuantLinearKernel);

TEST_P(QuantLinearKernel, Float32IsPackedLinearOfTheDequantizedMatrixBitForBit) {
  for (const uint32_t type : kTypes) {
    const int64_t in = 512, out = 37;
    const QuantMatrix w = random_matrix(type, out, in, type);
    const std::vector<float> dense = dequantized(w);
    const auto b = normal(out, 3, 1);
    const PackedLinear p = pack_linear(dense.data(), b.data(), out, in);
    for (const int64_t n : {1, 7, 13}) {
      const int64_t ldx = in + 3, ldy = out + 2;
      const auto x = normal(n * ldx, 1 + n, 1);
      std::vector<float> want(n * ldy, 0), got(n * ldy, 0);
      packed_linear(want.data(), ldy, x.data(), ldx, n, p, Activation::none, 1);
      for (int threads : {1, 2}) {
        quant_linear(got.data(), ldy, x.data(), ldx, n, w, b.data(), QuantProduct::float32,
                     threads);
        for (int64_t i = 0; i < n * ldy; ++i)
          ASSERT_TRUE(same_bits(got[i], want[i]))
              << name(type) << " n=" << n << " threads=" << threads << " at " << i << ": "
              << got[i] << " vs " << want[i];
      }
    }
  }
}

TEST_P(QuantLinearKernel, QuantizedRowsAreRoundedToScalesOfTheirBlocks) {
  const int64_t in = 512;
  auto x = normal(in, 5, 2);
  std::fill_n(x.begin() + 256, 256, 0.0f);  // a block of zeros either way: d = 0, q = 0
  for (const int64_t block : {32, 256}) {
    std::vector<int8_t> q(in);
    std::vector<float> d(in / block);
    std::vector<int16_t> s16(in / 16);
    quantize_row_int8(x.data(), in, block, q.data(), d.data(), s16.data());
    for (int64_t b = 0; b < in / block; ++b) {
      float amax = 0;
      for (int64_t j = 0; j < block; ++j) amax = std::max(amax, std::fabs(x[block * b + j]));
      EXPECT_EQ(d[b], amax / 127) << block << " " << b;
      for (int64_t j = 0; j < block; ++j) {
        const int64_t i = block * b + j;
        EXPECT_LE(std::abs(q[i]), 127);
        EXPECT_LE(std::fabs(q[i] * d[b] - x[i]), d[b] / 2 * (1 + 1e-6)) << i;
      }
    }
    for (int64_t g = 0; g < in / 16; ++g) {
      int32_t sum = 0;
      for (int t = 0; t < 16; ++t) sum += q[16 * g + t];
      EXPECT_EQ(s16[g], sum) << g;
    }
    EXPECT_EQ(d[256 / block], 0.0f);
  }
  EXPECT_EQ(int8_block(2), 32);    // Q4_0
  EXPECT_EQ(int8_block(8), 32);    // Q8_0
  EXPECT_EQ(int8_block(12), 256);  // Q4_K
  EXPECT_EQ(int8_block(14), 256);  // Q6_K
}

// For each output: the int8 result against (1) the float64 product of the dequantized row with
// q·d (what the integers compute), within float32's rounding; (2) the exact product with x, within
// the bound of x's rounding, Σ_b d_b/2 · Σ_{k in b} |w_k|.
struct Int8Check {
  double worst_rounding = 0, worst_bound_use = 0;
  std::string failure;
};
Int8Check check_int8(const QuantMatrix& w, const std::vector<float>& dense, const float* x,
                     int64_t n, const std::vector<float>& y, const float* bias) {
  Int8Check c;
  const int64_t in = w.in, block = int8_block(w.type);
  std::vector<int8_t> q(in);
  std::vector<float> d(in / block);
  std::vector<int16_t> s16(in / 16);
  for (int64_t r = 0; r < n && c.failure.empty(); ++r) {
    quantize_row_int8(x + r * in, in, block, q.data(), d.data(), s16.data());
    for (int64_t o = 0; o < w.out; ++o) {
      const float* wo = dense.data() + o * in;
      double of_q = bias[o], exact = bias[o], magnitude = std::fabs(bias[o]), bound = 0;
      for (int64_t k = 0; k < in; ++k) {
        of_q += double{wo[k]} * q[k] * d[k / block];
        exact += double{wo[k]} * x[r * in + k];
        magnitude += std::fabs(double{wo[k]} * q[k] * d[k / block]);
        bound += std::fabs(wo[k]) * d[k / block] / 2;
      }
      const double got = y[r * w.out + o];
      // float32 sums of `in` terms, in blocks, and a few scale products: 32·ε of the magnitude
      // (in·ε would be the worst case of one chain; measured: at most 0.03 of 32·ε).
      const double rounding = std::fabs(got - of_q) / (magnitude * 32 * 0x1p-24 + 1e-30);
      const double use = std::fabs(got - exact) / (bound * (1 + 1e-3) + magnitude * 32 * 0x1p-24);
      c.worst_rounding = std::max(c.worst_rounding, rounding);
      c.worst_bound_use = std::max(c.worst_bound_use, use);
      if (rounding > 1 || use > 1) {
        c.failure = "row " + std::to_string(r) + ", output " + std::to_string(o) + ": " +
                    std::to_string(got) + " vs " + std::to_string(of_q) + " (of q·d), " +
                    std::to_string(exact) + " (exact)";
        break;
      }
    }
  }
  return c;
}

void expect_int8_within_bounds(uint32_t type, const std::string& where) {
  const int64_t in = 768, out = 45;
  const QuantMatrix w = random_matrix(type, out, in, 100 + type);
  const std::vector<float> dense = dequantized(w);
  const auto b = normal(out, 7, 0.5f);
  for (const int64_t n : {1, 3}) {
    const auto x = normal(n * in, 11 + n, 1);
    std::vector<float> y(n * out);
    for (int threads : {1, 2}) {
      quant_linear(y.data(), out, x.data(), in, n, w, b.data(), QuantProduct::int8, threads);
      const Int8Check c = check_int8(w, dense, x.data(), n, y, b.data());
      EXPECT_EQ(c.failure, "") << name(type) << " " << where << " n=" << n;

      // The check would see an error of one bound's size (a perturbed output).
      if (n == 1 && threads == 1) {
        auto wrong = y;
        wrong[5] += 1e-3f * (1 + std::fabs(wrong[5]));
        EXPECT_NE(check_int8(w, dense, x.data(), n, wrong, b.data()).failure, "") << name(type);
      }
    }
  }
}

TEST_P(QuantLinearKernel, Int8IsTheIntegerProductWithinFloat32Rounding) {
  for (const uint32_t type : kTypes)
    if (quant_has_int8(type)) expect_int8_within_bounds(type, hwy::TargetName(GetParam()));
  if (int8_uses_vnni()) {  // the AVX2 multiply-adds on the same target, too
    set_int8_vnni(false);
    EXPECT_FALSE(int8_uses_vnni());
    for (const uint32_t type : kTypes)
      if (quant_has_int8(type)) expect_int8_within_bounds(type, "AVX3 without VNNI");
    set_int8_vnni(true);
  }
}

// x with a NaN or an ∞ (weights that overflow float32): every output NaN, as float32's products
// would make them, never a number from an int8 rounding of NaN.
TEST_P(QuantLinearKernel, Int8OfANonFiniteRowIsNaN) {
  for (const uint32_t type : kTypes) {
    if (!quant_has_int8(type)) continue;
    const int64_t in = 512, out = 9;
    const QuantMatrix w = random_matrix(type, out, in, 300 + type);
    for (const float bad : {NAN, INFINITY}) {
      auto x = normal(in, 31, 1);
      x[300] = bad;
      std::vector<float> y(out);
      quant_linear(y.data(), out, x.data(), in, 1, w, nullptr, QuantProduct::int8, 1);
      for (int64_t o = 0; o < out; ++o) EXPECT_TRUE(std::isnan(y[o])) << name(type) << " " << o;
    }
  }
}

TEST(QuantLinearKernel, Int8AgreesWithThePortableDotOnEveryType) {
  // The SIMD dot and the portable one sum in different orders: agreement to float32's rounding of
  // the magnitude, on a row with every value of x's int8 range.
  const int64_t in = 512;
  auto x = normal(in, 21, 3);
  x[7] = 1000, x[300] = -1000;  // blocks whose other values round to small q
  for (const uint32_t type : kTypes) {
    if (!quant_has_int8(type)) {
      EXPECT_EQ(type == 1 || type == 30, true);
      continue;
    }
    const int64_t block = int8_block(type);
    std::vector<int8_t> q(in);
    std::vector<float> d(in / block);
    std::vector<int16_t> s16(in / 16);
    quantize_row_int8(x.data(), in, block, q.data(), d.data(), s16.data());
    const QuantizedRow row{q.data(), d.data(), s16.data(), block};
    const QuantMatrix w = random_matrix(type, 3, in, 200 + type);
    for (int64_t o = 0; o < 3; ++o) {
      const float simd = quant_dot_int8(type, w.row(o), row, in);
      const float portable =
          quant_dot_portable(type, reinterpret_cast<const uint8_t*>(w.row(o)), row, in);
      EXPECT_NEAR(simd, portable, 1e-4 * (1 + std::fabs(portable))) << name(type) << " row " << o;
    }
  }
}

}  // namespace
}  // namespace qkv::cpu
