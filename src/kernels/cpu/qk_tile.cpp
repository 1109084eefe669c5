// Highway implementation of qk_tile.h, compiled once per target instruction set
// (hwy/foreach_target.h re-includes this file); HWY_DYNAMIC_DISPATCH picks one at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/qk_tile.cpp"
#include "kernels/cpu/qk_tile.h"

#include <algorithm>
#include <limits>

#include "hwy/foreach_target.h"  // must come before highway.h
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace qkv::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One register block: R query rows × C vectors of keys, accumulated over d = 0 .. D − 1 in
// order (the contract of qk_tile.h). 4 × 3 uses 12 accumulators, 3 key vectors and a broadcast:
// the 16 registers of AVX2. (Arrays of vectors are fine on x86 and NEON, not on SVE or RVV.)
//
// With rmax, also rmax[r] = max(rmax[r], the row's scores in the block's first `valid` columns),
// while the scores are in registers: the forward's running max without a pass over the tile.
// (Max of NaN is not reliable: callers use it only where no score can be NaN.)
template <int R, int C>
HWY_INLINE void Block(const float* q, int64_t ldq, const float* kt, int64_t ldkt, int64_t D,
                      float* s, int64_t lds, float* rmax, int64_t valid) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  using V = hn::Vec<decltype(d)>;
  V acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = hn::Zero(d);
  for (int64_t x = 0; x < D; ++x) {
    V k[C];
    for (int c = 0; c < C; ++c) k[c] = hn::LoadU(d, kt + x * ldkt + c * N);
    for (int r = 0; r < R; ++r) {
      const V qx = hn::Set(d, q[r * ldq + x]);
      for (int c = 0; c < C; ++c) acc[r][c] = hn::MulAdd(qx, k[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) hn::StoreU(acc[r][c], d, s + r * lds + c * N);
  if (!rmax || valid <= 0) return;
  const V ninf = hn::Set(d, -std::numeric_limits<float>::infinity());
  for (int r = 0; r < R; ++r) {
    V m = ninf;
    for (int c = 0; c < C; ++c) {
      const int64_t in = valid - c * N;  // valid lanes of vector c
      if (in >= N)
        m = hn::Max(m, acc[r][c]);
      else if (in > 0)
        m = hn::Max(m, hn::IfThenElse(hn::FirstN(d, static_cast<size_t>(in)), acc[r][c], ninf));
    }
    rmax[r] = std::max(rmax[r], hn::GetLane(hn::MaxOfLanes(d, m)));
  }
}

// Every row of q against the C·N keys at kt: the keys' panel (D × C·N floats) stays in L1 while
// the rows stream past it, four at a time.
template <int C>
HWY_INLINE void Panel(const float* q, int64_t ldq, int64_t m, const float* kt, int64_t ldkt,
                      int64_t D, float* s, int64_t lds, float* rmax, int64_t valid) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4)
    Block<4, C>(q + i * ldq, ldq, kt, ldkt, D, s + i * lds, lds, rmax ? rmax + i : nullptr, valid);
  for (; i < m; ++i)
    Block<1, C>(q + i * ldq, ldq, kt, ldkt, D, s + i * lds, lds, rmax ? rmax + i : nullptr, valid);
}

// Scores of the first n of the `packed` keys whose panels are at kt (qk_tile.h): within a panel of
// w keys, blocks of 3 vectors of keys, then of one. The last panel scored is scored whole.
void QkOuter(const float* q, int64_t ldq, int64_t m, const float* kt, int64_t n, int64_t packed,
             int64_t D, float* s, int64_t lds, float* rmax) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  const int64_t npad = padded_keys(packed);  // a multiple of every target's lane count
  for (int64_t p0 = 0; p0 < n; p0 += kKeyPanel) {
    const int64_t w = std::min(kKeyPanel, npad - p0);
    const float* panel = kt + p0 * D;
    int64_t j = 0;
    for (; j + 3 * N <= w; j += 3 * N)
      Panel<3>(q, ldq, m, panel + j, w, D, s + p0 + j, lds, rmax, n - p0 - j);
    for (; j < w; j += N) Panel<1>(q, ldq, m, panel + j, w, D, s + p0 + j, lds, rmax, n - p0 - j);
  }
}

