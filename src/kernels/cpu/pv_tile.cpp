// Highway implementation of pv_tile.h, compiled once per target instruction set
// (hwy/foreach_target.h re-includes this file); HWY_DYNAMIC_DISPATCH picks one at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/pv_tile.cpp"
#include "kernels/cpu/pv_tile.h"

#include <algorithm>

#include "hwy/foreach_target.h"  // must come before highway.h
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace qkv::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Floats of values a panel holds (16 KiB): a pass over a panel's columns takes as many keys as
// fit, so that the panel stays in L1 while the rows' probabilities stream past it. Splitting the
// sum over j into passes stores and reloads the partial sums; it does not reorder them.
constexpr int64_t kPanelFloats = 4096;

// Where the weight of output row r and key j is: p[r·ldp + j], or p[j·ldp + r] when P is given
// transposed (T).
template <bool T>
HWY_INLINE int64_t At(int64_t r, int64_t j, int64_t ldp) {
  return T ? j * ldp + r : r * ldp + j;
}

// One register block: R rows × C vectors of output columns, o += p·v over keys [0, n) in order.
// 3 × 4 or 4 × 2 of them (below) leave AVX2 registers for the value vectors and a broadcast.
template <bool T, int R, int C>
HWY_INLINE void Block(const float* p, int64_t ldp, const float* v, int64_t ldv, int64_t n, float* o,
                      int64_t ldo) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  using V = hn::Vec<decltype(d)>;
  V acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = hn::LoadU(d, o + r * ldo + c * N);
  for (int64_t j = 0; j < n; ++j) {
    V vj[C];
    for (int c = 0; c < C; ++c) vj[c] = hn::LoadU(d, v + j * ldv + c * N);
    for (int r = 0; r < R; ++r) {
      const V pj = hn::Set(d, p[At<T>(r, j, ldp)]);
      for (int c = 0; c < C; ++c) acc[r][c] = hn::MulAdd(pj, vj[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) hn::StoreU(acc[r][c], d, o + r * ldo + c * N);
}

// Every row against the C·N columns at v, R rows at a time, keys in passes that fit L1.
template <bool T, int R, int C>
HWY_INLINE void Panel(const float* p, int64_t ldp, int64_t m, const float* v, int64_t ldv,
                      int64_t n, float* o, int64_t ldo) {
  const hn::ScalableTag<float> d;
  const int64_t keys =
      std::max<int64_t>(16, kPanelFloats / (C * static_cast<int64_t>(hn::Lanes(d))));
  for (int64_t j0 = 0; j0 < n; j0 += keys) {
    const int64_t nj = std::min(keys, n - j0);
    const float* vj = v + j0 * ldv;
    int64_t i = 0;
    for (; i + R <= m; i += R)
      Block<T, R, C>(p + At<T>(i, j0, ldp), ldp, vj, ldv, nj, o + i * ldo, ldo);
    for (; i < m; ++i) Block<T, 1, C>(p + At<T>(i, j0, ldp), ldp, vj, ldv, nj, o + i * ldo, ldo);
  }
}

// The w columns of one panel of values (rows ldv apart): blocks of 4 vectors (3 rows × 4 = 12
// accumulators), then of 2 (4 rows × 2), then of one; measured on Zen 3 (AVX2) at D = 64 and 128
// against 4 × 3 and 6 × 2 blocks.
template <bool T>
HWY_INLINE void PvPanel(const float* p, int64_t ldp, int64_t m, const float* v, int64_t ldv,
                        int64_t n, int64_t w, float* o, int64_t ldo) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  const int64_t body = w / N * N;
  int64_t c = 0;
  for (; c + 4 * N <= body; c += 4 * N) Panel<T, 3, 4>(p, ldp, m, v + c, ldv, n, o + c, ldo);
  for (; c + 2 * N <= body; c += 2 * N) Panel<T, 4, 2>(p, ldp, m, v + c, ldv, n, o + c, ldo);
  for (; c < body; c += N) Panel<T, 4, 1>(p, ldp, m, v + c, ldv, n, o + c, ldo);
  // The last w mod N columns one at a time, through the target's own multiply-add, so that they
  // round as the vector lanes do.
  const hn::CappedTag<float, 1> d1;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t x = c; x < w; ++x) {
      auto acc = hn::Set(d1, o[i * ldo + x]);
      for (int64_t j = 0; j < n; ++j)
        acc = hn::MulAdd(hn::Set(d1, p[At<T>(i, j, ldp)]), hn::Set(d1, v[j * ldv + x]), acc);
      o[i * ldo + x] = hn::GetLane(acc);
    }
}

template <bool T>
void PvPanels(const float* p, int64_t ldp, int64_t m, const float* v, int64_t ldv, int64_t keys,
              int64_t j0, int64_t n, int64_t Dv, float* o, int64_t ldo) {
  if (keys == 0) return PvPanel<T>(p, ldp, m, v + j0 * ldv, ldv, n, Dv, o, ldo);
  for (int64_t c0 = 0; c0 < Dv; c0 += kValuePanel) {
    const int64_t w = std::min(kValuePanel, Dv - c0);
    PvPanel<T>(p, ldp, m, v + c0 * keys + j0 * w, w, n, w, o + c0, ldo);
  }
}

void PvTile(const float* p, int64_t ldp, bool transposed, int64_t m, const float* v, int64_t ldv,
            int64_t keys, int64_t j0, int64_t n, int64_t Dv, float* o, int64_t ldo) {
  if (transposed) return PvPanels<true>(p, ldp, m, v, ldv, keys, j0, n, Dv, o, ldo);
  PvPanels<false>(p, ldp, m, v, ldv, keys, j0, n, Dv, o, ldo);
}

}  // namespace qkv::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv::cpu {

HWY_EXPORT(PvTile);

void pack_values(const float* v, int64_t ldv, int64_t n, int64_t Dv, float* packed, int64_t keys,
                 int64_t j0) {
  for (int64_t c0 = 0; c0 < Dv; c0 += kValuePanel) {
    const int64_t w = std::min(kValuePanel, Dv - c0);
    float* panel = packed + c0 * keys + j0 * w;
    for (int64_t j = 0; j < n; ++j)
      std::copy(v + j * ldv + c0, v + j * ldv + c0 + w, panel + j * w);
  }
}

void pv_tile(const float* p, int64_t ldp, int64_t m, const ValueRows& v, int64_t j0, int64_t n,
             int64_t Dv, float* o, int64_t ldo) {
  if (m <= 0 || n <= 0 || Dv <= 0) return;
  HWY_DYNAMIC_DISPATCH(PvTile)(p, ldp, false, m, v.v, v.ldv, v.keys, j0, n, Dv, o, ldo);
}

void pv_tile_transposed(const float* pt, int64_t ldpt, int64_t m, const ValueRows& v, int64_t j0,
                        int64_t n, int64_t Dv, float* o, int64_t ldo) {
  if (m <= 0 || n <= 0 || Dv <= 0) return;
  HWY_DYNAMIC_DISPATCH(PvTile)(pt, ldpt, true, m, v.v, v.ldv, v.keys, j0, n, Dv, o, ldo);
}

}  // namespace qkv::cpu
#endif  // HWY_ONCE
