// The int8 dot products of quant_linear.h on x86 with AVX2, one per ggml type: included by
// quant_dot.cpp once per x86 target (and a second time with AVX-512 VNNI enabled), inside a
// namespace that defines
//
//   __m256i DotU8S8(__m256i u, __m256i s)   8 int32 lanes, lane i = Σ u[4i + t]·s[4i + t], t < 4
//
// (AVX2: maddubs then madd with ones — maddubs's int16 pair sums never saturate here, the largest
// being 2·63·127 for Q6_K's 6-bit values, 2·127·127 for Q8_0's; VNNI: one vpdpbusd). No include
// guard, on purpose.
//
// Every block of 32 weights is w = a·q + b with unsigned integers q (Q8_0: signed, made unsigned
// by taking |q| and moving its sign onto x), and x's block is d_x·q_x: Σ w·x = a·d_x·Σ q·q_x
// + b·d_x·Σ q_x. The first sum is 8 int32 lanes, turned to float and accumulated by one
// multiply-add with a·d_x in every lane; the second uses x's sums (s16) in scalar code.

// 32 values in the low and high nibbles of 16 bytes: byte j's low nibble is value j, its high
// nibble value j + 16 (Q4_0 … Q5_1).
HWY_INLINE __m256i Nibbles32(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// Byte i = 16 where bit i of the little-endian u32 at p is set (Q5_0 and Q5_1's fifth bits).
HWY_INLINE __m256i FifthBits32(const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, 4);
  // Byte i of the result looks at byte i / 8 of bits, then at its bit i % 8.
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202,
                         0x0303030303030303));
  const __m256i mask = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask);
  return _mm256_and_si256(set, _mm256_set1_epi8(16));
}

HWY_INLINE __m256i LoadX(const int8_t* q) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
}

HWY_INLINE float Sum8(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

HWY_INLINE float F16At(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// acc += float(Σ q·q_x over the block's 8 lanes)·scale.
HWY_INLINE __m256 Accumulate(__m256 acc, __m256i q, __m256i qx, float scale) {
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(DotU8S8(q, qx)), _mm256_set1_ps(scale), acc);
}

// The legacy types, 32 values a block: the block's unsigned q (kind picks how), a = d, and b =
// −8d (Q4_0), −16d (Q5_0), m (Q4_1, Q5_1).
template <int kType>
float DotLegacy(const uint8_t* row, const QuantizedRow& x, int64_t in) {
  constexpr bool kMin = kType == 3 || kType == 7;   // Q4_1, Q5_1
  constexpr bool kFifth = kType == 6 || kType == 7;  // Q5_0, Q5_1
  constexpr int64_t kBytes = 2 + (kMin ? 2 : 0) + (kFifth ? 4 : 0) + 16;
  __m256 acc = _mm256_setzero_ps();
  float offset = 0;
  for (int64_t b = 0; b < in / 32; ++b, row += kBytes) {
    const float d = F16At(row), dx = x.d[b];
    const uint8_t* after = row + (kMin ? 4 : 2);
    __m256i q = Nibbles32(after + (kFifth ? 4 : 0));
    if constexpr (kFifth) q = _mm256_or_si256(q, FifthBits32(after));
    acc = Accumulate(acc, q, LoadX(x.q + 32 * b), d * dx);
    const auto sum = static_cast<float>(x.s16[2 * b] + x.s16[2 * b + 1]);
    if constexpr (kMin)
      offset += F16At(row + 2) * dx * sum;
    else
      offset -= (kFifth ? 16.0f : 8.0f) * d * dx * sum;
  }
  return Sum8(acc) + offset;
}

// Q8_0: d | 32 signed q. |q| against x's q with q's signs: the same products, u8 × s8.
HWY_INLINE float DotQ8_0(const uint8_t* row, const QuantizedRow& x, int64_t in) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < in / 32; ++b, row += 34) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2));
    const __m256i qx = _mm256_sign_epi8(LoadX(x.q + 32 * b), q);
    acc = Accumulate(acc, _mm256_sign_epi8(q, q), qx, F16At(row) * x.d[b]);
  }
  return Sum8(acc);
}

