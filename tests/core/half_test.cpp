// core/half.h: float32 narrowed to binary16 and bfloat16, round to nearest, ties to even, checked
// on every one of the 65,536 values of each: each comes back as itself, and the floats halfway
// between neighbours — and a hair either side — go where IEEE 754 sends them. The neighbours and
// midpoints are computed in double from the widening (half_to_float, bf16_to_float), which the
// readers' own tests check against files.
#include "core/half.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace {

using qkv::bf16_to_float;
using qkv::float_to_bf16;
using qkv::float_to_half;
using qkv::half_to_float;

struct Format {
  const char* name;
  float (*widen)(uint16_t);
  uint16_t (*narrow)(float);
  uint16_t infinity;  // the bits of +∞
  uint16_t quiet;     // the quiet bit of a NaN
};
const Format kFormats[] = {{"binary16", half_to_float, float_to_half, 0x7C00, 0x0200},
                           {"bfloat16", bf16_to_float, float_to_bf16, 0x7F80, 0x0040}};

bool is_nan_bits(const Format& f, uint16_t h) { return (h & 0x7FFF) > f.infinity; }

TEST(HalfNarrowing, EveryValueComesBackAsItselfAndNaNsComeBackQuiet) {
  for (const Format& f : kFormats)
    for (uint32_t h = 0; h <= 0xFFFF; ++h) {
      const auto bits = static_cast<uint16_t>(h);
      const uint16_t back = f.narrow(f.widen(bits));
      if (is_nan_bits(f, bits))
        EXPECT_EQ(back, bits | f.quiet) << f.name << " NaN " << std::hex << h;
      else
        EXPECT_EQ(back, bits) << f.name << " " << std::hex << h;
    }
}

// For each pair of neighbours a < b among the finite non-negative values (and their negatives):
// the midpoint goes to the one whose last bit is 0, and the floats just below and just above it
// go down and up. The midpoint is exact in float32 (a 16-bit format has at most 11 significant
// bits, so the midpoint has at most 12).
TEST(HalfNarrowing, MidpointsGoToTheEvenNeighbourAndOthersToTheNearest) {
  for (const Format& f : kFormats)
    for (uint16_t a = 0; a < f.infinity; ++a) {
      const auto b = static_cast<uint16_t>(a + 1);  // the next magnitude (b = +∞ past the largest)
      const double lo = f.widen(a);
      // Past the largest finite value, the next "neighbour" is where rounding to ∞ starts: one
      // more step of the top binade (65520 for binary16).
      const double hi =
          b == f.infinity ? 2 * lo - f.widen(static_cast<uint16_t>(a - 1)) : f.widen(b);
      const double mid = (lo + hi) / 2;
      const auto m = static_cast<float>(mid);
      ASSERT_EQ(static_cast<double>(m), mid) << f.name << " " << std::hex << a;
      const uint16_t even = (a & 1) == 0 ? a : b;
      const float below = std::nextafter(m, 0.0f), above = std::nextafter(m, INFINITY);
      for (const float sign : {1.0f, -1.0f}) {
        const uint16_t s = sign < 0 ? 0x8000 : 0;
        EXPECT_EQ(f.narrow(sign * m), even | s) << f.name << " midpoint " << sign * m;
        EXPECT_EQ(f.narrow(sign * below), a | s) << f.name << " below " << sign * below;
        EXPECT_EQ(f.narrow(sign * above), b | s) << f.name << " above " << sign * above;
      }
    }
}

TEST(HalfNarrowing, InfinitiesZerosAndFloatSubnormals) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_half(inf), 0x7C00);
  EXPECT_EQ(float_to_half(-inf), 0xFC00);
  EXPECT_EQ(float_to_half(1e30f), 0x7C00);
  EXPECT_EQ(float_to_half(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);    // the tie between 0 and 2⁻²⁴: to 0
  EXPECT_EQ(float_to_half(0x1.8p-25f), 0x0001);  // above it: 2⁻²⁴
  EXPECT_EQ(float_to_half(0x1p-140f), 0x0000);   // a float subnormal: far below
  EXPECT_EQ(float_to_bf16(inf), 0x7F80);
  EXPECT_EQ(float_to_bf16(3.4e38f), 0x7F80);  // past the largest bf16, 3.3895e38
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  // bf16 subnormals are kept, not flushed (kernels/cpu/bf16.h's to_bf16 flushes them): 2⁻¹³⁰ is
  // exact; 2⁻¹³⁴ is the tie between 0 and 2⁻¹³³ (to 0); 3·2⁻¹³⁴ between 2⁻¹³³ and 2⁻¹³² (to 2⁻¹³²).
  EXPECT_EQ(float_to_bf16(0x1p-130f), 0x0008);
  EXPECT_EQ(float_to_bf16(0x1p-134f), 0x0000);
  EXPECT_EQ(float_to_bf16(0x1.8p-133f), 0x0002);
  // A signalling NaN whose payload is only in the low bits stays a NaN (not ∞), made quiet.
  EXPECT_EQ(float_to_half(std::bit_cast<float>(0x7F800001u)), 0x7E00);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0xFF800001u)), 0xFFC0);
}

}  // namespace
