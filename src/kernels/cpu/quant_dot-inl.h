// The int8 dot products of quant_linear.h on x86 with AVX2, one per ggml type: included by
// quant_dot.cpp once per x86 target (and a second time with AVX-512 VNNI enabled), inside a
// namespace that defines
//
//   __m256i DotU8S8(__m256i u, __m256i s)   8 int32 lanes, lane i = Σ u[4i + t]·s[4i + t], t < 4
//
// (AVX2: maddubs then madd with ones — maddubs's int16 pair sums never saturate here, the largest
// being 2·63·127 for Q6_K's 6-bit values, 2·128·127 for Q8_0's; VNNI: one vpdpbusd). No include
// guard, on purpose. The legacy types (a scale per 32) use it; the K-quants multiply by their
// integer sub-block scales in the same madd instead (ScaledDot), VNNI or not.
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

// The K-quants against x quantized per 256 values (one scale d_x a super-block, as ggml's Q8_K):
// the sub-blocks' integer scales multiply their integer dot products in int16 × int16 → int32
// (madd: Σ sc·q·q_x stays below 2³¹), summed over the super-block, then one conversion and one
// multiply-add by d·d_x. Per 32 weights that is maddubs and madd where a scale per 32 values of x
// would cost a conversion and a multiply-add of floats besides.

// Σ_t sc·u[t]·s[t] over each 4 bytes in 8 int32 lanes (sc16: the scale in every int16 lane, or
// one scale in lanes 0–7 and another in 8–15).
HWY_INLINE __m256i ScaledDot(__m256i u, __m256i s, __m256i sc16) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), sc16);
}

// Q4_K and Q5_K: sub-block j's w = (d·sc_j)·q − dmin·m_j, 6-bit sc and m from 12 bytes (as
// core/ggml_quants.cpp's k_scale_min reads them).
template <bool kFifth>
float DotQ45K(const uint8_t* row, const QuantizedRow& x, int64_t in) {
  constexpr int64_t kBytes = kFifth ? 176 : 144;
  __m256 acc = _mm256_setzero_ps();
  float offset = 0;
  const __m256i low4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  for (int64_t sb = 0; sb < in / 256; ++sb, row += kBytes) {
    const float d = F16At(row), dmin = F16At(row + 2), dx = x.d[sb];
    // The 12 bytes of scales as three u32: a = s[0..3], b = s[4..7], c = s[8..11]. Sub-blocks
    // 0–3 take their sc and m from the low 6 bits of a and b; 4–7 their low 4 bits from c's
    // nibbles and their top 2 from the spare top bits of a (sc) and b (m).
    uint32_t a, b, c;
    std::memcpy(&a, row + 4, 4);
    std::memcpy(&b, row + 8, 4);
    std::memcpy(&c, row + 12, 4);
    const uint32_t sc_words[2] = {a & 0x3F3F3F3F, (c & 0x0F0F0F0F) | ((a >> 2) & 0x30303030)};
    const uint32_t m_words[2] = {b & 0x3F3F3F3F, ((c >> 4) & 0x0F0F0F0F) | ((b >> 2) & 0x30303030)};
    uint8_t sc[8], m[8];
    std::memcpy(sc, sc_words, 8);
    std::memcpy(m, m_words, 8);
    const uint8_t* qh = row + 16;
    const uint8_t* qs = kFifth ? qh + 32 : qh;
    const int8_t* qx = x.q + 256 * sb;
    const __m256i high = kFifth ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh))
                                : _mm256_setzero_si256();
    __m256i sum = _mm256_setzero_si256();
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
      sum = _mm256_add_epi32(sum, ScaledDot(lo, LoadX(qx + 64 * i), _mm256_set1_epi16(sc[2 * i])));
      sum = _mm256_add_epi32(
          sum, ScaledDot(hi, LoadX(qx + 64 * i + 32), _mm256_set1_epi16(sc[2 * i + 1])));
    }
    // Σ_j m_j·Σ q_x over sub-block j: each m twice, against the 16 sums of 16 values, in one madd.
    const __m128i m8 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(m)));
    const __m256i m16 = _mm256_setr_m128i(_mm_unpacklo_epi16(m8, m8), _mm_unpackhi_epi16(m8, m8));
    const __m256i sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.s16 + 16 * sb));
    const __m256i mins = _mm256_madd_epi16(m16, sums);
    const __m128i m4 = _mm_add_epi32(_mm256_castsi256_si128(mins), _mm256_extracti128_si256(mins, 1));
    const __m128i m2 = _mm_add_epi32(m4, _mm_unpackhi_epi64(m4, m4));
    const int32_t total = _mm_cvtsi128_si32(_mm_add_epi32(m2, _mm_srli_si128(m2, 4)));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(d * dx), acc);
    offset -= dmin * dx * static_cast<float>(total);
  }
  return Sum8(acc) + offset;
}

