// The bf16 micro-kernels of issue 31 (kernels/cpu/bf16.h, bf16_tile.h), on every SIMD target and,
// on AVX-512 machines with AVX512_BF16, with vdpbf16ps and with its float32 emulation:
// - rounding: to nearest, ties to even, NaN quiet, ±∞ kept, bf16 subnormals flushed to signed
//   zero — against a scalar definition by distances in float64, over every upper half of a float;
// - qk_tile_bf16 and pv_tile_bf16: every output is the chain bf16_tile.h promises (odd product,
//   then even, per pair, in order), bit for bit — so every target and both AVX3 paths give the
//   same bits — and lies within float32's accumulation bound of the float64 product of the
//   rounded inputs, a bound that rejects the same product of the unrounded inputs.
#include "kernels/cpu/bf16_tile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/kernel_samples.h"
#include "simd_targets.h"

namespace qkv::cpu {
namespace {

using qkv_test::normal;
using qkv_test::same_bits;

// float32 → bf16 from the definition: of the two bf16 values around x (x's bits cut to 16, and
// the next one away from zero, read as ±2¹²⁸ past the largest finite value as IEEE 754's
// unbounded exponent has it), the nearer in float64, the one with an even last bit on a tie; then
// a subnormal result becomes zero of x's sign. NaN: the sign and top bits, made quiet.
uint16_t bf16_by_definition(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  if (std::isinf(x)) return static_cast<uint16_t>(bits >> 16);
  const auto below = static_cast<uint16_t>(bits >> 16), above = static_cast<uint16_t>(below + 1);
  auto value = [](uint16_t h) {
    if ((h & 0x7F80) == 0x7F80) return std::copysign(std::ldexp(1.0, 128), h & 0x8000 ? -1.0 : 1.0);
    return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(h) << 16));
  };
  const double to_below = std::abs(static_cast<double>(x) - value(below));
  const double to_above = std::abs(value(above) - static_cast<double>(x));
  uint16_t h = to_below < to_above   ? below
               : to_above < to_below ? above
                                     : (below & 1 ? above : below);
  if ((h & 0x7F80) == 0) h &= 0x8000;
  return h;
}

float bits_to_float(uint32_t b) { return std::bit_cast<float>(b); }

QKV_PER_SIMD_TARGET(Bf16Round);

TEST_P(Bf16Round, NamedCases) {
  struct Case {
    uint32_t in;
    uint16_t out;
    const char* what;
  };
  const Case cases[] = {
      {0x3F800000, 0x3F80, "1 is exact"},
      {0x3F808000, 0x3F80, "1 + 2^-8, a tie, goes to the even 1"},
      {0x3F818000, 0x3F82, "1 + 3·2^-8, a tie, goes to the even 1 + 2^-6"},
      {0x3F808001, 0x3F81, "just above the tie goes up"},
      {0xBF807FFF, 0xBF80, "just below the tie goes down (negative)"},
      {0x7F800000, 0x7F80, "+inf"},
      {0xFF800000, 0xFF80, "-inf"},
      {0x7F7FFFFF, 0x7F80, "FLT_MAX overflows to +inf"},
      {0x7F7F7FFF, 0x7F7F, "just below the largest bf16's rounding edge stays finite"},
      {0xFF7F8000, 0xFF80, "the tie past the largest bf16 overflows to -inf"},
      {0x7FC00000, 0x7FC0, "quiet NaN"},
      {0x7F800001, 0x7FC0, "a signalling NaN with a low payload stays NaN (quiet)"},
      {0xFFA12345, 0xFFE1, "negative signalling NaN: sign and top payload kept"},
      {0x00800000, 0x0080, "2^-126, the smallest normal, stays"},
      {0x007FFFFF, 0x0080, "the largest float subnormal rounds up to a normal"},
      {0x00400000, 0x0000, "2^-127 would be a bf16 subnormal: +0"},
      {0x807F0000, 0x8000, "a negative bf16 subnormal: -0"},
      {0x00000001, 0x0000, "the smallest float subnormal: +0"},
      {0x80000000, 0x8000, "-0 stays -0"},
  };
  for (const Case& c : cases) {
    const float x = bits_to_float(c.in);
    EXPECT_EQ(to_bf16(x), c.out) << c.what;
    EXPECT_EQ(bf16_by_definition(x), c.out) << c.what << " (the test's definition)";
    bf16 v[2] = {1, 1};
    round_bf16_rows(&x, 1, 1, 1, v, 2);
    EXPECT_EQ(v[0], c.out) << c.what << " (round_bf16_rows)";
    EXPECT_EQ(v[1], 0) << "the pad of an odd row";
  }
  EXPECT_TRUE(std::isnan(round_bf16(bits_to_float(0x7F800001))));
}

