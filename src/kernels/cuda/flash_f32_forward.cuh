// The float32 attention forward on CUDA cores (FFMA): FlashAttention-2 (Dao 2023, Algorithm 1).
//
// One block of 128 threads per (tile of BM query rows, query head, batch entry [, key split]).
// The Q tile stays in shared memory; K and V stream through it in tiles of BN keys. Each row keeps
// a running max m and sum l of its exponentials (the online softmax of Milakov & Gimelshein 2018)
// in base-2 units (flash_common.cuh), rescaling its output accumulator when m grows.
//
// Threads form a 16 × 8 grid: ty = tid / 8 owns rows ty + 16a, tx = tid % 8 owns keys tx + 8b of
// the score tile and columns tx + 8c of the output, so a row's statistics live in the 8 lanes of
// one warp that share its ty (shuffles with lane masks 1, 2, 4 reduce them). Shared tiles are
// stored row-major with an odd row pitch (D + 1, BN + 1): a warp's reads of 4 rows × 1 column or
// 8 rows × 1 column then fall in distinct banks, so every scalar load of the products is one
// wavefront. No vector loads: correctness for every head dim first (a D not a multiple of 4 would
// need another path), and the emulator runs the very same loads.
//
// Decoding (few query rows, many keys) leaves most of the GPU idle with one block per row tile,
// so the keys are split (FlashDecoding; Dao et al. 2023): each block writes its rows' partial
// (m, l, unnormalized o) and combine_kernel merges them in split order. The split count follows
// from the shape alone, never from the device or the timing, so the bits do not change.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cuda/flash_common.cuh"
#include "qkv/tensor.h"

