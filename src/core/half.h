// core/half.h — the 16-bit floats model files store and GPUs compute in: IEEE 754 binary16 (F16)
// and bfloat16 (BF16), widened to float32 exactly (the safetensors and GGUF readers) and
// float32 narrowed to them (the device arrays of qkv/device.h).
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

// float32 → binary16, IEEE 754's round to nearest, ties to even: finite values from 65520 up (the
// tie above the largest half, 65504) become ±∞; magnitudes below 2⁻¹⁴ round to the nearest
// subnormal (a multiple of 2⁻²⁴), down to ±0; a NaN stays a NaN, its sign and top 10 payload bits
// kept, made quiet.
inline uint16_t float_to_half(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t a = bits & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // ≥ 65520, ∞ included
  if (a < 0x38800000u) {
    // Below 2⁻¹⁴: a count of 2⁻²⁴, exact in float32 before rounding (|x|·2²⁴ < 2¹⁰), rounded by
    // nearbyint in the default mode, ties to even. 0x400 is the smallest normal, rightly.
    const float units = std::bit_cast<float>(a) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(units)));
  }
  // Normal: keep 10 of the 23 fraction bits — adding 0xFFF, one more when the kept part is odd,
  // carries into bit 13 exactly when the dropped part is above half, or half with an odd kept
  // part (a carry into the exponent is right) — and move the exponent's bias from 127 to 15.
  const uint32_t rounded = a + 0x0FFFu + ((a >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - (112u << 23)) >> 13));
}

// float32 → bfloat16 by the same rule on the float's top half: overflow to ±∞, subnormals kept
// (as the GPU's cvt.rn.bf16.f32 and PyTorch's .to(torch.bfloat16) keep them), a NaN's sign and top
// 7 payload bits kept, made quiet. (kernels/cpu/bf16.h's to_bf16 differs in one way: it flushes
// subnormal results to zero, as the CPU's vdpbf16ps reads them.)
inline uint16_t float_to_bf16(float x) {
  uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace qkv
