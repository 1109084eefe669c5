// core/half.h — the 16-bit floats model files store, widened to float32 exactly: IEEE 754
// binary16 (F16) and bfloat16 (BF16). Used by the safetensors and GGUF readers.
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

}  // namespace qkv