// Q4_K and Q5_K: super-blocks of 256, sub-block j's a = d·sc_j, b = −dmin·m_j (6-bit sc and m
// from 12 bytes, as core/ggml_quants.cpp's k_scale_min reads them).
template <bool kFifth>
float DotQ45K(const uint8_t* row, const QuantizedRow& x, int64_t in) {
  constexpr int64_t kBytes = kFifth ? 176 : 144;
  __m256 acc = _mm256_setzero_ps();
  float offset = 0;
  const __m256i low4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  for (int64_t sb = 0; sb < in / 256; ++sb, row += kBytes) {
    const float d = F16At(row), dmin = F16At(row + 2);
    const uint8_t* s = row + 4;
    const uint8_t* qh = row + 16;
    const uint8_t* qs = kFifth ? qh + 32 : qh;
    const __m256i high = kFifth ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh))
                                : _mm256_setzero_si256();
    for (int i = 0; i < 4; ++i, qs += 32) {
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
      __m256i lo = _mm256_and_si256(bytes, low4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4);
      if constexpr (kFifth) {
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(
                                     _mm256_and_si256(_mm256_srli_epi16(high, 2 * i), one), 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(
                                     _mm256_and_si256(_mm256_srli_epi16(high, 2 * i + 1), one), 4));
      }
      for (int half = 0; half < 2; ++half) {
        const int j = 2 * i + half;
        const int64_t blk = sb * 8 + j;
        const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 0x0F) | (s[j - 4] >> 6) << 4;
        const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | (s[j] >> 6) << 4;
        const float dx = x.d[blk];
        acc = Accumulate(acc, half == 0 ? lo : hi, LoadX(x.q + 32 * blk),
                         d * static_cast<float>(sc) * dx);
        offset -= dmin * static_cast<float>(m) * dx *
                  static_cast<float>(x.s16[2 * blk] + x.s16[2 * blk + 1]);
      }
    }
  }
  return Sum8(acc) + offset;
}

// Q6_K: ql[128] | qh[64] | int8 sc[16] | d; 16 values a scale, w = d·sc·(q − 32) with q in
// [0, 64): each 32 values' 8 lanes scaled by two scales, the low 4 lanes (values 0–15) by the
// first.
HWY_INLINE float DotQ6K(const uint8_t* row, const QuantizedRow& x, int64_t in) {
  __m256 acc = _mm256_setzero_ps();
  float offset = 0;
  const __m256i low4 = _mm256_set1_epi8(0x0F), low2 = _mm256_set1_epi8(3);
  for (int64_t sb = 0; sb < in / 256; ++sb, row += 210) {
    const auto* sc = reinterpret_cast<const int8_t*>(row + 192);
    const float d = F16At(row + 208);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = row + 64 * h;
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 128 + 32 * h));
      const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      for (int k = 0; k < 4; ++k) {
        const __m256i l = k & 1 ? l1 : l0;
        const __m256i nib = k < 2 ? _mm256_and_si256(l, low4)
                                  : _mm256_and_si256(_mm256_srli_epi16(l, 4), low4);
        const __m256i top = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), low2);
        const __m256i q = _mm256_or_si256(nib, _mm256_slli_epi16(top, 4));
        const int64_t blk = sb * 8 + 4 * h + k;
        const int g = 8 * h + 2 * k;  // the scales of values 0–15 and 16–31
        const float dx = x.d[blk], a0 = d * static_cast<float>(sc[g]) * dx,
                    a1 = d * static_cast<float>(sc[g + 1]) * dx;
        const __m256 scales = _mm256_setr_m128(_mm_set1_ps(a0), _mm_set1_ps(a1));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DotU8S8(q, LoadX(x.q + 32 * blk))), scales, acc);
        offset -= 32.0f * (a0 * static_cast<float>(x.s16[2 * blk]) +
                           a1 * static_cast<float>(x.s16[2 * blk + 1]));
      }
    }
  }
  return Sum8(acc) + offset;
}

// One row of W against one quantized row of x; NaN for a type without integers (the caller never
// asks).
HWY_INLINE float DotRow(uint32_t type, const uint8_t* row, const QuantizedRow& x, int64_t in) {
  switch (type) {
    case 2:
      return DotLegacy<2>(row, x, in);
    case 3:
      return DotLegacy<3>(row, x, in);
    case 6:
      return DotLegacy<6>(row, x, in);
    case 7:
      return DotLegacy<7>(row, x, in);
    case 8:
      return DotQ8_0(row, x, in);
    case 12:
      return DotQ45K<false>(row, x, in);
    case 13:
      return DotQ45K<true>(row, x, in);
    case 14:
      return DotQ6K(row, x, in);
    default:
      return std::numeric_limits<float>::quiet_NaN();
  }
}

// y[r·ldy + o] for rows r < n of x and outputs o in [o0, o1), each W row read once for all of x's
// rows.
HWY_INLINE void DotRows(uint32_t type, const uint8_t* w, uint64_t row_bytes, int64_t o0,
                        int64_t o1, const QuantizedRow* xs, int64_t n, int64_t in,
                        const float* bias, float* y, int64_t ldy) {
  for (int64_t o = o0; o < o1; ++o) {
    const uint8_t* row = w + static_cast<uint64_t>(o) * row_bytes;
    for (int64_t r = 0; r < n; ++r)
      y[r * ldy + o] = DotRow(type, row, xs[r], in) + (bias != nullptr ? bias[o] : 0.0f);
  }
}