TEST_P(Bf16Round, EveryUpperHalfAgainstTheDefinition) {
  // Every one of the 65,536 upper halves with the lower halves that matter to rounding (0, the
  // ties and their neighbours, the extremes) and a few random ones.
  std::mt19937 rng(7);
  std::vector<uint32_t> lows = {0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF};
  for (int t = 0; t < 4; ++t) lows.push_back(rng() & 0xFFFF);
  std::vector<float> x;
  for (uint32_t hi = 0; hi < 0x10000; ++hi)
    for (uint32_t lo : lows) x.push_back(bits_to_float(hi << 16 | lo));
  // As rows of an odd width with a stride, so that the vector body, the tail and the pad all run.
  const int64_t D = 1001, ldx = 1003, ldo = 1004, m = static_cast<int64_t>(x.size()) / ldx;
  std::vector<bf16> out(m * ldo, 0xABCD);
  round_bf16_rows(x.data(), ldx, m, D, out.data(), ldo);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t d = 0; d < D; ++d) {
      const float v = x[i * ldx + d];
      const uint16_t want = bf16_by_definition(v);
      ASSERT_EQ(to_bf16(v), want) << "bits " << std::hex << std::bit_cast<uint32_t>(v);
      ASSERT_EQ(out[i * ldo + d], want) << "bits " << std::hex << std::bit_cast<uint32_t>(v);
    }
    ASSERT_EQ(out[i * ldo + D], 0) << "row " << i << "'s pad";
  }
  for (std::size_t j = static_cast<std::size_t>(m * ldx); j < x.size(); ++j)
    ASSERT_EQ(to_bf16(x[j]), bf16_by_definition(x[j]));
}

// ---- the tiles ----

// Runs f once with the target's own path, and on AVX3 with vdpbf16ps also with the emulation,
// naming which ran.
template <class F>
void each_path(F&& f) {
  f(bf16_uses_dot() ? "vdpbf16ps" : "emulation");
  if (bf16_uses_dot()) {
    set_bf16_dot(false);
    EXPECT_FALSE(bf16_uses_dot());
    f("emulation on the dot target");
    set_bf16_dot(true);
  }
}

// a·b + acc for bf16 a, b: exact product, one rounding (an fma equals it).
float add_product(float acc, bf16 a, bf16 b) { return acc + from_bf16(a) * from_bf16(b); }

// γ_k = k·u/(1 − k·u), u = 2⁻²⁴: recursive summation of k + 1 terms (here exact products and the
// starting value) in float32 is within γ_k·Σ|terms| of the exact sum (Higham, Accuracy and
// Stability of Numerical Algorithms, 2nd ed., §4.2, eq. 4.4).
double gamma(int64_t k) {
  const double u = std::ldexp(1.0, -24);
  return k * u / (1 - k * u);
}

std::vector<bf16> rounded(const std::vector<float>& x, int64_t rows, int64_t D, int64_t ldx,
                          int64_t ldo) {
  std::vector<bf16> out(rows * ldo, 0x7FC0);  // NaN where nothing is written
  round_bf16_rows(x.data(), ldx, rows, D, out.data(), ldo);
  return out;
}

QKV_PER_SIMD_TARGET(Bf16Tile);

