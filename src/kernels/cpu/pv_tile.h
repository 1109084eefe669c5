// The output update of the fused forward, O += P·V for one tile: P the tile's probabilities
// (rows × keys, still in L1 where the softmax left them), V the tile's values read in place.
// A register-blocked Highway kernel, so that P is never re-packed as an SGEMM call would, and the
// order of every sum is fixed: each output element is one chain of multiply-adds over the keys
// j = 0, 1, …, n − 1, whatever the rows, the blocking, the target's width or the thread. On
// targets without FMA (SSE4 and older) a multiply-add is a multiply and an add.
#pragma once

#include <cstdint>

namespace qkv::cpu {

// o[i·ldo + c] += Σ_j p[i·ldp + j]·v[j·ldv + c] for i < m, j < n, c < Dv.
void pv_tile(const float* p, int64_t ldp, int64_t m, const float* v, int64_t ldv, int64_t n,
             int64_t Dv, float* o, int64_t ldo);

}  // namespace qkv::cpu
