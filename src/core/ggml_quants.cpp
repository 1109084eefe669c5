// The ggml types' blocks, dequantized to float32 as ggml's reference does: the layouts are in
// gguf.h's GgmlType. Learned from ggml's src/ggml-quants.c (dequantize_row_q4_0 … _q6_K,
// get_scale_min_k4) and src/ggml-common.h (the block_* structs), and from the gguf package's
// gguf/quants.py; the code is qkv's own. The results are the reference's to the bit
// (tests/core/ggml_quants_test.cpp against gguf's outputs), whatever the order of the products
// and whether the compiler fuses a multiply and an add: an f16 scale has at most 11 significant
// bits, so every product is exact in float32 (24 bits) — the widest, Q6_K's d·sc·q, has
// 11 + 7 + 6. A value is rounded once, where the minimum is added — as in the reference, and as
// in one fused multiply-add. (Checked: built with -mfma -ffp-contract=fast, whose code fuses,
// the comparison still passes bit for bit.)
#include "core/ggml_quants.h"

#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "core/half.h"

namespace qkv {
namespace {

constexpr int64_t kQK = 32;     // values in a block of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
constexpr int64_t kQK_K = 256;  // values in a super-block of the K-quants

float f16_at(const uint8_t* p) { return half_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8))); }

uint32_t u32_at(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

// Q8_0: d | 32 int8 q; x = q·d.
void dequantize_q8_0(const uint8_t* __restrict p, float* __restrict out) {
  const float d = f16_at(p);
  for (int64_t j = 0; j < kQK; ++j) out[j] = static_cast<float>(static_cast<int8_t>(p[2 + j])) * d;
}

// Q4_0 (x = (q − 8)·d) and Q4_1 (x = q·d + m): byte j of qs holds q_j low, q_{j+16} high. Q4_0
// adds no m: q·d + 0 would turn ggml's −0 (a negative q times a zero d) into +0.
template <bool kWithMin>
void dequantize_q4(const uint8_t* __restrict p, float* __restrict out) {
  const float d = f16_at(p), m = kWithMin ? f16_at(p + 2) : 0.0f;
  const uint8_t* qs = p + (kWithMin ? 4 : 2);
  for (int64_t j = 0; j < kQK / 2; ++j) {
    const int lo = qs[j] & 0x0F, hi = qs[j] >> 4;
    if constexpr (kWithMin) {
      out[j] = static_cast<float>(lo) * d + m;
      out[j + kQK / 2] = static_cast<float>(hi) * d + m;
    } else {
      out[j] = static_cast<float>(lo - 8) * d;
      out[j + kQK / 2] = static_cast<float>(hi - 8) * d;
    }
  }
}

// Q5_0 (x = (q − 16)·d) and Q5_1 (x = q·d + m): Q4's nibbles, and the fifth bit of q_i bit i of
// the little-endian u32 qh. The fifth bits are spread into bytes first (one shift at a time, as
// SSE2 has no per-lane variable shift), so that the loop over values vectorizes.
template <bool kWithMin>
void dequantize_q5(const uint8_t* __restrict p, float* __restrict out) {
  const float d = f16_at(p), m = kWithMin ? f16_at(p + 2) : 0.0f;
  const uint8_t* after_scales = p + (kWithMin ? 4 : 2);
  uint32_t qh = u32_at(after_scales);
  uint8_t fifth[kQK];  // 16 where q_i's fifth bit is set
  for (int64_t i = 0; i < kQK; ++i, qh >>= 1) fifth[i] = static_cast<uint8_t>((qh & 1) << 4);
  const uint8_t* qs = after_scales + 4;
  for (int64_t j = 0; j < kQK / 2; ++j) {
    const int lo = (qs[j] & 0x0F) | fifth[j], hi = (qs[j] >> 4) | fifth[j + kQK / 2];
    if constexpr (kWithMin) {
      out[j] = static_cast<float>(lo) * d + m;
      out[j + kQK / 2] = static_cast<float>(hi) * d + m;
    } else {
      out[j] = static_cast<float>(lo - 16) * d;
      out[j + kQK / 2] = static_cast<float>(hi - 16) * d;
    }
  }
}

// Sub-block j's 6-bit scale and minimum from Q4_K's and Q5_K's 12 packed bytes s: the first four
// whole in the low 6 bits of s[0..3] and s[4..7]; the last four with their low 4 bits in s[8..11]
// and their top 2 in the spare top bits of s[0..3] (scales) and s[4..7] (minimums).
struct ScaleMin {
  int scale, min;
};
ScaleMin k_scale_min(const uint8_t* s, int j) {
  if (j < 4) return {s[j] & 63, s[j + 4] & 63};
  return {(s[j + 4] & 0x0F) | (s[j - 4] >> 6) << 4, (s[j + 4] >> 4) | (s[j] >> 6) << 4};
}

// Q4_K (kFifthBit false) and Q5_K: four groups of 64 values, each from 32 bytes of qs, low
// nibbles sub-block 2i, high ones 2i + 1; Q5_K adds 16 where qh[l]'s bit 2i (low) or 2i + 1 (high)
// is set. x = (d·sc)·q − dmin·m, d·sc and dmin·m once per sub-block as ggml computes them.
template <bool kFifthBit>
void dequantize_q45_k(const uint8_t* __restrict p, float* __restrict out) {
  const float d = f16_at(p), dmin = f16_at(p + 2);
  const uint8_t* scales = p + 4;
  const uint8_t* qh = scales + 12;
  const uint8_t* qs = kFifthBit ? qh + kQK_K / 8 : qh;
  for (int i = 0; i < 4; ++i, qs += 32, out += 64) {
    const ScaleMin low = k_scale_min(scales, 2 * i), high = k_scale_min(scales, 2 * i + 1);
    const float d_low = d * static_cast<float>(low.scale);
    const float m_low = dmin * static_cast<float>(low.min);
    const float d_high = d * static_cast<float>(high.scale);
    const float m_high = dmin * static_cast<float>(high.min);
    for (int l = 0; l < 32; ++l) {
      int q_low = qs[l] & 0x0F, q_high = qs[l] >> 4;
      if constexpr (kFifthBit) {
        q_low += (qh[l] >> (2 * i)) & 1 ? 16 : 0;
        q_high += (qh[l] >> (2 * i + 1)) & 1 ? 16 : 0;
      }
      out[l] = d_low * static_cast<float>(q_low) - m_low;
      out[32 + l] = d_high * static_cast<float>(q_high) - m_high;
    }
  }
}

// Q6_K: two halves of 128 values; in half h value 32k + l takes its low 4 bits from
// ql[64h + 32·(k & 1) + l] (the low nibble for k < 2), its top 2 from qh[32h + l] >> 2k, and the
// int8 scale sc[8h + 2k + l / 16]. x = (d·sc)·(q − 32), d·sc first as ggml computes it.
void dequantize_q6_k(const uint8_t* __restrict p, float* __restrict out) {
  const uint8_t* ql = p;
  const uint8_t* qh = p + kQK_K / 2;
  const auto* sc = reinterpret_cast<const int8_t*>(qh + kQK_K / 4);
  const float d = f16_at(p + kQK_K / 2 + kQK_K / 4 + kQK_K / 16);
  float d_sc[kQK_K / 16];
  for (int i = 0; i < kQK_K / 16; ++i) d_sc[i] = d * static_cast<float>(sc[i]);
  for (int h = 0; h < 2; ++h, ql += 64, qh += 32, out += 128) {
    for (int l = 0; l < 32; ++l) {
      const float* s = d_sc + 8 * h + l / 16;
      const int q0 = ((ql[l] & 0x0F) | (qh[l] & 3) << 4) - 32;
      const int q1 = ((ql[l + 32] & 0x0F) | ((qh[l] >> 2) & 3) << 4) - 32;
      const int q2 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
      const int q3 = ((ql[l + 32] >> 4) | (qh[l] >> 6) << 4) - 32;
      out[l] = s[0] * static_cast<float>(q0);
      out[l + 32] = s[2] * static_cast<float>(q1);
      out[l + 64] = s[4] * static_cast<float>(q2);
      out[l + 96] = s[6] * static_cast<float>(q3);
    }
  }
}

// The blocks' bytes and the floats never overlap: __restrict lets the compiler keep the scales
// and the bytes in registers across the stores (a float store could otherwise change a byte read
// through uint8_t) and vectorize the loops: Q4_0 and Q4_1 3× faster than without (measured on
// one thread, 4M values).
using BlockDequantizer = void (*)(const uint8_t* __restrict, float* __restrict);

// A quantized type's one-block dequantizer; nullptr for a float type or one qkv does not read.
BlockDequantizer block_dequantizer(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::q4_0:
      return dequantize_q4<false>;
    case GgmlType::q4_1:
      return dequantize_q4<true>;
    case GgmlType::q5_0:
      return dequantize_q5<false>;
    case GgmlType::q5_1:
      return dequantize_q5<true>;
    case GgmlType::q8_0:
      return dequantize_q8_0;
    case GgmlType::q4_k:
      return dequantize_q45_k<false>;
    case GgmlType::q5_k:
      return dequantize_q45_k<true>;
    case GgmlType::q6_k:
      return dequantize_q6_k;
    default:
      return nullptr;
  }
}

