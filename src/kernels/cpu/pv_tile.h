// The output update of the fused forward, O += P·V for one tile: P the tile's probabilities
// (rows × keys, still in L1 where the softmax left them), V the tile's values, in place or packed.
// A register-blocked Highway kernel, so that P is never re-packed as an SGEMM call would, and the
// order of every sum is fixed: each output element is one chain of multiply-adds over the keys
// j = 0, 1, …, n − 1, whatever the rows, the blocking, the target's width or the thread. On
// targets without FMA (SSE4 and older) a multiply-add is a multiply and an add.
#pragma once

#include <cstdint>

namespace qkv::cpu {

// Values as pv_tile reads them: in place, rows ldv apart (keys = 0); or as pack_values left them,
// in panels of kValuePanel columns (the last one narrower): the panel of columns c0 … c0 + w
// holds the values of all `keys` keys as a keys × w block, row-major, at v + c0·keys. A pass over
// a few keys then reads one contiguous block, which stays in L1 whole (in place, the rows of a
// 64-wide head fall into half the cache sets; issue 12).
inline constexpr int64_t kValuePanel = 32;
struct ValueRows {
  const float* v;
  int64_t ldv;
  int64_t keys = 0;  // packed: the number of keys packed; 0: in place
};

// Writes the values of keys j0 … j0 + n (rows of v, ldv apart) into `packed`, the panels of
// `keys` keys' values.
void pack_values(const float* v, int64_t ldv, int64_t n, int64_t Dv, float* packed, int64_t keys,
                 int64_t j0);

// o[i·ldo + c] += Σ_j p[i·ldp + j]·v_(j0 + j, c) for i < m, j < n, c < Dv.
void pv_tile(const float* p, int64_t ldp, int64_t m, const ValueRows& v, int64_t j0, int64_t n,
             int64_t Dv, float* o, int64_t ldo);
// The same with P given transposed, n × m (the backward's dV += Pᵀ·dO and dK += dXᵀ·Q):
// o[i·ldo + c] += Σ_j pt[j·ldpt + i]·v_(j0 + j, c), each output one chain over j in order.
void pv_tile_transposed(const float* pt, int64_t ldpt, int64_t m, const ValueRows& v, int64_t j0,
                        int64_t n, int64_t Dv, float* o, int64_t ldo);
// Values in place: o[i·ldo + c] += Σ_j p[i·ldp + j]·v[j·ldv + c].
inline void pv_tile(const float* p, int64_t ldp, int64_t m, const float* v, int64_t ldv, int64_t n,
                    int64_t Dv, float* o, int64_t ldo) {
  pv_tile(p, ldp, m, ValueRows{v, ldv}, 0, n, Dv, o, ldo);
}

}  // namespace qkv::cpu
