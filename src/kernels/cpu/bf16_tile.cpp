// Highway implementation of bf16.h's round_bf16_rows and of bf16_tile.h, compiled once per target
// instruction set (hwy/foreach_target.h re-includes this file); HWY_DYNAMIC_DISPATCH picks one at
// run time. Every target has the float32 emulation of vdpbf16ps (Highway); the AVX3 target has a
// second copy of the tiles, compiled for AVX-512 plus AVX512_BF16 (GCC's target pragma, as
// quant_dot.cpp does for VNNI: Debian's Highway 1.0.3 has no AVX3_ZEN4/SPR target), called only
// where the CPU has the instruction.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/bf16_tile.cpp"
#include "kernels/cpu/bf16_tile.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>

#include "hwy/foreach_target.h"  // must come before highway.h
#include "hwy/highway.h"
#include "kernels/cpu/bf16.h"

#ifndef QKV_BF16_TILE_ONCE
#define QKV_BF16_TILE_ONCE
namespace qkv::cpu {
namespace {
// Whether the AVX3 target may use vdpbf16ps: the CPU's answer unless a test says otherwise.
std::atomic<bool> dot_allowed{true};
bool cpu_has_bf16() {
#if HWY_ARCH_X86 && defined(__GNUC__)
  static const bool has = __builtin_cpu_supports("avx512bf16") != 0;
  return has;
#else
  return false;
#endif
}

// Bytes of a value panel's pairs that one pass over its columns reads: as pv_tile.cpp's 16 KiB,
// the block stays in L1 while the rows' weights stream past it.
constexpr int64_t kPanelBytes = 16384;

uint32_t pair_at(const bf16* p) {
  uint32_t u;
  std::memcpy(&u, p, 4);
  return u;
}

}  // namespace
}  // namespace qkv::cpu
#endif

HWY_BEFORE_NAMESPACE();
namespace qkv::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- the float32 emulation, every target ----

// N pairs of bf16 as N uint32 lanes: element 2l in lane l's low half, 2l + 1 in its high half
// (x86 is little-endian). Highway's loads copy bytes, so reading bf16 storage as uint32 is fine.
template <class DU>
HWY_INLINE hn::Vec<DU> Pairs(DU du, const bf16* p) {
  return hn::LoadU(du, reinterpret_cast<const uint32_t*>(p));
}

// Rounds n floats to bf16 (bf16.h's rule) in vectors, then the last n mod N one at a time.
void RoundRow(const float* x, int64_t n, bf16* out) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<uint16_t, decltype(df)> d16;
  const int64_t N = hn::Lanes(df);
  const auto abs_mask = hn::Set(du, 0x7FFFFFFFu), inf = hn::Set(du, 0x7F800000u);
  const auto quiet = hn::Set(du, 0x00400000u), one = hn::Set(du, 1u);
  const auto half = hn::Set(du, 0x7FFFu), sign = hn::Set(du, 0x80000000u);
  int64_t j = 0;
  for (; j + N <= n; j += N) {
    const auto b = hn::BitCast(du, hn::LoadU(df, x + j));
    const auto is_nan = hn::Gt(hn::And(b, abs_mask), inf);
    auto r = hn::Add(b, hn::Add(half, hn::And(hn::ShiftRight<16>(b), one)));
    // A result with a zero exponent field (a bf16 subnormal) keeps only its sign.
    const auto tiny = hn::Eq(hn::And(r, inf), hn::Zero(du));
    r = hn::IfThenElse(tiny, hn::And(b, sign), r);
    r = hn::IfThenElse(is_nan, hn::Or(b, quiet), r);
    // The upper halves, at most 0xFFFF, as int32 so that the saturating demotion keeps them.
    const auto top = hn::BitCast(di, hn::ShiftRight<16>(r));
    hn::StoreU(hn::DemoteTo(d16, top), d16, out + j);
  }
  for (; j < n; ++j) out[j] = to_bf16(x[j]);
}