// Q6_K: ql[128] | qh[64] | int8 sc[16] | d; 16 values a scale, w = d·sc·(q − 32) with q in
// [0, 64): each 32 values' two scales in the low and high 8 int16 lanes of one madd.
HWY_INLINE float DotQ6K(const uint8_t* row, const QuantizedRow& x, int64_t in) {
  __m256 acc = _mm256_setzero_ps();
  float offset = 0;
  const __m256i low4 = _mm256_set1_epi8(0x0F), low2 = _mm256_set1_epi8(3);
  for (int64_t sb = 0; sb < in / 256; ++sb, row += 210) {
    const auto* sc = reinterpret_cast<const int8_t*>(row + 192);
    const float d = F16At(row + 208), dx = x.d[sb];
    const int8_t* qx = x.q + 256 * sb;
    __m256i sum = _mm256_setzero_si256();
    // Σ_g sc_g·Σ q_x over the 16 values of g: the −32 of every value, in one madd.
    const __m256i shifts = _mm256_madd_epi16(
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.s16 + 16 * sb)));
    const __m128i s4 =
        _mm_add_epi32(_mm256_castsi256_si128(shifts), _mm256_extracti128_si256(shifts, 1));
    const __m128i s2 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
    const int32_t shift = _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_srli_si128(s2, 4)));
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
        const int g = 8 * h + 2 * k;  // the scales of values 0–15 and 16–31
        const __m256i scales = _mm256_setr_m128i(_mm_set1_epi16(sc[g]), _mm_set1_epi16(sc[g + 1]));
        sum = _mm256_add_epi32(sum, ScaledDot(q, LoadX(qx + 128 * h + 32 * k), scales));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(d * dx), acc);
    offset -= 32 * d * dx * static_cast<float>(shift);
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

// Rows ahead to prefetch: 1, 2, 4 and 8 measured alike on Zen (AVX-512), within the runs' noise;
// none was 25% slower on the K-quants.
constexpr int64_t kAhead = 4;

// y[r·ldy + o] for rows r < n of x and outputs o in [o0, o1), each W row read once for all of x's
// rows.
HWY_INLINE void DotRows(uint32_t type, const uint8_t* w, uint64_t row_bytes, int64_t o0,
                        int64_t o1, const QuantizedRow* xs, int64_t n, int64_t in,
                        const float* bias, float* y, int64_t ldy) {
  for (int64_t o = o0; o < o1; ++o) {
    const uint8_t* row = w + static_cast<uint64_t>(o) * row_bytes;
    // A row kAhead on into L1 while this one is multiplied: the rows stream from memory (a decode
    // step reads every weight once), faster than the hardware prefetcher alone brings them.
    if (o + kAhead < o1)
      for (uint64_t at = 0; at < row_bytes; at += 64)
        _mm_prefetch(reinterpret_cast<const char*>(row + kAhead * row_bytes + at), _MM_HINT_T0);
    for (int64_t r = 0; r < n; ++r)
      y[r * ldy + o] = DotRow(type, row, xs[r], in) + (bias != nullptr ? bias[o] : 0.0f);
  }
}
