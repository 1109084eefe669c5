// The int8 dot products of quant_linear.h, compiled once per SIMD target (hwy/foreach_target.h
// re-includes this file): AVX2 intrinsics on the x86 targets that have them (quant_dot-inl.h; the
// Highway of Debian 12, 1.0.3, has no u8 × s8 multiply-add), and on AVX-512 a second copy whose
// multiply-add is VNNI's vpdpbusd, chosen at run time where the CPU has it. Other targets run the
// portable integer loops of quant_blocks.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/quant_dot.cpp"
#include <immintrin.h>

#include <atomic>
#include <cstring>
#include <limits>

#include "hwy/foreach_target.h"  // must come before highway.h
#include "hwy/highway.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quant_linear.h"

#ifndef QKV_QUANT_DOT_ONCE
#define QKV_QUANT_DOT_ONCE
namespace qkv::cpu {
namespace {
// Whether the AVX-512 target may use VNNI: the CPU's answer unless a test says otherwise.
std::atomic<bool> vnni_allowed{true};
bool cpu_has_vnni() {
#if HWY_ARCH_X86 && defined(__GNUC__)
  static const bool has = __builtin_cpu_supports("avx512vnni") != 0;
  return has;
#else
  return false;
#endif
}
}  // namespace
}  // namespace qkv::cpu
#endif

HWY_BEFORE_NAMESPACE();
namespace qkv::cpu::HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
namespace avx2 {
HWY_INLINE __m256i DotU8S8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
#include "kernels/cpu/quant_dot-inl.h"
}  // namespace avx2
#endif

#if HWY_TARGET == HWY_AVX3
// The same kernels with VNNI: GCC compiles what follows for AVX-512 plus VNNI, and only calls
// into it where the CPU has VNNI.
#pragma GCC push_options
#pragma GCC target("avx,avx2,bmi,bmi2,fma,f16c,avx512f,avx512vl,avx512dq,avx512bw,avx512vnni")
namespace vnni {
HWY_INLINE __m256i DotU8S8(__m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}
#include "kernels/cpu/quant_dot-inl.h"
void DotRowsVnni(uint32_t type, const uint8_t* w, uint64_t row_bytes, int64_t o0, int64_t o1,
                 const QuantizedRow* xs, int64_t n, int64_t in, const float* bias, float* y,
                 int64_t ldy) {
  DotRows(type, w, row_bytes, o0, o1, xs, n, in, bias, y, ldy);
}
}  // namespace vnni
#pragma GCC pop_options
#endif

bool UsesVnni() {
#if HWY_TARGET == HWY_AVX3
  return vnni_allowed.load(std::memory_order_relaxed) && cpu_has_vnni();
#else
  return false;
#endif
}

void QuantDotRows(uint32_t type, const uint8_t* w, uint64_t row_bytes, int64_t o0, int64_t o1,
                  const QuantizedRow* xs, int64_t n, int64_t in, const float* bias, float* y,
                  int64_t ldy) {
#if HWY_TARGET == HWY_AVX3
  if (UsesVnni()) return vnni::DotRowsVnni(type, w, row_bytes, o0, o1, xs, n, in, bias, y, ldy);
#endif
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
  avx2::DotRows(type, w, row_bytes, o0, o1, xs, n, in, bias, y, ldy);
#else
  for (int64_t o = o0; o < o1; ++o)
    for (int64_t r = 0; r < n; ++r)
      y[r * ldy + o] = quant_dot_portable(type, w + static_cast<uint64_t>(o) * row_bytes, xs[r], in) +
                       (bias != nullptr ? bias[o] : 0.0f);
#endif
}

}  // namespace qkv::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv::cpu {

HWY_EXPORT(UsesVnni);
HWY_EXPORT(QuantDotRows);

void quant_dot_rows(uint32_t type, const std::byte* w, uint64_t row_bytes, int64_t o0, int64_t o1,
                    const QuantizedRow* xs, int64_t n, int64_t in, const float* bias, float* y,
                    int64_t ldy) {
  HWY_DYNAMIC_DISPATCH(QuantDotRows)
  (type, reinterpret_cast<const uint8_t*>(w), row_bytes, o0, o1, xs, n, in, bias, y, ldy);
}

float quant_dot_int8(uint32_t type, const std::byte* row, const QuantizedRow& x, int64_t in) {
  float y = 0;
  quant_dot_rows(type, row, 0, 0, 1, &x, 1, in, nullptr, &y, 1);
  return y;
}

void set_int8_vnni(bool allowed) { vnni_allowed.store(allowed); }
bool int8_uses_vnni() { return HWY_DYNAMIC_DISPATCH(UsesVnni)(); }

}  // namespace qkv::cpu
#endif  // HWY_ONCE