// rmax[r] = max(rmax[r], the first `valid` of the C·N scores just stored at s + r·lds, still in
// L1): the forward's running max without another pass over the tile. (Max of NaN is not
// reliable: callers use it only where no score can be NaN.)
template <int R, int C>
HWY_INLINE void RaiseRowMax(const float* s, int64_t lds, float* rmax, int64_t valid) {
  const hn::ScalableTag<float> df;
  const int64_t N = hn::Lanes(df);
  using V = hn::Vec<decltype(df)>;
  if (valid <= 0) return;
  const V ninf = hn::Set(df, -std::numeric_limits<float>::infinity());
  for (int r = 0; r < R; ++r) {
    V mx = ninf;
    for (int c = 0; c < C; ++c) {
      const int64_t in = valid - c * N;  // valid lanes of vector c
      const V v = hn::LoadU(df, s + r * lds + c * N);
      if (in >= N)
        mx = hn::Max(mx, v);
      else if (in > 0)
        mx = hn::Max(mx, hn::IfThenElse(hn::FirstN(df, static_cast<size_t>(in)), v, ninf));
    }
    rmax[r] = std::max(rmax[r], hn::GetLane(hn::MaxOfLanes(df, mx)));
  }
}

// The chain of bf16_tile.h over the pairs x < pairs, added to acc: R rows of a (bf16, pairs along
// the row, rows lda apart) against C vectors of a panel of w pairs a row (row x of pairs at
// panel + x·w·2). Per pair, every accumulator takes its odd product, then its even one: C widened
// vectors of the panel, a broadcast and the R·C accumulators. The scores (QkBlock) and the output
// update (PvBlock) are both this loop.
template <int R, int C, class V>
HWY_INLINE void AccumulatePairs(const bf16* a, int64_t lda, const bf16* panel, int64_t w,
                                int64_t pairs, V (&acc)[R][C]) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const int64_t N = hn::Lanes(df);
  const auto high = hn::Set(du, 0xFFFF0000u);
  for (int64_t x = 0; x < pairs; ++x) {
    const bf16* row = panel + x * w * 2;
    V k[C];
    for (int c = 0; c < C; ++c) k[c] = hn::BitCast(df, hn::And(Pairs(du, row + c * N * 2), high));
    for (int r = 0; r < R; ++r) {
      const V ax = hn::Set(df, from_bf16(a[r * lda + 2 * x + 1]));
      for (int c = 0; c < C; ++c) acc[r][c] = hn::MulAdd(ax, k[c], acc[r][c]);
    }
    for (int c = 0; c < C; ++c)
      k[c] = hn::BitCast(df, hn::ShiftLeft<16>(Pairs(du, row + c * N * 2)));
    for (int r = 0; r < R; ++r) {
      const V ax = hn::Set(df, from_bf16(a[r * lda + 2 * x]));
      for (int c = 0; c < C; ++c) acc[r][c] = hn::MulAdd(ax, k[c], acc[r][c]);
    }
  }
}

// One register block of the scores: R query rows × C vectors of keys, each score the chain of
// bf16_tile.h over the pairs x < pairs. Per pair, every accumulator takes its odd product, then
// its even one: C widened key vectors, a broadcast and R·C accumulators (4 × 3 on AVX2's 16
// registers, as qk_tile.cpp). With rmax, the rows' maxima are raised too.
template <int R, int C>
HWY_INLINE void QkBlock(const bf16* q, int64_t ldq, const bf16* kt, int64_t w, int64_t pairs,
                        float* s, int64_t lds, float* rmax, int64_t valid) {
  const hn::ScalableTag<float> df;
  const int64_t N = hn::Lanes(df);
  using V = hn::Vec<decltype(df)>;
  V acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = hn::Zero(df);
  AccumulatePairs<R, C>(q, ldq, kt, w, pairs, acc);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) hn::StoreU(acc[r][c], df, s + r * lds + c * N);
  if (rmax) RaiseRowMax<R, C>(s, lds, rmax, valid);
}

template <int C>
HWY_INLINE void QkPanel(const bf16* q, int64_t ldq, int64_t m, const bf16* kt, int64_t w,
                        int64_t pairs, float* s, int64_t lds, float* rmax, int64_t valid) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4)
    QkBlock<4, C>(q + i * ldq, ldq, kt, w, pairs, s + i * lds, lds, rmax ? rmax + i : nullptr,
                  valid);
  for (; i < m; ++i)
    QkBlock<1, C>(q + i * ldq, ldq, kt, w, pairs, s + i * lds, lds, rmax ? rmax + i : nullptr,
                  valid);
}