// ggml.h's enum ggml_type, by number; "" for numbers it leaves unused (4, 5, 31–33, 36–38: types
// it has removed).
const char* ggml_name(uint32_t type) {
  static constexpr const char* kNames[] = {
      "F32",     "F16",   "Q4_0",   "Q4_1",  "",      "",       "Q5_0", "Q5_1",    "Q8_0",
      "Q8_1",    "Q2_K",  "Q3_K",   "Q4_K",  "Q5_K",  "Q6_K",   "Q8_K", "IQ2_XXS", "IQ2_XS",
      "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8",   "I16",     "I32",
      "I64",     "F64",   "IQ1_M",  "BF16",  "",      "",       "",     "TQ1_0",   "TQ2_0",
      "",        "",      "",       "MXFP4", "NVFP4", "Q1_0",   "Q2_0"};
  return type < std::size(kNames) ? kNames[type] : "";
}

}  // namespace

GgmlBlock ggml_block(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::f32:
      return {1, 4};
    case GgmlType::f16:
    case GgmlType::bf16:
      return {1, 2};
    case GgmlType::q4_0:
      return {kQK, 2 + kQK / 2};
    case GgmlType::q4_1:
      return {kQK, 4 + kQK / 2};
    case GgmlType::q5_0:
      return {kQK, 2 + 4 + kQK / 2};
    case GgmlType::q5_1:
      return {kQK, 4 + 4 + kQK / 2};
    case GgmlType::q8_0:
      return {kQK, 2 + kQK};
    case GgmlType::q4_k:
      return {kQK_K, 4 + 12 + kQK_K / 2};
    case GgmlType::q5_k:
      return {kQK_K, 4 + 12 + kQK_K / 8 + kQK_K / 2};
    case GgmlType::q6_k:
      return {kQK_K, kQK_K / 2 + kQK_K / 4 + kQK_K / 16 + 2};
  }
  return {};
}