TEST_P(Bf16Tile, ScoresAreTheChainOfPairsAndWithinFloat32OfTheExactProduct) {
  each_path([&](const std::string& path) {
    for (int64_t D : {1, 2, 3, 7, 64, 65, 128}) {
      for (int64_t n : {1, 15, 16, 17, 48, 49, 100, 257}) {
        const int64_t packed = n + (n % 3 == 0 ? 20 : 0);  // sometimes more keys packed than scored
        const int64_t ldq = bf16_row(D) + 2, ldk = D + 1, lds = padded_keys(packed) + 3;
        const auto qf = normal(13 * D, static_cast<uint32_t>(D), 1);
        const auto kf = normal(packed * ldk, static_cast<uint32_t>(100 + n), 1);
        const auto q = rounded(qf, 13, D, D, ldq);
        std::vector<bf16> kt(bf16_key_panel_elems(packed, D));
        pack_keys_bf16(kf.data(), ldk, packed, D, kt.data());
        for (int64_t m = 1; m <= 13; m += (D == 64 ? 1 : 4)) {
          std::vector<float> s(m * lds, -1), row_max(m, -1e30f);
          const bool with_max = m % 2 == 1;
          qk_tile_bf16(q.data(), ldq, m, kt.data(), n, packed, D, s.data(), lds,
                       with_max ? row_max.data() : nullptr);
          double worst = 0;      // the largest |s − exact| / bound
          double unrounded = 0;  // the same for the exact product of the unrounded inputs
          for (int64_t i = 0; i < m; ++i) {
            float chain_max = -1e30f;
            for (int64_t j = 0; j < n; ++j) {
              float chain = 0;
              double exact = 0, magnitude = 0, exact_fp32_inputs = 0;
              for (int64_t x = 0; x < bf16_row(D); x += 2) {
                for (int64_t d : {x + 1, x}) {
                  const bf16 a = d < D ? q[i * ldq + d] : bf16{0};
                  const bf16 b = d < D ? to_bf16(kf[j * ldk + d]) : bf16{0};
                  chain = add_product(chain, a, b);
                  exact += static_cast<double>(from_bf16(a)) * from_bf16(b);
                  magnitude += std::abs(static_cast<double>(from_bf16(a)) * from_bf16(b));
                  if (d < D)
                    exact_fp32_inputs += static_cast<double>(qf[i * D + d]) * kf[j * ldk + d];
                }
              }
              const float got = s[i * lds + j];
              ASSERT_TRUE(same_bits(got, chain))
                  << path << " D=" << D << " n=" << n << " m=" << m << " (" << i << ", " << j
                  << "): " << got << " vs the chain's " << chain;
              const double bound = gamma(bf16_row(D) - 1) * magnitude;
              if (bound > 0) {
                worst = std::max(worst, std::abs(got - exact) / bound);
                unrounded = std::max(unrounded, std::abs(exact_fp32_inputs - exact) / bound);
              } else {
                ASSERT_EQ(got, 0.0f);
              }
              chain_max = std::max(chain_max, chain);
            }
            if (with_max) {
              ASSERT_EQ(row_max[i], chain_max) << path << " row " << i;
            }
          }
          ASSERT_LE(worst, 1.0) << path << " D=" << D << " n=" << n << " m=" << m;
          // The bound is tight enough to tell bf16 inputs from float32 ones.
          if (D >= 3) {
            ASSERT_GT(unrounded, 1.0) << "D=" << D << " n=" << n << " m=" << m;
          }
        }
      }
    }
  });
}

TEST_P(Bf16Tile, RowMaxOnlyRaises) {
  const int64_t D = 8, n = 20, m = 5, lds = padded_keys(n);
  const auto qf = normal(m * D, 1, 1), kf = normal(n * D, 2, 1);
  const auto q = rounded(qf, m, D, D, D);
  std::vector<bf16> kt(bf16_key_panel_elems(n, D));
  pack_keys_bf16(kf.data(), D, n, D, kt.data());
  std::vector<float> s(m * lds), row_max(m, 1e6f);
  qk_tile_bf16(q.data(), D, m, kt.data(), n, n, D, s.data(), lds, row_max.data());
  for (float v : row_max) EXPECT_EQ(v, 1e6f);
}