void QkEmulated(const bf16* q, int64_t ldq, int64_t m, const bf16* kt, int64_t n, int64_t packed,
                int64_t D, float* s, int64_t lds, float* rmax) {
  const hn::ScalableTag<float> df;
  const int64_t N = hn::Lanes(df);
  const int64_t npad = padded_keys(packed), pairs = bf16_row(D) / 2;
  for (int64_t p0 = 0; p0 < n; p0 += kKeyPanel) {
    const int64_t w = std::min(kKeyPanel, npad - p0);
    const bf16* panel = kt + p0 * bf16_row(D);
    int64_t j = 0;
    for (; j + 3 * N <= w; j += 3 * N)
      QkPanel<3>(q, ldq, m, panel + 2 * j, w, pairs, s + p0 + j, lds, rmax, n - p0 - j);
    for (; j < w; j += N)
      QkPanel<1>(q, ldq, m, panel + 2 * j, w, pairs, s + p0 + j, lds, rmax, n - p0 - j);
  }
}

// The last columns of a value panel that fill no vector, one at a time through the target's own
// multiply-add on one lane (each product of bf16 values is exact, so it rounds as the vector
// lanes do). Not a plain `acc += a·b` loop: GCC 12.2 at -O3 vectorizes that reduction of two
// adds a step wrongly (it counted the first pair twice in our tests; -fno-tree-loop-vectorize
// cures it), and intrinsics are out of the vectorizer's reach.
HWY_INLINE void PvTailColumns(const bf16* p, int64_t ldp, int64_t m, const bf16* v, int64_t w,
                              int64_t pairs, int64_t c0, float* o, int64_t ldo) {
  const hn::CappedTag<float, 1> d1;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = c0; c < w; ++c) {
      auto acc = hn::Set(d1, o[i * ldo + c]);
      for (int64_t y = 0; y < pairs; ++y) {
        const bf16* pair = v + (y * w + c) * 2;
        const bf16* py = p + i * ldp + 2 * y;
        acc = hn::MulAdd(hn::Set(d1, from_bf16(py[1])), hn::Set(d1, from_bf16(pair[1])), acc);
        acc = hn::MulAdd(hn::Set(d1, from_bf16(py[0])), hn::Set(d1, from_bf16(pair[0])), acc);
      }
      o[i * ldo + c] = hn::GetLane(acc);
    }
}

// One register block of the output update: R rows × C vectors of columns, o += p·v over the
// pairs y < pairs, odd key first.
template <int R, int C>
HWY_INLINE void PvBlock(const bf16* p, int64_t ldp, const bf16* v, int64_t w, int64_t pairs,
                        float* o, int64_t ldo) {
  const hn::ScalableTag<float> df;
  const int64_t N = hn::Lanes(df);
  using V = hn::Vec<decltype(df)>;
  V acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = hn::LoadU(df, o + r * ldo + c * N);
  AccumulatePairs<R, C>(p, ldp, v, w, pairs, acc);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) hn::StoreU(acc[r][c], df, o + r * ldo + c * N);
}

// Every row against the C·N columns at v, R rows at a time, pairs of keys in passes that fit L1
// (splitting the chain over the pairs stores and reloads the partial sums, in order).
template <int R, int C>
HWY_INLINE void PvPanel(const bf16* p, int64_t ldp, int64_t m, const bf16* v, int64_t w,
                        int64_t pairs, float* o, int64_t ldo) {
  const hn::ScalableTag<float> df;
  const int64_t N = hn::Lanes(df);
  const int64_t per_pass = std::max<int64_t>(8, kPanelBytes / (4 * C * N));
  for (int64_t y0 = 0; y0 < pairs; y0 += per_pass) {
    const int64_t ny = std::min(per_pass, pairs - y0);
    const bf16* vy = v + y0 * w * 2;
    const bf16* py = p + 2 * y0;
    int64_t i = 0;
    for (; i + R <= m; i += R) PvBlock<R, C>(py + i * ldp, ldp, vy, w, ny, o + i * ldo, ldo);
    for (; i < m; ++i) PvBlock<1, C>(py + i * ldp, ldp, vy, w, ny, o + i * ldo, ldo);
  }
}

// The w columns of one value panel (its pairs from the first one used): blocks of 4 vectors, then
// 2, then 1, as pv_tile.cpp; the last w mod N columns in scalar code.
void PvPanelEmulated(const bf16* p, int64_t ldp, int64_t m, const bf16* v, int64_t w, int64_t pairs,
                     float* o, int64_t ldo) {
  const hn::ScalableTag<float> df;
  const int64_t N = hn::Lanes(df);
  const int64_t body = w / N * N;
  int64_t c = 0;
  for (; c + 4 * N <= body; c += 4 * N) PvPanel<3, 4>(p, ldp, m, v + 2 * c, w, pairs, o + c, ldo);
  for (; c + 2 * N <= body; c += 2 * N) PvPanel<4, 2>(p, ldp, m, v + 2 * c, w, pairs, o + c, ldo);
  for (; c < body; c += N) PvPanel<4, 1>(p, ldp, m, v + 2 * c, w, pairs, o + c, ldo);
  PvTailColumns(p, ldp, m, v, w, pairs, c, o, ldo);
}