const char* ggml_types_read() {
  return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K";
}

std::string ggml_type_name(uint32_t type) {
  const std::string name = ggml_name(type);
  return name.empty() ? "type " + std::to_string(type) : name;
}

std::string ggml_type_label(uint32_t type) {
  const std::string name = ggml_name(type);
  return "type " + std::to_string(type) + (name.empty() ? "" : " (" + name + ")");
}

uint64_t ggml_bytes(uint32_t type, uint64_t n) {
  const GgmlBlock block = ggml_block(type);
  if (block.bytes == 0 || n % static_cast<uint64_t>(block.values) != 0) return 0;
  const uint64_t blocks = n / static_cast<uint64_t>(block.values);
  return blocks > std::numeric_limits<uint64_t>::max() / block.bytes ? 0 : blocks * block.bytes;
}

void dequantize(uint32_t type, const std::byte* data, float* out, int64_t n) {
  const auto* p = reinterpret_cast<const uint8_t*>(data);
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::f32:
      std::memcpy(out, p, static_cast<std::size_t>(n) * 4);
      return;
    case GgmlType::f16:
      for (int64_t i = 0; i < n; ++i) out[i] = f16_at(p + 2 * i);
      return;
    case GgmlType::bf16:
      for (int64_t i = 0; i < n; ++i)
        out[i] = bf16_to_float(static_cast<uint16_t>(p[2 * i] | (p[2 * i + 1] << 8)));
      return;
    default:
      break;
  }
  const BlockDequantizer block = block_dequantizer(type);
  if (block == nullptr)
    throw Error("dequantize: " + ggml_type_label(type) + " is not a type qkv reads; expected " +
                ggml_types_read());
  const GgmlBlock size = ggml_block(type);
  if (n < 0 || n % size.values != 0)
    throw Error("dequantize: " + std::to_string(n) + " values of " + ggml_type_name(type) +
                "; expected a multiple of " + std::to_string(size.values));
  for (int64_t b = 0; b < n / size.values; ++b) block(p + b * size.bytes, out + b * size.values);
}

}  // namespace qkv

namespace qkv {
namespace {

// The byte offsets of a block's f16 scales (d, and m or dmin where the type has one); the K-quants'
// 6-bit and Q6_K's int8 sub-block scales are integers, always finite.
std::vector<int> scale_offsets(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::q4_0:
    case GgmlType::q5_0:
    case GgmlType::q8_0:
      return {0};
    case GgmlType::q4_1:
    case GgmlType::q5_1:
    case GgmlType::q4_k:
    case GgmlType::q5_k:
      return {0, 2};
    case GgmlType::q6_k:
      return {208};
    default:
      return {};
  }
}

bool finite_f16(const std::byte* p) {  // exponent bits all ones: ±∞ or NaN
  return ((std::to_integer<unsigned>(p[1]) >> 2) & 0x1F) != 0x1F;
}

}  // namespace

int64_t ggml_first_nonfinite(uint32_t type, const std::byte* data, int64_t n) {
  const GgmlBlock block = ggml_block(type);
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::f32:
      for (int64_t i = 0; i < n; ++i) {
        float v;
        std::memcpy(&v, data + 4 * i, 4);
        if (!std::isfinite(v)) return i;
      }
      return -1;
    case GgmlType::f16:
      for (int64_t i = 0; i < n; ++i)
        if (!finite_f16(data + 2 * i)) return i;
      return -1;
    case GgmlType::bf16:  // exponent bits 7–14 of the u16 all ones
      for (int64_t i = 0; i < n; ++i)
        if (((std::to_integer<unsigned>(data[2 * i + 1]) << 1 |
              std::to_integer<unsigned>(data[2 * i]) >> 7) &
             0xFF) == 0xFF)
          return i;
      return -1;
    default:
      break;
  }
  const std::vector<int> offsets = scale_offsets(type);
  for (int64_t b = 0; b < n / block.values; ++b)
    for (const int at : offsets)
      if (!finite_f16(data + static_cast<uint64_t>(b) * block.bytes + at)) return b * block.values;
  return -1;
}

}  // namespace qkv