namespace qkv::cuda::kernel {
inline namespace QKV_SIMT_NAMESPACE {
namespace f32 {

inline constexpr int kThreads = 128;  // 4 warps: a 16 × 8 grid of threads
// Blocks wanted before the keys are split: 2 per SM of an H100/H200 (132 SMs). A constant, not
// the device's count, so that the split (and so the bits) is the same on every GPU.
inline constexpr int kWantBlocks = 2 * 132;

QKV_DEVICE float inf() { return __int_as_float(0x7f800000); }
QKV_DEVICE float quiet_nan() { return __int_as_float(0x7fc00000); }
QKV_DEVICE bool finite(float x) { return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u; }
QKV_DEVICE int imin(int a, int b) { return a < b ? a : b; }
QKV_DEVICE int imax(int a, int b) { return a > b ? a : b; }

// OR and sum over the 8 lanes of a row group (lanes that differ in bits 0..2 only): a fixed tree,
// so every lane gets the same bits.
QKV_DEVICE int or8(int v) {
  v |= __shfl_xor_sync(0xffffffffu, v, 1);
  v |= __shfl_xor_sync(0xffffffffu, v, 2);
  v |= __shfl_xor_sync(0xffffffffu, v, 4);
  return v;
}
QKV_DEVICE float sum8(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  v += __shfl_xor_sync(0xffffffffu, v, 4);
  return v;
}
QKV_DEVICE float max8(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 4));
  return v;
}
QKV_DEVICE int or32(int v) {
  for (int m = 1; m < 32; m <<= 1) v |= __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}
QKV_DEVICE float sum32(float v) {
  for (int m = 1; m < 32; m <<= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

// acc[a][b] += Σ_k A(k, row0 + 16a)·B(k, col0 + 8b) for k = 0, 1, ..., n − 1 in that order, with
// A(k, r) = A[k·AK + r·AR] and B(k, c) = B[k·BK + c·BC]: one fmaf chain per entry. The scores
// start from 0 and run over d = 0 .. Dk − 1 in both the forward and the backward, which therefore
// form the very same logits (flash_common.cuh: "the same operations in the same order").
template <int TM, int TN, int AK, int AR, int BK, int BC>
QKV_DEVICE void micro_gemm(float (&acc)[TM][TN], const float* A, int row0, const float* B, int col0,
                           int n) {
  for (int k = 0; k < n; ++k) {
    float a[TM], b[TN];
    QKV_UNROLL
    for (int t = 0; t < TM; ++t) a[t] = A[k * AK + (row0 + 16 * t) * AR];
    QKV_UNROLL
    for (int t = 0; t < TN; ++t) b[t] = B[k * BK + (col0 + 8 * t) * BC];
    QKV_UNROLL
    for (int x = 0; x < TM; ++x) {
      QKV_UNROLL
      for (int y = 0; y < TN; ++y) acc[x][y] = fmaf(a[x], b[y], acc[x][y]);
    }
  }
}

// Copies rows [0, n) of a [rows, D] float32 matrix (row r at src + r·stride, contiguous columns)
// into dst[r·(DC + 1) + d] for r < R, d < DC, zero where r ≥ n or d ≥ D. A warp per row (coalesced
// reads of the row). With `clean`, non-finite values become 0; with `bad`, bad[r] says whether row
// r had any (the forward's value rows: a NaN of a masked key must not reach the output through
// 0·NaN, while one that a row sees must poison it). A warp's flags travel as one bit per row, so
// one 32-lane OR per tile flags them all.
template <int R, int DC>
QKV_DEVICE void load_rows(float* dst, const float* src, int64_t stride, int n, int D, bool clean,
                          int* bad) {
  static_assert(R <= 4 * 32, "one flag bit per row of a warp");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  unsigned seen = 0;
  for (int r = warp; r < R; r += kThreads / 32) {
    const float* row = src + r * stride;
    for (int d = lane; d < DC; d += 32) {
      float x = 0.0f;
      if (r < n && d < D) x = row[d];
      if (!finite(x)) {
        seen |= 1u << (r / 4);
        if (clean) x = 0.0f;
      }
      dst[r * (DC + 1) + d] = x;
    }
  }
  if (bad != nullptr) {
    seen = static_cast<unsigned>(or32(static_cast<int>(seen)));
    if (lane < R / 4) bad[warp + 4 * lane] = (seen >> lane) & 1u;
  }
}

// What the forward writes: out (strided [B, Hq, L, Dv]), the logsumexp and the softmax rows where
// set; or, when the keys are split, each split's partial rows.
struct ForwardOut {
  float* out = nullptr;
  int64_t out_stride[3] = {0, 0, 0};
  float* lse = nullptr;
  float* max = nullptr;
  float* log_sum = nullptr;
  int splits = 1;
  int keys_per_split = 0;  // a multiple of the kernel's BN
  // [splits][B·Hq·L] (o: × Dv): the unnormalized output, max and sum of a split's keys, and its
  // flags (bit 0: the row is NaN; bit 1: a visible value was not finite).
  float* part_o = nullptr;
  float* part_m = nullptr;
  float* part_l = nullptr;
  int* part_flags = nullptr;
};

// Writes one row's results from its max m, sum l and flags; `value(c)` is column c's unnormalized
// output. Poisoned: everything NaN. Nothing seen: out 0, logsumexp −∞. Else out = o / l, NaN in
// whole where a visible value was not finite or a column is not (the contract of flash_cuda.h).
// Called by one thread per row for the statistics (`lead`) and by every thread for its columns.
QKV_DEVICE void write_stats(const ForwardOut& w, int64_t row, int poisoned, float m, float l) {
  float lse, mx, ls;
  if (poisoned) {
    lse = mx = ls = quiet_nan();
  } else if (m == -inf()) {
    lse = mx = ls = -inf();
  } else {
    ls = logf(l);
    mx = m;
    lse = m + ls;
  }
  if (w.lse) w.lse[row] = lse;
  if (w.max) w.max[row] = mx;
  if (w.log_sum) w.log_sum[row] = ls;
}

template <int BM, int BN, int DC>
struct ForwardTile {
  static constexpr int kLd = DC + 1, kLp = BN + 1;
  static constexpr std::size_t shared_bytes() {
    return sizeof(float) * (BM * kLd + 2 * BN * kLd + BM * kLp) + sizeof(int) * BN;
  }
};

// q: [B, Hq, L, Dk], k: [B, Hkv, S, Dk], v: [B, Hkv, S, Dv] (Params); grid (row tiles, Hq,
// B·splits), kThreads threads, ForwardTile::shared_bytes() of dynamic shared memory.
template <int BM, int BN, int DC>
QKV_KERNEL void QKV_LAUNCH_BOUNDS(kThreads, 1) forward_kernel(Params p, ForwardOut w) {
  static_assert(BM % 16 == 0 && BN % 8 == 0 && DC % 8 == 0, "the 16 x 8 thread grid");
  constexpr int RM = BM / 16, RN = BN / 8, CN = DC / 8;
  constexpr int LD = ForwardTile<BM, BN, DC>::kLd, LP = ForwardTile<BM, BN, DC>::kLp;
  QKV_DYNAMIC_SHARED(float, smem);
  float* qs = smem;
  float* ks = qs + BM * LD;
  float* vs = ks + BN * LD;
  float* ps = vs + BN * LD;
  int* vbad = reinterpret_cast<int*>(ps + BM * LP);

  const int tid = threadIdx.x, tx = tid % 8, ty = tid / 8;
  const int i0 = blockIdx.x * BM, h = blockIdx.y;
  const int b = blockIdx.z / w.splits, split = blockIdx.z % w.splits;
  const int kv = h / p.group;
  const int rows = imin(BM, p.L - i0);
  const float* q = static_cast<const float*>(p.q) + b * p.q_stride[0] + h * p.q_stride[1];
  const float* k = static_cast<const float*>(p.k) + b * p.k_stride[0] + kv * p.k_stride[1];
  const float* v = static_cast<const float*>(p.v) + b * p.v_stride[0] + kv * p.v_stride[1];

  // Q as read: a non-finite q_i makes every score of row i non-finite, which poisons the row
  // where it sees a key, as the contract wants.
  load_rows<BM, DC>(qs, q + i0 * p.q_stride[2], p.q_stride[2], rows, p.Dk, false, nullptr);

  const int split_begin = split * w.keys_per_split;
  const int split_end = imin(p.S, split_begin + w.keys_per_split);
  int end[RM];
  float m[RM], l[RM], o[RM][CN];
  int poisoned[RM], bad_value[RM];
  QKV_UNROLL
  for (int a = 0; a < RM; ++a) {
    const int i = i0 + ty + 16 * a;
    end[a] = i < p.L ? imin(visible_end(p, b, i), split_end) : 0;
    m[a] = -inf(), l[a] = 0.0f, poisoned[a] = 0, bad_value[a] = 0;
    QKV_UNROLL
    for (int c = 0; c < CN; ++c) o[a][c] = 0.0f;
  }
  // Keys past the last row's visible end are seen by no row of the tile (visible_end grows with
  // i): under causality the tiles above the diagonal are skipped whole.
  const int tile_end = imin(split_end, visible_end(p, b, i0 + rows - 1));

  for (int j0 = split_begin; j0 < tile_end; j0 += BN) {
    const int n = imin(BN, tile_end - j0);
    __syncthreads();  // the previous tile's readers of ks, vs, ps and vbad are done
    load_rows<BN, DC>(ks, k + j0 * p.k_stride[2], p.k_stride[2], n, p.Dk, false, nullptr);
    load_rows<BN, DC>(vs, v + j0 * p.v_stride[2], p.v_stride[2], n, p.Dv, true, vbad);
    __syncthreads();

    float s[RM][RN];
    QKV_UNROLL
    for (int a = 0; a < RM; ++a) {
      QKV_UNROLL
      for (int c = 0; c < RN; ++c) s[a][c] = 0.0f;
    }
    micro_gemm<RM, RN, 1, LD, 1, LD>(s, qs, ty, ks, tx, p.Dk);

    // Logits in base-2 units; −∞ where row i does not see key j. A visible logit that is not
    // finite (NaN or ∞ in q_i or k_j, a NaN or +∞ bias, or float32 overflow) poisons its row and
    // is left out of the max, so that nothing non-finite reaches the accumulators.
    QKV_UNROLL
    for (int a = 0; a < RM; ++a) {
      const int i = i0 + ty + 16 * a;
      float tile_max = -inf();
      QKV_UNROLL
      for (int c = 0; c < RN; ++c) {
        const int j = j0 + tx + 8 * c;
        float x = -inf();
        if (j < end[a]) {
          const float term = mask_term(p, b, h, i, j);
          if (term != -inf()) {
            x = fmaf(s[a][c], p.scale, term);
            if (!finite(x)) poisoned[a] = 1, x = -inf();
            if (vbad[j - j0]) bad_value[a] = 1;
          }
        }
        s[a][c] = x;
        tile_max = fmaxf(tile_max, x);
      }
      tile_max = max8(tile_max);
      const float m_new = fmaxf(m[a], tile_max);
      // A tile this row does not see (m_new = −∞) leaves it as it was: exp2(−∞ − (−∞)) is NaN.
      const float alpha = m_new == -inf() ? 1.0f : exp_of(m[a] - m_new);
      float sum = 0.0f;
      QKV_UNROLL
      for (int c = 0; c < RN; ++c) {
        const float e = s[a][c] == -inf() ? 0.0f : exp_of(s[a][c] - m_new);
        sum += e;
        ps[(ty + 16 * a) * LP + tx + 8 * c] = e;
      }
      // Each lane keeps its own share of l (the same α scales them all); summed at the end.
      l[a] = fmaf(l[a], alpha, sum);
      m[a] = m_new;
      QKV_UNROLL
      for (int c = 0; c < CN; ++c) o[a][c] *= alpha;
    }
    __syncthreads();
    // O += P·V over the whole tile: keys past n have P = 0 and V = 0.
    micro_gemm<RM, CN, 1, LP, LD, 1>(o, ps, ty, vs, tx, BN);
  }

  // Finish each row: the lanes' shares of l and the flags summed over the row's 8 lanes.
  QKV_UNROLL
  for (int a = 0; a < RM; ++a) {
    const int i = i0 + ty + 16 * a;
    const float l_row = sum8(l[a]);
    const int flags = or8(poisoned[a] | (bad_value[a] << 1));
    const int64_t row = (static_cast<int64_t>(b) * p.Hq + h) * p.L + i;
    if (w.splits > 1) {
      if (i < p.L) {
        const int64_t at = static_cast<int64_t>(split) * p.B * p.Hq * p.L + row;
        if (tx == 0) w.part_m[at] = m[a], w.part_l[at] = l_row, w.part_flags[at] = flags;
        QKV_UNROLL
        for (int c = 0; c < CN; ++c)
          if (tx + 8 * c < p.Dv) w.part_o[at * p.Dv + tx + 8 * c] = o[a][c];
      }
      continue;
    }
    const bool dead = (flags & 1) || m[a] == -inf();
    const float inv = dead ? 0.0f : 1.0f / l_row;
    int bad = 0;
    QKV_UNROLL
    for (int c = 0; c < CN; ++c) {
      o[a][c] *= inv;
      if (tx + 8 * c < p.Dv && !finite(o[a][c])) bad = 1;
    }
    bad = or8(bad) | (flags >> 1);
    if (i >= p.L) continue;
    float* out = w.out + b * w.out_stride[0] + h * w.out_stride[1] + i * w.out_stride[2];
    const float fill = (flags & 1) || (!dead && bad) ? quiet_nan() : 0.0f;
    QKV_UNROLL
    for (int c = 0; c < CN; ++c) {
      const int col = tx + 8 * c;
      if (col < p.Dv) out[col] = (flags & 1) || bad || dead ? fill : o[a][c];
    }
    if (tx == 0) write_stats(w, row, flags & 1, m[a], l_row);
  }
}

// Merges the splits of each row, in split order: with M = max_s m_s, l = Σ l_s·2^(m_s − M) and
// o = Σ o_s·2^(m_s − M). A warp per row, a lane per column (and every 32nd after it).
QKV_KERNEL void QKV_LAUNCH_BOUNDS(kThreads, 1) combine_kernel(Params p, ForwardOut w) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t rows_total = static_cast<int64_t>(p.B) * p.Hq * p.L;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + warp;
  if (row >= rows_total) return;  // a whole warp leaves together: no shuffle is split
  int flags = 0;
  float m = -inf();
  for (int s = 0; s < w.splits; ++s) {
    flags |= w.part_flags[s * rows_total + row];
    m = fmaxf(m, w.part_m[s * rows_total + row]);
  }
  const bool dead = (flags & 1) || m == -inf();
  float l = 0.0f;
  if (!dead)
    for (int s = 0; s < w.splits; ++s) {
      const float ms = w.part_m[s * rows_total + row];
      if (ms != -inf()) l = fmaf(w.part_l[s * rows_total + row], exp_of(ms - m), l);
    }
  const float inv = dead ? 0.0f : 1.0f / l;
  const int i = static_cast<int>(row % p.L), h = static_cast<int>(row / p.L % p.Hq),
            b = static_cast<int>(row / (static_cast<int64_t>(p.L) * p.Hq));
  float* out = w.out + b * w.out_stride[0] + h * w.out_stride[1] + i * w.out_stride[2];
  // Two passes over the columns: the first finds whether any is not finite.
  int bad = flags >> 1;
  for (int c0 = 0; c0 < p.Dv; c0 += 32) {
    const int c = c0 + lane;
    float acc = 0.0f;
    if (!dead && c < p.Dv)
      for (int s = 0; s < w.splits; ++s) {
        const float ms = w.part_m[s * rows_total + row];
        if (ms != -inf())
          acc = fmaf(w.part_o[(s * rows_total + row) * p.Dv + c], exp_of(ms - m), acc);
      }
    acc *= inv;
    if (c < p.Dv) {
      if (!finite(acc)) bad = 1;
      out[c] = acc;
    }
  }
  bad = or32(bad);
  if ((flags & 1) || (!dead && bad))
    for (int c = lane; c < p.Dv; c += 32) out[c] = quiet_nan();
  if (lane == 0) write_stats(w, row, flags & 1, m, l);
}

// The largest head dim the float32 kernels take (the widest tile variant's).
inline constexpr int kMaxHeadDim = 256;

// How many key splits a forward of this shape runs: 1 where B·Hq·(row tiles) blocks fill the
// GPU, else enough to reach kWantBlocks with at least 2 key tiles per split; *keys receives the
// keys per split (a multiple of bn; S where there is one split). The shape alone decides.
inline int plan_splits(const Params& p, int bm, int bn, int* keys) {
  const int64_t tiles = (p.L + bm - 1) / bm;
  const int64_t blocks = static_cast<int64_t>(p.B) * p.Hq * tiles;
  *keys = p.S;
  if (blocks >= kWantBlocks || p.S < 4 * bn) return 1;
  int64_t splits = (kWantBlocks + blocks - 1) / blocks;
  if (splits > p.S / (2 * bn)) splits = p.S / (2 * bn);
  if (splits <= 1) return 1;
  const int64_t per = ((p.S + splits - 1) / splits + bn - 1) / bn * bn;
  *keys = static_cast<int>(per);
  return static_cast<int>((p.S + per - 1) / per);
}

template <int BM, int BN, int DC>
void run_forward(const Params& p, ForwardOut w, void* stream) {
  using Tile = ForwardTile<BM, BN, DC>;
  const int tiles = (p.L + BM - 1) / BM;
  w.splits = plan_splits(p, BM, BN, &w.keys_per_split);
  if (static_cast<int64_t>(p.B) * w.splits > 65535 || p.Hq > 65535)
    throw Error("CUDA: float32 attention: B = " + std::to_string(p.B) + " (times " +
                    std::to_string(w.splits) + " key splits) and Hq = " + std::to_string(p.Hq) +
                    " must each be at most 65535 (the grid's y and z)",
                Error::Kind::invalid_argument);
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(p.Hq),
                  static_cast<unsigned>(p.B * w.splits));
  if (w.splits == 1) {
    check_launch(qkv::simt::launch(forward_kernel<BM, BN, DC>, grid, dim3(kThreads),
                                   Tile::shared_bytes(), stream, p, w),
                 "the float32 attention forward's launch");
    return;
  }
  // Scratch for the splits' partial rows, freed (stream-ordered) after the combine.
  const int64_t rows_total = static_cast<int64_t>(p.B) * p.Hq * p.L;
  const int64_t parts = rows_total * w.splits;
  const std::size_t bytes = sizeof(float) * static_cast<std::size_t>(parts * (p.Dv + 2)) +
                            sizeof(int) * static_cast<std::size_t>(parts);
  void* scratch = nullptr;
  check_launch(qkv::simt::device_alloc(&scratch, bytes, stream),
               "the allocation of the float32 forward's split scratch");
  w.part_o = static_cast<float*>(scratch);
  w.part_m = w.part_o + parts * p.Dv;
  w.part_l = w.part_m + parts;
  w.part_flags = reinterpret_cast<int*>(w.part_l + parts);
  auto e = qkv::simt::launch(forward_kernel<BM, BN, DC>, grid, dim3(kThreads), Tile::shared_bytes(),
                             stream, p, w);
  if (e == qkv::simt::kSuccess) {
    const int64_t blocks = (rows_total + kThreads / 32 - 1) / (kThreads / 32);
    e = qkv::simt::launch(combine_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0,
                          stream, p, w);
  }
  qkv::simt::device_free(scratch, stream);
  check_launch(e, "the float32 attention forward's launch (split keys)");
}

// flash_forward for Element::f32 (flash_cuda.h's contract). Tile variants by the larger head dim:
// ≤ 64: 64 rows × 64 keys; ≤ 128: 64 × 32; ≤ 256: 32 × 16 (shared memory ≤ 73 KB each).
inline void forward(const Problem& problem, Strided out, float* logsumexp, SoftmaxRows rows) {
  if (problem.B == 0 || problem.Hq == 0 || problem.L == 0) return;
  if (problem.Dk > kMaxHeadDim || problem.Dv > kMaxHeadDim)
    throw Error("CUDA: the float32 attention kernels take head dims up to " +
                    std::to_string(kMaxHeadDim) + "; got Dk = " + std::to_string(problem.Dk) +
                    ", Dv = " + std::to_string(problem.Dv),
                Error::Kind::invalid_argument);
  const Params p = params_of(problem);
  ForwardOut w;
  w.out = static_cast<float*>(out.data);
  for (int d = 0; d < 3; ++d) w.out_stride[d] = out.stride[d];
  w.lse = logsumexp, w.max = rows.max, w.log_sum = rows.log_sum;
  const int64_t D = problem.Dk > problem.Dv ? problem.Dk : problem.Dv;
  if (D <= 64)
    run_forward<64, 64, 64>(p, w, problem.stream);
  else if (D <= 128)
    run_forward<64, 32, 128>(p, w, problem.stream);
  else
    run_forward<32, 16, 256>(p, w, problem.stream);
}

}  // namespace f32
}  // namespace QKV_SIMT_NAMESPACE
}  // namespace qkv::cuda::kernel