#if HWY_TARGET == HWY_AVX3
// ---- vdpbf16ps, the AVX3 target on CPUs with AVX512_BF16 ----
// GCC compiles what follows for AVX-512 plus BF16, and it is only called where the CPU has it.
// With 32 zmm registers the blocks can be larger than AVX2's 4 × 3 (rows × vectors): 8 × 3 for
// the scores (24 accumulators, 3 key vectors, a broadcast) and 8 × 2 for the outputs (a value
// panel is 2 vectors wide). Measured on Zen 4 (AMD EPYC, 2 cores shared with builds — load
// average 7, so ±5% noise; bench/bf16_tile_bench.cpp, 1 thread, 256 rows × 512 keys, GFLOP/s,
// fp32 = qk_tile/pv_tile in the same run):
//
//   blocks (qk rows, pv rows)   D    qk fp32  qk bf16   pv fp32  pv bf16
//   4 × 3, 4 × 2                64     57.5    107.9      59.3    121.3
//                               128    60.7    111.0      63.1    118.0
//   6 × 3, 12 × 2               64     57.0    107.3      56.4    117.8
//                               128    58.0    114.9      56.6    116.0
//   8 × 3, 8 × 2 (kept)         64     55.3    112.2      63.3    120.8
//                               128    59.9    118.0      57.7    113.4
//
// The shapes are within the noise of one another: about 1.9× the float32 tiles, vdpbf16ps's 32
// multiply-adds an instruction against vfmadd231ps's 16. The float32 emulation runs at 51–57.
// A quieter run of the kept shapes (load average 4.7, the build's binary): D = 64 qk 110.6 →
// 192.4 (1.74×), pv 109.8 → 216.5 (1.97×); D = 128 qk 110.2 → 221.2 (2.01×), pv 104.4 → 198.7
// (1.90×); the emulation 91–106, at or a little below float32.
#pragma GCC push_options
#pragma GCC target("avx,avx2,bmi,bmi2,fma,f16c,avx512f,avx512vl,avx512dq,avx512bw,avx512bf16")
namespace dot {

HWY_INLINE __m512 Dp(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
}

// AccumulatePairs with vdpbf16ps: per pair, one instruction takes both products in its order.
template <int R, int C>
HWY_INLINE void DpAccumulatePairs(const bf16* a, int64_t lda, const bf16* panel, int64_t w,
                                  int64_t pairs, __m512 (&acc)[R][C]) {
  for (int64_t x = 0; x < pairs; ++x) {
    const bf16* row = panel + x * w * 2;
    __m512i k[C];
    for (int c = 0; c < C; ++c) k[c] = _mm512_loadu_si512(row + c * 32);
    for (int r = 0; r < R; ++r) {
      const __m512i ax = _mm512_set1_epi32(static_cast<int>(pair_at(a + r * lda + 2 * x)));
      for (int c = 0; c < C; ++c) acc[r][c] = Dp(acc[r][c], ax, k[c]);
    }
  }
}

template <int R, int C>
HWY_INLINE void QkBlock(const bf16* q, int64_t ldq, const bf16* kt, int64_t w, int64_t pairs,
                        float* s, int64_t lds, float* rmax, int64_t valid) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  DpAccumulatePairs<R, C>(q, ldq, kt, w, pairs, acc);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(s + r * lds + c * 16, acc[r][c]);
  if (rmax) RaiseRowMax<R, C>(s, lds, rmax, valid);
}

// Rows of a key panel's C vectors: kQkRows at a time, then 4, then one.
constexpr int kQkRows = 8;
template <int C>
HWY_INLINE void QkPanel(const bf16* q, int64_t ldq, int64_t m, const bf16* kt, int64_t w,
                        int64_t pairs, float* s, int64_t lds, float* rmax, int64_t valid) {
  int64_t i = 0;
  for (; i + kQkRows <= m; i += kQkRows)
    QkBlock<kQkRows, C>(q + i * ldq, ldq, kt, w, pairs, s + i * lds, lds, rmax ? rmax + i : nullptr,
                        valid);
  for (; i + 4 <= m; i += 4)
    QkBlock<4, C>(q + i * ldq, ldq, kt, w, pairs, s + i * lds, lds, rmax ? rmax + i : nullptr,
                  valid);
  for (; i < m; ++i)
    QkBlock<1, C>(q + i * ldq, ldq, kt, w, pairs, s + i * lds, lds, rmax ? rmax + i : nullptr,
                  valid);
}

