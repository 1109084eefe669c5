// The bf16 / fp16 attention forward on tensor cores: FlashAttention-2's algorithm (Dao 2023,
// Algorithm 1) with mma.sync m16n8k16 (mma.cuh) for both products and the softmax in float32.
//
// q: [B, Hq, L, Dk], k: [B, Hkv, S, Dk], v: [B, Hkv, S, Dv], out: [B, Hq, L, Dv] (16-bit);
// logsumexp and SoftmaxRows: [B, Hq, L] float32 (flash_cuda.h). One block of 4 warps per
// (64-row tile, query head, batch); warp w owns rows 16w..16w+15 of the tile, and each lane the
// rows g and g+8 of its warp's 16 (g = lane / 4, mma.cuh's group). Per key tile of 64:
//   S = Q·Kᵀ        Q from shared memory (or registers: kQInRegisters), K from shared memory
//   x = S·scale·log2(e) + mask·log2(e), −∞ where the key is not visible (flash_common.cuh)
//   m' = max(m, rowmax x);  P = 2^(x − m');  l = l·2^(m − m') + rowsum P;  O = O·2^(m − m')
//   O += round16(P)·V      P's accumulator fragment is the A fragment of the next product
// and at the end out = O / l, logsumexp = (m + log2 l)·ln 2.
//
// Head dims: the kernel is compiled for a padded width kD ∈ {64, 128, 256} (64 and 128 are the
// fast paths); Dk, Dv ≤ kD are read as they are and padded with zeros in shared memory, which
// adds nothing to a dot product.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cuda/flash_common.cuh"
#include "kernels/cuda/flash_cuda.h"
#include "kernels/cuda/half16.cuh"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/simt.h"
#include "qkv/tensor.h"

