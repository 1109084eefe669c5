// core/half.h — the 16-bit floats model files store, widened to float32 exactly: IEEE 754
// binary16 (F16) and bfloat16 (BF16). Used by the safetensors and GGUF readers. And the one
// rounding of a float32 to bfloat16 that Precision::bf16 (qkv/attention_types.h) means above the
// kernels: the reference path's inputs and the dense layers of a model run in bf16.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace qkv {

// IEEE 754 binary16 → binary32, exact (every half is a float).
inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  if (exponent == 0) {  // zero or subnormal: mantissa × 2^-24
    const float v = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -v : v;
  }
  const uint32_t bits = exponent == 0x1F ? sign | 0x7F800000u | (mantissa << 13)  // inf, NaN
                                         : sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  return std::bit_cast<float>(bits);
}

// bfloat16 is the top half of a binary32.
inline float bf16_to_float(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

// float32 → bfloat16, rounded to nearest, ties to even: the bits of the nearest bfloat16. A
// finite value past bfloat16's largest (3.39e38) rounds to ±∞ as IEEE rounding does; ±∞ stays
// ±∞; NaN stays NaN (its sign kept, made quiet, so that dropping the low half cannot turn it
// into ∞). The kernels round the same way in src/kernels/cpu/bf16.h, written separately for
// their vector code; the two may be unified (until then a test should compare them bit for bit).
inline uint16_t float_to_bf16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u)  // NaN
    return static_cast<uint16_t>((bits | 0x00400000u) >> 16);
  // Adding 0x7FFF and the kept half's lowest bit carries into the kept half exactly when the
  // dropped half is above one half, or equal to it with the kept half odd: ties to even.
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

// x rounded to the nearest bfloat16, as a float32 (exact: every bfloat16 is a float32).
inline float round_to_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

}  // namespace qkv