void Qk(const bf16* q, int64_t ldq, int64_t m, const bf16* kt, int64_t n, int64_t packed, int64_t D,
        float* s, int64_t lds, float* rmax) {
  const int64_t npad = padded_keys(packed), pairs = bf16_row(D) / 2;
  for (int64_t p0 = 0; p0 < n; p0 += kKeyPanel) {
    const int64_t w = std::min(kKeyPanel, npad - p0);
    const bf16* panel = kt + p0 * bf16_row(D);
    int64_t j = 0;
    for (; j + 48 <= w; j += 48)
      QkPanel<3>(q, ldq, m, panel + 2 * j, w, pairs, s + p0 + j, lds, rmax, n - p0 - j);
    for (; j < w; j += 16)
      QkPanel<1>(q, ldq, m, panel + 2 * j, w, pairs, s + p0 + j, lds, rmax, n - p0 - j);
  }
}

template <int R, int C>
HWY_INLINE void PvBlock(const bf16* p, int64_t ldp, const bf16* v, int64_t w, int64_t pairs,
                        float* o, int64_t ldo) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_loadu_ps(o + r * ldo + c * 16);
  DpAccumulatePairs<R, C>(p, ldp, v, w, pairs, acc);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(o + r * ldo + c * 16, acc[r][c]);
}

constexpr int kPvRows = 8;
template <int C>
HWY_INLINE void PvPanel(const bf16* p, int64_t ldp, int64_t m, const bf16* v, int64_t w,
                        int64_t pairs, float* o, int64_t ldo) {
  const int64_t per_pass = std::max<int64_t>(8, kPanelBytes / (4 * C * 16));
  for (int64_t y0 = 0; y0 < pairs; y0 += per_pass) {
    const int64_t ny = std::min(per_pass, pairs - y0);
    const bf16* vy = v + y0 * w * 2;
    const bf16* py = p + 2 * y0;
    int64_t i = 0;
    for (; i + kPvRows <= m; i += kPvRows)
      PvBlock<kPvRows, C>(py + i * ldp, ldp, vy, w, ny, o + i * ldo, ldo);
    for (; i + 4 <= m; i += 4) PvBlock<4, C>(py + i * ldp, ldp, vy, w, ny, o + i * ldo, ldo);
    for (; i < m; ++i) PvBlock<1, C>(py + i * ldp, ldp, vy, w, ny, o + i * ldo, ldo);
  }
}

void PvPanelDot(const bf16* p, int64_t ldp, int64_t m, const bf16* v, int64_t w, int64_t pairs,
                float* o, int64_t ldo) {
  int64_t c = 0;
  for (; c + 32 <= w; c += 32) PvPanel<2>(p, ldp, m, v + 2 * c, w, pairs, o + c, ldo);
  for (; c + 16 <= w; c += 16) PvPanel<1>(p, ldp, m, v + 2 * c, w, pairs, o + c, ldo);
  PvTailColumns(p, ldp, m, v, w, pairs, c, o, ldo);
}

}  // namespace dot
#pragma GCC pop_options
#endif

bool UsesDot() {
#if HWY_TARGET == HWY_AVX3
  return dot_allowed.load(std::memory_order_relaxed) && cpu_has_bf16();
#else
  return false;
#endif
}

void RoundRows(const float* x, int64_t ldx, int64_t m, int64_t D, bf16* out, int64_t ldo) {
  for (int64_t i = 0; i < m; ++i) {
    RoundRow(x + i * ldx, D, out + i * ldo);
    if (D % 2) out[i * ldo + D] = 0;
  }
}

void QkBf16(const bf16* q, int64_t ldq, int64_t m, const bf16* kt, int64_t n, int64_t packed,
            int64_t D, float* s, int64_t lds, float* rmax) {
#if HWY_TARGET == HWY_AVX3
  if (UsesDot()) return dot::Qk(q, ldq, m, kt, n, packed, D, s, lds, rmax);
#endif
  QkEmulated(q, ldq, m, kt, n, packed, D, s, lds, rmax);
}