// Dot products of up to kDotRows rows with each key, read once from its row-major place: lane l
// chains d = l, l + N, … in order, the lanes are summed by SumOfLanes, then the D mod N last
// products are added in order.
template <int R>
HWY_INLINE void DotRows(const float* q, int64_t ldq, const float* k, int64_t ldk, int64_t n,
                        int64_t D, float* s, int64_t lds) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  const int64_t body = D / N * N;
  using V = hn::Vec<decltype(d)>;
  for (int64_t j = 0; j < n; ++j) {
    const float* kj = k + j * ldk;
    V acc[R];
    for (int r = 0; r < R; ++r) acc[r] = hn::Zero(d);
    for (int64_t x = 0; x < body; x += N) {
      const V kx = hn::LoadU(d, kj + x);
      for (int r = 0; r < R; ++r) acc[r] = hn::MulAdd(hn::LoadU(d, q + r * ldq + x), kx, acc[r]);
    }
    for (int r = 0; r < R; ++r) {
      float total = hn::GetLane(hn::SumOfLanes(d, acc[r]));
      const hn::CappedTag<float, 1> d1;  // the tail through the target's own multiply-add
      for (int64_t x = body; x < D; ++x)
        total = hn::GetLane(
            hn::MulAdd(hn::Set(d1, q[r * ldq + x]), hn::Set(d1, kj[x]), hn::Set(d1, total)));
      s[r * lds + j] = total;
    }
  }
}

void QkDot(const float* q, int64_t ldq, int64_t m, const float* k, int64_t ldk, int64_t n,
           int64_t D, float* s, int64_t lds) {
  switch (m) {
    case 4:
      return DotRows<4>(q, ldq, k, ldk, n, D, s, lds);
    case 3:
      return DotRows<3>(q, ldq, k, ldk, n, D, s, lds);
    case 2:
      return DotRows<2>(q, ldq, k, ldk, n, D, s, lds);
    case 1:
      return DotRows<1>(q, ldq, k, ldk, n, D, s, lds);
    default:
      return;
  }
}

}  // namespace qkv::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv::cpu {

HWY_EXPORT(QkOuter);
HWY_EXPORT(QkDot);
static_assert(kDotRows == 4, "QkDot has a case for each row count up to kDotRows");

void pack_keys(const float* k, int64_t ldk, int64_t n, int64_t D, float* kt) {
  const int64_t npad = padded_keys(n);
  for (int64_t p0 = 0; p0 < npad; p0 += kKeyPanel) {
    const int64_t w = std::min(kKeyPanel, npad - p0), keys = std::min(w, n - p0);
    float* panel = kt + p0 * D;
    for (int64_t x = 0; x < D; ++x) std::fill(panel + x * w + keys, panel + (x + 1) * w, 0.0f);
    // Blocks of 16 keys: their 16 reads of a column stay within 16 cached rows.
    for (int64_t j0 = 0; j0 < keys; j0 += 16) {
      const int64_t j1 = std::min(keys, j0 + 16);
      for (int64_t x = 0; x < D; ++x)
        for (int64_t j = j0; j < j1; ++j) panel[x * w + j] = k[(p0 + j) * ldk + x];
    }
  }
}

void qk_tile(const float* q, int64_t ldq, int64_t m, KeyTile& keys, int64_t D, float* s,
             int64_t lds, QkForm form, float* row_max) {
  if (m <= 0 || keys.n <= 0) return;
  if (form == QkForm::kDot) {
    for (int64_t i = 0; i < m; i += kDotRows) HWY_DYNAMIC_DISPATCH(QkDot)
    (q + i * ldq, ldq, std::min(kDotRows, m - i), keys.k, keys.ldk, keys.n, D, s + i * lds, lds);
    for (int64_t i = 0; i < m && row_max; ++i)
      for (int64_t j = 0; j < keys.n; ++j) row_max[i] = std::max(row_max[i], s[i * lds + j]);
    return;
  }
  if (!keys.packed) {
    pack_keys(keys.k, keys.ldk, keys.n, D, keys.kt);
    keys.packed = keys.n;
  }
  HWY_DYNAMIC_DISPATCH(QkOuter)(q, ldq, m, keys.kt, keys.n, keys.packed, D, s, lds, row_max);
}

}  // namespace qkv::cpu
#endif  // HWY_ONCE