TEST_P(Bf16Tile, OutputsAreTheChainOfPairsAndWithinFloat32OfTheExactProduct) {
  each_path([&](const std::string& path) {
    for (int64_t Dv : {1, 7, 16, 21, 32, 40, 64, 111, 128}) {
      for (int64_t n : {1, 2, 5, 30, 31, 300}) {
        for (int64_t j0 : {0, 4}) {
          const int64_t keys = j0 + n + 3, ldv = Dv + 3, ldo = Dv + 2, ldp = bf16_row(n) + 5;
          const auto vf = normal(keys * ldv, static_cast<uint32_t>(Dv + n), 1);
          std::vector<bf16> vp(bf16_value_panel_elems(keys, Dv), 0x7FC0);
          // The tile's keys, and its neighbours, which it must not read.
          pack_values_bf16(vf.data(), ldv, j0, Dv, vp.data(), keys, 0);
          pack_values_bf16(vf.data() + j0 * ldv, ldv, n, Dv, vp.data(), keys, j0);
          std::mt19937 rng(static_cast<uint32_t>(n));
          std::uniform_real_distribution<float> weight(0, 1);
          for (int64_t m = 1; m <= 13; m += (Dv == 64 ? 1 : 3)) {
            std::vector<float> pf(m * n);
            for (float& w : pf) w = weight(rng);
            const auto p = rounded(pf, m, n, n, ldp);
            const auto o0 = normal(m * ldo, static_cast<uint32_t>(m), 1);
            auto o = o0;
            pv_tile_bf16(p.data(), ldp, m, vp.data(), keys, j0, n, Dv, o.data(), ldo);
            double worst = 0, unrounded = 0;
            for (int64_t i = 0; i < m; ++i)
              for (int64_t c = 0; c < Dv; ++c) {
                float chain = o0[i * ldo + c];
                double exact = chain, magnitude = std::abs(exact), exact_fp32_inputs = exact;
                for (int64_t y = 0; y < bf16_row(n); y += 2) {
                  for (int64_t j : {y + 1, y}) {
                    const bf16 a = j < n ? p[i * ldp + j] : bf16{0};
                    const bf16 b = j < n ? to_bf16(vf[(j0 + j) * ldv + c]) : bf16{0};
                    chain = add_product(chain, a, b);
                    const double ab = static_cast<double>(from_bf16(a)) * from_bf16(b);
                    exact += ab;
                    magnitude += std::abs(ab);
                    if (j < n)
                      exact_fp32_inputs +=
                          static_cast<double>(pf[i * n + j]) * vf[(j0 + j) * ldv + c];
                  }
                }
                const float got = o[i * ldo + c];
                ASSERT_TRUE(same_bits(got, chain))
                    << path << " Dv=" << Dv << " n=" << n << " j0=" << j0 << " m=" << m << " (" << i
                    << ", " << c << "): " << got << " vs the chain's " << chain;
                const double bound = gamma(bf16_row(n)) * magnitude;
                worst = std::max(worst, std::abs(got - exact) / bound);
                unrounded = std::max(unrounded, std::abs(exact_fp32_inputs - exact) / bound);
              }
            ASSERT_LE(worst, 1.0) << path << " Dv=" << Dv << " n=" << n << " m=" << m;
            ASSERT_GT(unrounded, 1.0) << "Dv=" << Dv << " n=" << n << " m=" << m;
          }
        }
      }
    }
  });
}

// The dot path and the emulation, side by side on one larger problem of the flash kernels' shape
// (the chain tests above already imply it; this names the comparison the issue asks for).
TEST_P(Bf16Tile, DotAndEmulationGiveTheSameBits) {
  if (!bf16_uses_dot()) GTEST_SKIP() << "no vdpbf16ps on this target";
  const int64_t D = 128, n = 200, m = 37, ldq = D, lds = padded_keys(n);
  const auto q = rounded(normal(m * D, 3, 1), m, D, D, D);
  const auto kf = normal(n * D, 4, 1);
  std::vector<bf16> kt(bf16_key_panel_elems(n, D));
  pack_keys_bf16(kf.data(), D, n, D, kt.data());
  std::vector<float> s_dot(m * lds), s_emu(m * lds), max_dot(m, -1e30f), max_emu(m, -1e30f);
  qk_tile_bf16(q.data(), ldq, m, kt.data(), n, n, D, s_dot.data(), lds, max_dot.data());
  std::vector<bf16> vp(bf16_value_panel_elems(n, D));
  pack_values_bf16(kf.data(), D, n, D, vp.data(), n, 0);
  std::vector<bf16> p(m * bf16_row(n));
  round_bf16_rows(s_dot.data(), lds, m, n, p.data(), bf16_row(n));
  std::vector<float> o_dot = normal(m * D, 5, 1), o_emu = o_dot;
  pv_tile_bf16(p.data(), bf16_row(n), m, vp.data(), n, 0, n, D, o_dot.data(), D);
  set_bf16_dot(false);
  qk_tile_bf16(q.data(), ldq, m, kt.data(), n, n, D, s_emu.data(), lds, max_emu.data());
  pv_tile_bf16(p.data(), bf16_row(n), m, vp.data(), n, 0, n, D, o_emu.data(), D);
  set_bf16_dot(true);
  for (int64_t i = 0; i < m; ++i) {
    ASSERT_TRUE(same_bits(max_dot[i], max_emu[i])) << i;
    for (int64_t j = 0; j < n; ++j) ASSERT_TRUE(same_bits(s_dot[i * lds + j], s_emu[i * lds + j]));
  }
  for (std::size_t e = 0; e < o_dot.size(); ++e) ASSERT_TRUE(same_bits(o_dot[e], o_emu[e])) << e;
}

}  // namespace
}  // namespace qkv::cpu