void PvBf16(const bf16* p, int64_t ldp, int64_t m, const bf16* v, int64_t keys, int64_t j0,
            int64_t n, int64_t Dv, float* o, int64_t ldo) {
  const int64_t pairs = (n + 1) / 2, k2 = bf16_row(keys);
  for (int64_t c0 = 0; c0 < Dv; c0 += kValuePanel) {
    const int64_t w = std::min(kValuePanel, Dv - c0);
    const bf16* panel = v + c0 * k2 + j0 * w;  // pair row j0/2, 2w elements a row
#if HWY_TARGET == HWY_AVX3
    if (UsesDot()) {
      dot::PvPanelDot(p, ldp, m, panel, w, pairs, o + c0, ldo);
      continue;
    }
#endif
    PvPanelEmulated(p, ldp, m, panel, w, pairs, o + c0, ldo);
  }
}

}  // namespace qkv::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv::cpu {

HWY_EXPORT(UsesDot);
HWY_EXPORT(RoundRows);
HWY_EXPORT(QkBf16);
HWY_EXPORT(PvBf16);

void set_bf16_dot(bool allowed) { dot_allowed.store(allowed); }
bool bf16_uses_dot() { return HWY_DYNAMIC_DISPATCH(UsesDot)(); }

void round_bf16_rows(const float* x, int64_t ldx, int64_t m, int64_t D, bf16* out, int64_t ldo) {
  if (m <= 0) return;
  HWY_DYNAMIC_DISPATCH(RoundRows)(x, ldx, m, D, out, ldo);
}

void pack_keys_bf16(const float* k, int64_t ldk, int64_t n, int64_t D, bf16* kt) {
  const int64_t npad = padded_keys(n), pairs = bf16_row(D) / 2;
  for (int64_t p0 = 0; p0 < npad; p0 += kKeyPanel) {
    const int64_t w = std::min(kKeyPanel, npad - p0), keys = std::max<int64_t>(0, n - p0);
    bf16* panel = kt + p0 * bf16_row(D);
    std::fill(panel, panel + w * 2 * pairs, bf16{0});
    // Blocks of 16 keys: their reads of a column stay within 16 cached rows.
    for (int64_t j0 = 0; j0 < std::min(w, keys); j0 += 16) {
      const int64_t j1 = std::min({w, keys, j0 + 16});
      for (int64_t x = 0; x < D; ++x)
        for (int64_t j = j0; j < j1; ++j)
          panel[((x / 2) * w + j) * 2 + x % 2] = to_bf16(k[(p0 + j) * ldk + x]);
    }
  }
}

void pack_values_bf16(const float* v, int64_t ldv, int64_t n, int64_t Dv, bf16* packed,
                      int64_t keys, int64_t j0) {
  const int64_t k2 = bf16_row(keys);
  for (int64_t c0 = 0; c0 < Dv; c0 += kValuePanel) {
    const int64_t w = std::min(kValuePanel, Dv - c0);
    bf16* panel = packed + c0 * k2 + j0 * w;
    for (int64_t j = 0; j < bf16_row(n); ++j) {
      bf16* out = panel + (j / 2) * w * 2 + j % 2;
      if (j == n) {
        for (int64_t c = 0; c < w; ++c) out[2 * c] = 0;
        continue;
      }
      const float* row = v + j * ldv + c0;
      for (int64_t c = 0; c < w; ++c) out[2 * c] = to_bf16(row[c]);
    }
  }
}

void qk_tile_bf16(const bf16* q, int64_t ldq, int64_t m, const bf16* kt, int64_t n, int64_t packed,
                  int64_t D, float* s, int64_t lds, float* row_max) {
  if (m <= 0 || n <= 0) return;
  HWY_DYNAMIC_DISPATCH(QkBf16)(q, ldq, m, kt, n, packed, D, s, lds, row_max);
}

void pv_tile_bf16(const bf16* p, int64_t ldp, int64_t m, const bf16* v_packed, int64_t keys,
                  int64_t j0, int64_t n, int64_t Dv, float* o, int64_t ldo) {
  if (m <= 0 || n <= 0 || Dv <= 0) return;
  HWY_DYNAMIC_DISPATCH(PvBf16)(p, ldp, m, v_packed, keys, j0, n, Dv, o, ldo);
}

}  // namespace qkv::cpu
#endif  // HWY_ONCE
