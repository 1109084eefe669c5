// float32 ↔ bfloat16 and float32 ↔ IEEE binary16 (fp16) on uint16_t storage, written as plain
// integer arithmetic so that nvcc (device code) and the host compiler (the tests' emulator, the
// launchers) give the same bits: the kernels round P, dS and their outputs with these functions,
// and the tests round the inputs with them.
//
// Both roundings are IEEE 754's round to nearest, ties to even, on the float's bits:
// - bf16: the upper half of the float, rounded. Equal to kernels/cpu/bf16.h's to_bf16 wherever the
//   result is a normal number, zero, ±∞ or NaN (NaN: sign and top 7 payload bits kept, made quiet).
//   Unlike to_bf16, a result below 2⁻¹²⁶ is NOT flushed to zero: it rounds to the nearest bf16
//   subnormal, as the GPU's cvt.rn.bf16.f32 does and as its tensor cores read bf16 subnormals
//   (to_bf16 flushes because vdpbf16ps treats them as zero; the GPU has no such reason).
// - fp16: 1 sign, 5 exponent (bias 15), 10 significand bits; finite values from 65520 up round to
//   ±∞ (65504 is the largest half, 65520 the tie that rounds to even, i.e. up); magnitudes below
//   2⁻¹⁴ round to the nearest subnormal (multiple of 2⁻²⁴), down to ±0; NaN keeps its sign and
//   top 10 payload bits and is made quiet (bit 9).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/simt.h"

namespace qkv::cuda::kernel {
inline namespace QKV_SIMT_NAMESPACE {

QKV_HOST_DEVICE uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
#endif
}

QKV_HOST_DEVICE float bits_float(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float x;
  std::memcpy(&x, &b, 4);
  return x;
#endif
}

QKV_HOST_DEVICE uint16_t float_to_bf16(float x) {
  uint32_t b = float_bits(x);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((b >> 16) | 0x0040u);
  // + 0x7FFF (+1 when the kept part is odd) carries into bit 16 exactly when the dropped half is
  // above one half, or one half with an odd kept part; the carry may raise the exponent (to ∞
  // past the largest finite bf16, from a subnormal to the smallest normal).
  b += 0x7FFFu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(b >> 16);
}

QKV_HOST_DEVICE float bf16_to_float(uint16_t h) {
  return bits_float(static_cast<uint32_t>(h) << 16);
}

QKV_HOST_DEVICE uint16_t float_to_f16(float x) {
  const uint32_t b = float_bits(x);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  const uint32_t a = b & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // ≥ 65520 (∞ included)
  if (a >= 0x38800000u) {
    // Normal: rebias the exponent (127 → 15, i.e. subtract 112 << 23), then round away 13 bits
    // as float_to_bf16 rounds away 16; a carry into the exponent is the right result.
    uint32_t r = a - 0x38000000u;
    r += 0x0FFFu + ((r >> 13) & 1u);
    return static_cast<uint16_t>(sign | (r >> 13));
  }
  if (a <= 0x33000000u) return sign;  // ≤ 2⁻²⁵: rounds to zero (2⁻²⁵ is the tie, to even 0)
  // Subnormal: the value in units of 2⁻²⁴ is m·2^(e − 126) with m the 24-bit significand and
  // e the biased exponent (102 ≤ e ≤ 112 here), so a right shift by 126 − e (14 to 24), rounded.
  const uint32_t e = a >> 23;
  const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;
  uint32_t r = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (r & 1u))) ++r;  // r = 0x400 is the smallest normal: right
  return static_cast<uint16_t>(sign | r);
}

QKV_HOST_DEVICE float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1Fu) return bits_float(sign | 0x7F800000u | (m << 13));  // ±∞, NaN (payload kept)
  if (e != 0) return bits_float(sign | ((e + 112u) << 23) | (m << 13));
  // Zero or subnormal: m·2⁻²⁴, exact in float32 (m < 2¹⁰).
  const float magnitude = static_cast<float>(m) * 5.9604644775390625e-8f;
  return bits_float(sign | float_bits(magnitude));
}

// The element type as a template parameter of the kernels.
template <simt::Half16 kType>
QKV_HOST_DEVICE uint16_t to_half(float x) {
  if constexpr (kType == simt::Half16::bf16)
    return float_to_bf16(x);
  else
    return float_to_f16(x);
}
template <simt::Half16 kType>
QKV_HOST_DEVICE float from_half(uint16_t h) {
  if constexpr (kType == simt::Half16::bf16)
    return bf16_to_float(h);
  else
    return f16_to_float(h);
}
// Whether a stored element is ±∞ or NaN (its exponent field all ones).
template <simt::Half16 kType>
QKV_HOST_DEVICE bool half_not_finite(uint16_t h) {
  if constexpr (kType == simt::Half16::bf16)
    return (h & 0x7F80u) == 0x7F80u;
  else
    return (h & 0x7C00u) == 0x7C00u;
}
// Two floats rounded into one register, `lo` the lower-numbered element (mma.cuh's order).
template <simt::Half16 kType>
QKV_HOST_DEVICE uint32_t pack_half2(float lo, float hi) {
  return simt::pack16(to_half<kType>(lo), to_half<kType>(hi));
}

}  // namespace QKV_SIMT_NAMESPACE
}  // namespace qkv::cuda::kernel
