// bfloat16 (bf16) values for the opt-in `precision = bf16` of issue 31: the upper 16 bits of a
// float32 — 1 sign bit, the same 8-bit exponent, 7 bits of significand — so a float's range with
// 8 significant bits (unit roundoff 2⁻⁸). Inputs are rounded to bf16 once, here; the products of
// bf16_tile.h accumulate in float32.
//
// The rounding, the same on every machine and every path (scalar below, vectorized in
// round_bf16_rows):
// - round to nearest, ties to even, on the float's bits; finite values that round beyond the
//   largest bf16 (above 3.3961e38, i.e. 0x7F7F8000 and up) become ±∞, as IEEE 754 overflow does;
// - ±∞ stay ±∞; a NaN stays a NaN: its sign and top 7 payload bits are kept and it is made quiet
//   (bit 6 set), so that a signalling NaN whose payload sits in the low 16 bits does not become ∞;
// - a value that rounds to a bf16 subnormal (magnitude below 2⁻¹²⁶ after rounding; float
//   subnormals included) becomes zero of the same sign. vdpbf16ps treats subnormal inputs as zero
//   and flushes subnormal results (Intel SDM, VDPBF16PS: "Output denormals are always flushed to
//   zero and input denormals are always treated as zero"); flushing when rounding means every
//   path — the instruction and the float32 emulation of bf16_tile.h — sees the same inputs.
#pragma once

#include <bit>
#include <cstdint>

namespace qkv::cpu {

using bf16 = uint16_t;  // the bits; arithmetic goes through from_bf16

// float32 → bf16 by the rule above.
inline bf16 to_bf16(float x) {
  uint32_t b = std::bit_cast<uint32_t>(x);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<bf16>((b >> 16) | 0x0040u);
  // Adding 0x7FFF, plus 1 when the kept part is odd, carries into bit 16 exactly when the
  // dropped part is above half, or half with an odd kept part; a carry out of the significand
  // raises the exponent (to ∞ past the largest finite value).
  b += 0x7FFFu + ((b >> 16) & 1u);
  auto h = static_cast<bf16>(b >> 16);
  if ((h & 0x7F80u) == 0) h &= 0x8000u;  // a subnormal result: signed zero
  return h;
}

// bf16 → float32, exact (the bits shifted into the upper half).
inline float from_bf16(bf16 h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// x rounded to bf16 and back: the float32 value a bf16 path computes with.
inline float round_bf16(float x) { return from_bf16(to_bf16(x)); }

// y[i] = round_bf16(x[i]) for i < n (y may be x): values rounded, kept as float32.
inline void round_bf16_floats(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = round_bf16(x[i]);
}

// The number of bf16 elements a row of D values takes in the tiles: D rounded up to even, since
// the products take the elements in pairs.
inline constexpr int64_t bf16_row(int64_t D) { return (D + 1) / 2 * 2; }

// out[i·ldo + d] = to_bf16(x[i·ldx + d]) for i < m, d < D, and out[i·ldo + D] = 0 when D is odd
// (ldo ≥ bf16_row(D)). Vectorized with Highway; the same bits as to_bf16 on every target.
void round_bf16_rows(const float* x, int64_t ldx, int64_t m, int64_t D, bf16* out, int64_t ldo);

// Whether the kernels of bf16_tile.h use vdpbf16ps (AVX-512 BF16) on the AVX3 target: where the
// CPU has it and set_bf16_dot allows (the default). Otherwise — every other target, and AVX3
// when disallowed — they run the float32 emulation, whose bits are the same for normal data
// (bf16_tile.h). The switch lets the tests compare both on one machine.
void set_bf16_dot(bool allowed);
bool bf16_uses_dot();

}  // namespace qkv::cpu