namespace qkv::cuda::kernel {
inline namespace QKV_SIMT_NAMESPACE {
namespace tc {

using simt::Half16;

inline constexpr int kWarps = 4;
inline constexpr int kThreads = 32 * kWarps;
// Shared rows are kD + 8 halves long: a row is then (kD/2 + 4) 32-bit words, so the rows g = 0..7
// of a fragment load start 4 banks apart and the 4 lanes t of a group fill the 4 banks between:
// the 32 lanes of a 32-bit fragment load hit 32 different banks. For the 16-bit loads of a
// B operand stored [k][n], rows 2t start 8 banks apart and the groups g add g/2: no conflict.
inline constexpr int kPad = 8;
inline constexpr int kTileRows = 64;  // forward: query rows per block (16 per warp)
inline constexpr int kTileKeys = 64;  // keys per tile, forward and backward

QKV_HOST_DEVICE float negative_infinity() { return bits_float(0xFF800000u); }

// Eight 16-bit elements, one 16-byte load or store.
struct alignas(16) Half8 {
  uint32_t w[4];
};

QKV_DEVICE Half8 load_half8(const uint16_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const Half8*>(p);
#else
  Half8 v;
  std::memcpy(&v, p, 16);
  return v;
#endif
}
QKV_DEVICE void store_half8(uint16_t* p, const Half8& v) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<Half8*>(p) = v;
#else
  std::memcpy(p, &v, 16);
#endif
}
// Two adjacent 16-bit elements as one register (p 4-byte aligned: an even column of a row).
QKV_DEVICE uint32_t load_pair(const uint16_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint32_t*>(p);
#else
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}

// How load_tile treats non-finite elements (±∞, NaN).
enum class NonFinite {
  keep,      // as they are: every product that reads them is one the row must see
  zero,      // stored as 0: a product term whose other factor is 0 (a masked key, a row that
             // sees nothing) must add 0, never 0·NaN; the rows that see them carry the NaN
             // otherwise (the backward: through the forward's rows and D)
  zero_flag  // stored as 0, and bad[r] says whether row r had any (the forward's value rows: the
             // rows that see one are poisoned by the flag instead)
};

// Rows [0, kRows) × columns [0, kD) of a shared tile (row stride kD + kPad) from device rows
// src + r·row_stride: rows below `rows` and columns below `cols` read, the rest zero. `vec`: src
// and row_stride allow 16-byte loads (the launcher checked). kMode: what becomes of ±∞ and NaN
// (NonFinite). Every thread of the block calls this.
template <Half16 kType, int kRows, int kD, NonFinite kMode>
QKV_DEVICE void load_tile(uint16_t* dst, const uint16_t* src, int64_t row_stride, int rows,
                          int cols, bool vec, uint8_t* bad) {
  constexpr int kChunks = kD / 8;
  static_assert((kRows * kChunks) % kThreads == 0, "whole passes of the block");
  static_assert(32 % kChunks == 0, "a row's chunks in one warp");
  const int tid = static_cast<int>(threadIdx.x);
  QKV_UNROLL
  for (int pass = 0; pass < kRows * kChunks / kThreads; ++pass) {
    const int index = pass * kThreads + tid;
    const int r = index / kChunks, c = (index % kChunks) * 8;
    Half8 v = {{0, 0, 0, 0}};
    if (r < rows) {
      const uint16_t* s = src + r * row_stride + c;
      if (vec && c + 8 <= cols) {
        v = load_half8(s);
      } else {
        uint16_t e[8];
        QKV_UNROLL
        for (int k = 0; k < 8; ++k) e[k] = c + k < cols ? s[k] : 0;
        QKV_UNROLL
        for (int k = 0; k < 4; ++k) v.w[k] = simt::pack16(e[2 * k], e[2 * k + 1]);
      }
    }
    if constexpr (kMode != NonFinite::keep) {
      int flag = 0;
      QKV_UNROLL
      for (int k = 0; k < 4; ++k) {
        const uint16_t lo = static_cast<uint16_t>(v.w[k] & 0xFFFFu);
        const uint16_t hi = static_cast<uint16_t>(v.w[k] >> 16);
        const bool bad_lo = half_not_finite<kType>(lo), bad_hi = half_not_finite<kType>(hi);
        flag |= bad_lo | bad_hi;
        v.w[k] = simt::pack16(bad_lo ? 0 : lo, bad_hi ? 0 : hi);
      }
      if constexpr (kMode == NonFinite::zero_flag) {
        // The row's chunks sit in kChunks consecutive lanes of one warp.
        for (int offset = 1; offset < kChunks; offset <<= 1)
          flag |= __shfl_xor_sync(0xffffffffu, flag, offset);
        if (c == 0) bad[r] = static_cast<uint8_t>(flag);
      }
    }
    store_half8(dst + r * (kD + kPad) + c, v);
  }
}

// A fragments (mma.cuh) of a 16×16 block at (row m0, col k0) of a shared tile stored [m][k].
QKV_DEVICE void load_a(uint32_t (&a)[4], const uint16_t* s, int ld, int m0, int k0, int g, int t) {
  const uint16_t* p = s + (m0 + g) * ld + k0 + 2 * t;
  a[0] = load_pair(p);
  a[1] = load_pair(p + 8 * ld);
  a[2] = load_pair(p + 8);
  a[3] = load_pair(p + 8 * ld + 8);
}
// B fragments of a 16×8 block (rows k0.., cols n0..) of a matrix stored transposed, [n][k]:
// the pairs along k are adjacent, one 32-bit load each.
QKV_DEVICE void load_b_nk(uint32_t (&b)[2], const uint16_t* s, int ld, int n0, int k0, int g,
                          int t) {
  const uint16_t* p = s + (n0 + g) * ld + k0 + 2 * t;
  b[0] = load_pair(p);
  b[1] = load_pair(p + 8);
}
// B fragments of a 16×8 block of a matrix stored as it is, [k][n]: two 16-bit loads per register
// (ldmatrix.trans would do it in one, but the emulator runs plain loads only).
QKV_DEVICE void load_b_kn(uint32_t (&b)[2], const uint16_t* s, int ld, int n0, int k0, int g,
                          int t) {
  const uint16_t* p = s + (k0 + 2 * t) * ld + n0 + g;
  b[0] = simt::pack16(p[0], p[ld]);
  b[1] = simt::pack16(p[8 * ld], p[9 * ld]);
}

// The m16n8k16 accumulators of two adjacent 8-column tiles, c0 (cols 0..7) and c1 (cols 8..15),
// rounded to 16 bits, are the A fragment of the 16×16 block they form (mma.cuh: c[0..1] is
// (row g, cols 2t, 2t+1), c[2..3] row g+8; a[0] row g cols 2t.., a[1] row g+8, a[2] and a[3]
// the same at cols 2t+8..). This is how P and dS feed the next product without shared memory.
template <Half16 kType>
QKV_DEVICE void accumulators_as_a(uint32_t (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
  a[0] = pack_half2<kType>(c0[0], c0[1]);
  a[1] = pack_half2<kType>(c0[2], c0[3]);
  a[2] = pack_half2<kType>(c1[0], c1[1]);
  a[3] = pack_half2<kType>(c1[2], c1[3]);
}

// Logit (b, h, i, j), scale·s + the mask's term, for a key below the row's visible_end, from the
// product s = q_i·k_j: the forward and both backward kernels form it with this very expression, so
// the backward's exponents are the forward's (flash_common.cuh). A keep mask's −∞ (and a bias of
// −∞) masks without looking at s, which may be NaN for a masked key. A visible logit that is not
// finite — ±∞ or NaN in q_i or k_j, a bias of +∞ or NaN, float32 overflow — is NaN: it must poison
// its row (qkv/attention.h), and a −∞ would read as masked (q_i·k_j = −∞ when k_j holds −∞ and
// q_i's matching entry is positive), a +∞ only by the accident of ∞ − ∞.
QKV_DEVICE float logit(const Params& p, int b, int h, int i, int j, float s) {
  const float term = mask_term(p, b, h, i, j);
  if (term == negative_infinity()) return term;
  const float x = fmaf(s, p.scale, term);
  return (float_bits(x) & 0x7F800000u) == 0x7F800000u ? bits_float(0x7FC00000u) : x;
}

// Where the forward writes (flash_cuda.h): out [B, Hq, L, Dv] 16-bit, the rest float32 [B, Hq, L]
// or null. vec: q, k, v allow 16-byte loads (16-byte aligned, strides multiples of 8).
struct ForwardOutputs {
  void* out = nullptr;
  int64_t out_stride[3] = {0, 0, 0};
  float* logsumexp = nullptr;
  float* max = nullptr;
  float* log_sum = nullptr;
  int vec = 0;
};

template <int kD>
struct ForwardShape {
  static constexpr int kLd = kD + kPad;
  // Q held in registers while the keys stream by (FlashAttention-2 keeps Q in registers) up to
  // kD = 128; at 256 its 64 registers would push the 128 of O into spills, so it stays shared.
  static constexpr bool kQInRegisters = kD <= 128;
  static constexpr size_t kSharedBytes =
      (kTileRows + 2 * kTileKeys) * kLd * sizeof(uint16_t) + kTileKeys;
};

template <Half16 kType, int kD>
QKV_KERNEL void QKV_LAUNCH_BOUNDS(kThreads, 1) forward_kernel(Params p, ForwardOutputs o) {
  using Shape = ForwardShape<kD>;
  constexpr int kLd = Shape::kLd;
  QKV_DYNAMIC_SHARED(uint16_t, shared);
  uint16_t* sq = shared;
  uint16_t* sk = sq + kTileRows * kLd;
  uint16_t* sv = sk + kTileKeys * kLd;
  uint8_t* bad = reinterpret_cast<uint8_t*>(sv + kTileKeys * kLd);

  const int b = static_cast<int>(blockIdx.z), h = static_cast<int>(blockIdx.y);
  const int hk = h / p.group;
  const int m0 = static_cast<int>(blockIdx.x) * kTileRows;
  const int rows = p.L - m0 < kTileRows ? p.L - m0 : kTileRows;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const bool vec = o.vec != 0;

  const uint16_t* q = static_cast<const uint16_t*>(p.q) + b * p.q_stride[0] + h * p.q_stride[1] +
                      m0 * p.q_stride[2];
  const uint16_t* k = static_cast<const uint16_t*>(p.k) + b * p.k_stride[0] + hk * p.k_stride[1];
  const uint16_t* v = static_cast<const uint16_t*>(p.v) + b * p.v_stride[0] + hk * p.v_stride[1];
  load_tile<kType, kTileRows, kD, NonFinite::keep>(sq, q, p.q_stride[2], rows, p.Dk, vec, nullptr);
  __syncthreads();

  uint32_t qa[Shape::kQInRegisters ? kD / 16 : 1][4];
  if constexpr (Shape::kQInRegisters) {
    QKV_UNROLL
    for (int kk = 0; kk < kD / 16; ++kk) load_a(qa[kk], sq, kLd, warp * 16, kk * 16, g, t);
  }

  // This lane's rows i[r] (r = 0: g, r = 1: g + 8) and the keys each sees, j < end[r]; rows past
  // L see nothing and are not written. Keys from kv_end on are visible to no row of the block:
  // never read (the causal tiles above the diagonal, the keys past key_lengths).
  int row[2], end[2];
  QKV_UNROLL
  for (int r = 0; r < 2; ++r) {
    row[r] = m0 + warp * 16 + g + 8 * r;
    end[r] = row[r] < p.L ? visible_end(p, b, row[r]) : 0;
  }
  const int kv_end = visible_end(p, b, m0 + rows - 1);

  float acc[kD / 8][4];
  QKV_UNROLL
  for (int n = 0; n < kD / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  float m[2] = {negative_infinity(), negative_infinity()}, l[2] = {0.0f, 0.0f};
  int poisoned[2] = {0, 0};

  for (int n0 = 0; n0 < kv_end; n0 += kTileKeys) {
    const int keys = kv_end - n0 < kTileKeys ? kv_end - n0 : kTileKeys;
    __syncthreads();  // every warp is done with the previous K and V tiles
    load_tile<kType, kTileKeys, kD, NonFinite::keep>(sk, k + n0 * p.k_stride[2], p.k_stride[2],
                                                     keys, p.Dk, vec, nullptr);
    load_tile<kType, kTileKeys, kD, NonFinite::zero_flag>(sv, v + n0 * p.v_stride[2], p.v_stride[2],
                                                          keys, p.Dv, vec, bad);
    __syncthreads();

    // S = Q·Kᵀ for the warp's 16 rows and the tile's 64 keys.
    float s[kTileKeys / 8][4];
    QKV_UNROLL
    for (int n = 0; n < kTileKeys / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
    QKV_UNROLL
    for (int kk = 0; kk < kD / 16; ++kk) {
      uint32_t a[4];
      if constexpr (Shape::kQInRegisters) {
        QKV_UNROLL
        for (int x = 0; x < 4; ++x) a[x] = qa[kk][x];
      } else {
        load_a(a, sq, kLd, warp * 16, kk * 16, g, t);
      }
      QKV_UNROLL
      for (int n = 0; n < kTileKeys / 8; ++n) {
        uint32_t bk[2];
        load_b_nk(bk, sk, kLd, n * 8, kk * 16, g, t);
        simt::mma_16816<kType>(s[n], a, bk);
      }
    }

    // Logits, the rows' new maxima (NaN-propagating: a poisoned score must reach its row) and
    // the exponentials. An element is (row r = e / 2, key n0 + 8n + 2t + e % 2).
    float tile_max[2] = {negative_infinity(), negative_infinity()};
    QKV_UNROLL
    for (int n = 0; n < kTileKeys / 8; ++n) {
      QKV_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2, jj = n * 8 + 2 * t + (e & 1), j = n0 + jj;
        float x = negative_infinity();
        if (j < end[r]) {
          x = logit(p, b, h, row[r], j, s[n][e]);
          // A visible key whose value row holds ∞ or NaN makes the row's output NaN (it was
          // zeroed in shared memory so that rows that cannot see it stay clean).
          if (x != negative_infinity() && bad[jj]) poisoned[r] = 1;
        }
        s[n][e] = x;
        tile_max[r] = max_nan(tile_max[r], x);
      }
    }
    float alpha[2];
    QKV_UNROLL
    for (int r = 0; r < 2; ++r) {
      // The quad (4 lanes, t = 0..3) holds the row's 64 keys between them.
      tile_max[r] = max_nan(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = max_nan(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      const float m_new = max_nan(m[r], tile_max[r]);
      // A row with nothing visible so far keeps m = −∞; subtracting 0 instead keeps
      // exp(−∞ − (−∞)) = NaN out of it.
      const float m_use = m_new == negative_infinity() ? 0.0f : m_new;
      alpha[r] = exp_of(m[r] - m_use);
      m[r] = m_new;
      float sum = 0.0f;
      QKV_UNROLL
      for (int n = 0; n < kTileKeys / 8; ++n) {
        s[n][2 * r] = exp_of(s[n][2 * r] - m_use);
        s[n][2 * r + 1] = exp_of(s[n][2 * r + 1] - m_use);
        sum += s[n][2 * r] + s[n][2 * r + 1];
      }
      l[r] = l[r] * alpha[r] + sum;
    }
    QKV_UNROLL
    for (int n = 0; n < kD / 8; ++n) {
      acc[n][0] *= alpha[0], acc[n][1] *= alpha[0];
      acc[n][2] *= alpha[1], acc[n][3] *= alpha[1];
    }

    // O += round16(P)·V: P's accumulators are the A fragments; V stays [key][d] in shared memory.
    QKV_UNROLL
    for (int kk = 0; kk < kTileKeys / 16; ++kk) {
      uint32_t a[4];
      accumulators_as_a<kType>(a, s[2 * kk], s[2 * kk + 1]);
      QKV_UNROLL
      for (int n = 0; n < kD / 8; ++n) {
        uint32_t bv[2];
        load_b_kn(bv, sv, kLd, n * 8, kk * 16, g, t);
        simt::mma_16816<kType>(acc[n], a, bv);
      }
    }
  }

  // The row's sum is spread over its quad; so is a poisoned value row.
  QKV_UNROLL
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    poisoned[r] |= __shfl_xor_sync(0xffffffffu, poisoned[r], 1);
    poisoned[r] |= __shfl_xor_sync(0xffffffffu, poisoned[r], 2);
  }
  uint16_t* out = static_cast<uint16_t*>(o.out) + b * o.out_stride[0] + h * o.out_stride[1];
  QKV_UNROLL
  for (int r = 0; r < 2; ++r) {
    if (row[r] >= p.L) continue;
    // l = 0: the row saw no key: out 0 (not 0/0), logsumexp −∞ (m = −∞ plus log2 0 = −∞).
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : (l[r] == 0.0f ? 0.0f : l[r]);
    const float nan = bits_float(0x7FC00000u);
    uint16_t* out_row = out + row[r] * o.out_stride[2];
    QKV_UNROLL
    for (int n = 0; n < kD / 8; ++n) {
      QKV_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int c = n * 8 + 2 * t + e;
        if (c < p.Dv) out_row[c] = to_half<kType>(poisoned[r] ? nan : acc[n][2 * r + e] * inv);
      }
    }
    if (t == 0) {
      const int64_t at = (static_cast<int64_t>(b) * p.Hq + h) * p.L + row[r];
      const float log_sum = logf(l[r]);
      if (o.logsumexp) o.logsumexp[at] = m[r] + log_sum;
      if (o.max) o.max[at] = m[r];
      if (o.log_sum) o.log_sum[at] = log_sum;
    }
  }
}

// Whether 16-byte loads are allowed for a [B, H, rows, D] array: aligned base, strides in
// multiples of 8 elements.
inline bool allows_vec(const Strided& x) {
  const auto address = reinterpret_cast<uintptr_t>(x.data);
  return address % 16 == 0 && x.stride[0] % 8 == 0 && x.stride[1] % 8 == 0 && x.stride[2] % 8 == 0;
}

// The padded width a problem runs at: 64 or 128 (the fast paths), else 256; 0 when too wide.
inline int padded_head_dim(const Problem& p) {
  const int64_t d = p.Dk > p.Dv ? p.Dk : p.Dv;
  return d <= 64 ? 64 : d <= 128 ? 128 : d <= 256 ? 256 : 0;
}

inline void check_problem(const Problem& p) {
  if (p.element != Element::bf16 && p.element != Element::f16)
    throw Error("CUDA: the tensor-core kernels take bf16 or f16", Error::Kind::runtime);
  if (padded_head_dim(p) == 0)
    throw Error("CUDA: the tensor-core kernels take head dims up to 256, got Dk = " +
                    std::to_string(p.Dk) + ", Dv = " + std::to_string(p.Dv),
                Error::Kind::runtime);
  if (p.Hq > 65535 || p.B > 65535)
    throw Error("CUDA: the tensor-core kernels' grid cannot hold B = " + std::to_string(p.B) +
                    ", Hq = " + std::to_string(p.Hq) + ", L = " + std::to_string(p.L),
                Error::Kind::runtime);
}

template <Half16 kType, int kD>
void launch_forward(const Params& k, const Problem& p, const ForwardOutputs& o) {
  const dim3 grid(static_cast<unsigned>((p.L + kTileRows - 1) / kTileRows),
                  static_cast<unsigned>(p.Hq), static_cast<unsigned>(p.B));
  check_launch(simt::launch(forward_kernel<kType, kD>, grid, dim3(kThreads),
                            ForwardShape<kD>::kSharedBytes, p.stream, k, o),
               "the tensor-core forward's launch");
}

// flash_forward for Element::bf16 and Element::f16 (flash_cuda.h's contract).
inline void forward(const Problem& p, Strided out, float* logsumexp, SoftmaxRows rows) {
  check_problem(p);
  if (p.B == 0 || p.Hq == 0 || p.L == 0) return;
  const Params k = params_of(p);
  ForwardOutputs o;
  o.out = out.data;
  for (int d = 0; d < 3; ++d) o.out_stride[d] = out.stride[d];
  o.logsumexp = logsumexp, o.max = rows.max, o.log_sum = rows.log_sum;
  o.vec = allows_vec(p.q) && allows_vec(p.k) && allows_vec(p.v);
  const bool bf16 = p.element == Element::bf16;
  switch (padded_head_dim(p)) {
    case 64:
      return bf16 ? launch_forward<Half16::bf16, 64>(k, p, o)
                  : launch_forward<Half16::f16, 64>(k, p, o);
    case 128:
      return bf16 ? launch_forward<Half16::bf16, 128>(k, p, o)
                  : launch_forward<Half16::f16, 128>(k, p, o);
    default:
      return bf16 ? launch_forward<Half16::bf16, 256>(k, p, o)
                  : launch_forward<Half16::f16, 256>(k, p, o);
  }
}

}  // namespace tc
}  // namespace QKV_SIMT_NAMESPACE
}  // namespace qkv::cuda::kernel
