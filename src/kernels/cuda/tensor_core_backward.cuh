// The bf16 / fp16 attention backward on tensor cores: FlashAttention-2's backward (Dao 2023,
// Algorithm 2) split into two kernels so that no float is ever added atomically (deterministic:
// the same inputs give the same bits on every run):
//
//   delta_kernel  D_i = Σ_c dO_ic·O_ic in float32                    [B, Hq, L] scratch
//   dkdv_kernel   per (64-key tile, kv head, batch), over the rows of every query head of the
//                 group:   Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ (mma), P = 2^(x − max − log_sum) with the
//                 forward's rows, dS = P∘(dP − D), dV += round16(P)ᵀ·dO, dK += round16(dS)ᵀ·Q
//   dq_kernel     per (64-row tile, query head, batch), over the visible key tiles:
//                 S = Q·Kᵀ, dP = dO·Vᵀ, P and dS as above, dQ += round16(dS)·K
//
// "Forward was out_i = Σ_j P_ij v_j with P = softmax(x), so dv_j = Σ_i P_ij dO_i, dP_ij = dO_i·v_j,
// and the softmax's Jacobian gives dlogit_ij = P_ij (dP_ij − Σ_j' P_ij' dP_ij') where the sum is
// dO_i·out_i = D_i; the logit is scale·q·k (+ bias), so dq = scale·Σ_j dS_ij k_j and
// dk = scale·Σ_i dS_ij q_i." Accumulators are float32; dq, dk, dv are written in the element type.
//
// Non-finite inputs (as the float32 kernels, flash_f32_backward.cuh): q, k and v are read with ±∞
// and NaN as 0, so that a term whose other factor is 0 — dS_ij = 0 for a key row i cannot see,
// P_ij = 0 — adds exactly 0 to dQ = dS·K, dK = dSᵀ·Q, dV = Pᵀ·dO, never 0·NaN (a NaN in k_j would
// otherwise reach the dq of every row of the tile, seen or not). The NaN reaches exactly what the
// float64 reference makes NaN through the forward's rows: a row that read a non-finite q_i or
// visible k_j has max = NaN (tc::logit), so its P and dS are NaN on exactly the keys it sees; a
// row that saw a non-finite v_j has out NaN, so D = dO·out is NaN and so is its dS. dv_j = Σ P dO
// stays finite there, as the reference's does.
// Shapes as flash_cuda.h's flash_backward; the shared layouts as tensor_core_forward.cuh's.
#pragma once

#include <cstdint>

#include "kernels/cuda/tensor_core_forward.cuh"

namespace qkv::cuda::kernel {
inline namespace QKV_SIMT_NAMESPACE {
namespace tc {

struct BackwardArgs {
  const void* out = nullptr;
  int64_t out_stride[3] = {0, 0, 0};
  const void* dout = nullptr;
  int64_t dout_stride[3] = {0, 0, 0};
  void* dq = nullptr;
  int64_t dq_stride[3] = {0, 0, 0};
  void* dk = nullptr;
  int64_t dk_stride[3] = {0, 0, 0};
  void* dv = nullptr;
  int64_t dv_stride[3] = {0, 0, 0};
  const float* max = nullptr;  // the forward's SoftmaxRows, [B, Hq, L]
  const float* log_sum = nullptr;
  float* delta = nullptr;  // D, [B, Hq, L] scratch
  int vec = 0;             // q, k, v, dout allow 16-byte loads
};

// D_i = dO_i·O_i, one warp per row (the lanes take every 32nd column, then a butterfly sum).
template <Half16 kType>
QKV_KERNEL void QKV_LAUNCH_BOUNDS(kThreads, 1) delta_kernel(Params p, BackwardArgs a) {
  const int b = static_cast<int>(blockIdx.z), h = static_cast<int>(blockIdx.y);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int i = static_cast<int>(blockIdx.x) * kWarps + warp;
  float sum = 0.0f;
  if (i < p.L) {
    const uint16_t* o = static_cast<const uint16_t*>(a.out) + b * a.out_stride[0] +
                        h * a.out_stride[1] + i * a.out_stride[2];
    const uint16_t* d = static_cast<const uint16_t*>(a.dout) + b * a.dout_stride[0] +
                        h * a.dout_stride[1] + i * a.dout_stride[2];
    for (int c = lane; c < p.Dv; c += 32) sum += from_half<kType>(d[c]) * from_half<kType>(o[c]);
  }
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (i < p.L && lane == 0) a.delta[(static_cast<int64_t>(b) * p.Hq + h) * p.L + i] = sum;
}

// P_ij and dS_ij of one element from its product s = q_i·k_j and dp = dO_i·v_j, given the row's
// forward statistics. A key the row cannot see has P = dS = 0 exactly, whatever s and dp hold.
QKV_DEVICE void probability_and_dlogit(const Params& p, int b, int h, int i, int j, int end,
                                       float m, float log_sum, float delta, float& s, float& dp) {
  float prob = 0.0f, dlogit = 0.0f;
  if (j < end) {
    const float x = logit(p, b, h, i, j, s);
    if (x != negative_infinity()) {
      prob = exp_of((x - m) - log_sum);
      dlogit = prob * (dp - delta);
    }
  }
  s = prob, dp = dlogit;
}

template <int kD>
struct BackwardShape {
  static constexpr int kLd = kD + kPad;
  // Query rows per step of the dK/dV kernel: 32 from kD = 128 on, so that the warp's dK and dV
  // accumulators (2·kD/2 registers) and Sᵀ, dPᵀ (kRows/2 registers) stay within 255.
  static constexpr int kRows = kD <= 64 ? 64 : 32;
  static constexpr size_t kDkdvSharedBytes =
      (2 * kTileKeys + 2 * kRows) * kLd * sizeof(uint16_t) + 4 * kRows * sizeof(float);
  static constexpr size_t kDqSharedBytes = (2 * kTileRows + 2 * kTileKeys) * kLd * sizeof(uint16_t);
};

template <Half16 kType, int kD>
QKV_KERNEL void QKV_LAUNCH_BOUNDS(kThreads, 1) dkdv_kernel(Params p, BackwardArgs a) {
  using Shape = BackwardShape<kD>;
  constexpr int kLd = Shape::kLd, kRows = Shape::kRows;
  QKV_DYNAMIC_SHARED(uint16_t, shared);
  uint16_t* sk = shared;
  uint16_t* sv = sk + kTileKeys * kLd;
  uint16_t* sq = sv + kTileKeys * kLd;
  uint16_t* sdo = sq + kRows * kLd;
  float* s_max = reinterpret_cast<float*>(sdo + kRows * kLd);
  float* s_log_sum = s_max + kRows;
  float* s_delta = s_log_sum + kRows;
  int* s_end = reinterpret_cast<int*>(s_delta + kRows);

  const int b = static_cast<int>(blockIdx.z), hk = static_cast<int>(blockIdx.y);
  const int n0 = static_cast<int>(blockIdx.x) * kTileKeys;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const bool vec = a.vec != 0;

  // Keys past key_lengths are seen by no row: not read, their dk and dv are 0.
  int key_end = p.S;
  if (p.key_lengths != nullptr && p.key_lengths[b] < key_end) key_end = p.key_lengths[b];
  const int keys = key_end - n0 < kTileKeys ? key_end - n0 : kTileKeys;
  // The first row that sees key n0 (visible_end grows with i), rounded down to a step.
  int first_row = 0;
  if (p.causal == 1) first_row = n0;
  if (p.causal == 2) first_row = n0 - (p.S - p.L);
  first_row = first_row < 0 ? 0 : first_row / kRows * kRows;

  float dk[kD / 8][4], dv[kD / 8][4];
  QKV_UNROLL
  for (int n = 0; n < kD / 8; ++n) QKV_UNROLL
  for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.0f;

  if (keys > 0) {
    const uint16_t* k = static_cast<const uint16_t*>(p.k) + b * p.k_stride[0] + hk * p.k_stride[1] +
                        n0 * p.k_stride[2];
    const uint16_t* v = static_cast<const uint16_t*>(p.v) + b * p.v_stride[0] + hk * p.v_stride[1] +
                        n0 * p.v_stride[2];
    load_tile<kType, kTileKeys, kD, NonFinite::zero>(sk, k, p.k_stride[2], keys, p.Dk, vec,
                                                     nullptr);
    load_tile<kType, kTileKeys, kD, NonFinite::zero>(sv, v, p.v_stride[2], keys, p.Dv, vec,
                                                     nullptr);

    for (int r = 0; r < p.group; ++r) {
      const int h = hk * p.group + r;
      for (int i0 = first_row; i0 < p.L; i0 += kRows) {
        const int rows = p.L - i0 < kRows ? p.L - i0 : kRows;
        __syncthreads();  // every warp is done with the previous rows
        const uint16_t* q = static_cast<const uint16_t*>(p.q) + b * p.q_stride[0] +
                            h * p.q_stride[1] + i0 * p.q_stride[2];
        const uint16_t* d = static_cast<const uint16_t*>(a.dout) + b * a.dout_stride[0] +
                            h * a.dout_stride[1] + i0 * a.dout_stride[2];
        load_tile<kType, kRows, kD, NonFinite::zero>(sq, q, p.q_stride[2], rows, p.Dk, vec,
                                                     nullptr);
        load_tile<kType, kRows, kD, NonFinite::keep>(sdo, d, a.dout_stride[2], rows, p.Dv, vec,
                                                     nullptr);
        if (tid < kRows) {
          const int i = i0 + tid;
          const int64_t at = (static_cast<int64_t>(b) * p.Hq + h) * p.L + i;
          // Rows past L see nothing; 0 for their statistics keeps their (unused) P out of NaN.
          s_max[tid] = i < p.L ? a.max[at] : 0.0f;
          s_log_sum[tid] = i < p.L ? a.log_sum[at] : 0.0f;
          s_delta[tid] = i < p.L ? a.delta[at] : 0.0f;
          s_end[tid] = i < p.L ? visible_end(p, b, i) : 0;
          // A row that saw no key (max −∞) has x = −∞ for every key too: P = 0 without 2^NaN.
          if (s_max[tid] == negative_infinity()) s_max[tid] = s_log_sum[tid] = 0.0f;
        }
        __syncthreads();

        // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ: the warp's 16 keys (rows g, g+8) × the step's rows.
        float st[kRows / 8][4], dpt[kRows / 8][4];
        QKV_UNROLL
        for (int n = 0; n < kRows / 8; ++n) QKV_UNROLL
        for (int e = 0; e < 4; ++e) st[n][e] = dpt[n][e] = 0.0f;
        QKV_UNROLL
        for (int kk = 0; kk < kD / 16; ++kk) {
          uint32_t ak[4], av[4];
          load_a(ak, sk, kLd, warp * 16, kk * 16, g, t);
          load_a(av, sv, kLd, warp * 16, kk * 16, g, t);
          QKV_UNROLL
          for (int n = 0; n < kRows / 8; ++n) {
            uint32_t bq[2], bd[2];
            load_b_nk(bq, sq, kLd, n * 8, kk * 16, g, t);
            load_b_nk(bd, sdo, kLd, n * 8, kk * 16, g, t);
            simt::mma_16816<kType>(st[n], ak, bq);
            simt::mma_16816<kType>(dpt[n], av, bd);
          }
        }
        // Element e of tile n: key n0 + 16·warp + g + 8·(e / 2), row i0 + 8n + 2t + e % 2.
        QKV_UNROLL
        for (int n = 0; n < kRows / 8; ++n) {
          QKV_UNROLL
          for (int e = 0; e < 4; ++e) {
            const int ii = n * 8 + 2 * t + (e & 1);
            const int j = n0 + warp * 16 + g + 8 * (e / 2);
            probability_and_dlogit(p, b, h, i0 + ii, j, s_end[ii], s_max[ii], s_log_sum[ii],
                                   s_delta[ii], st[n][e], dpt[n][e]);
          }
        }
        // dV += Pᵀ·dO and dK += dSᵀ·Q: Pᵀ's and dSᵀ's accumulators are the A fragments.
        QKV_UNROLL
        for (int kk = 0; kk < kRows / 16; ++kk) {
          uint32_t ap[4], as[4];
          accumulators_as_a<kType>(ap, st[2 * kk], st[2 * kk + 1]);
          accumulators_as_a<kType>(as, dpt[2 * kk], dpt[2 * kk + 1]);
          QKV_UNROLL
          for (int n = 0; n < kD / 8; ++n) {
            uint32_t bd[2], bq[2];
            load_b_kn(bd, sdo, kLd, n * 8, kk * 16, g, t);
            load_b_kn(bq, sq, kLd, n * 8, kk * 16, g, t);
            simt::mma_16816<kType>(dv[n], ap, bd);
            simt::mma_16816<kType>(dk[n], as, bq);
          }
        }
      }
    }
  }

  uint16_t* dk_out = static_cast<uint16_t*>(a.dk) + b * a.dk_stride[0] + hk * a.dk_stride[1];
  uint16_t* dv_out = static_cast<uint16_t*>(a.dv) + b * a.dv_stride[0] + hk * a.dv_stride[1];
  QKV_UNROLL
  for (int r = 0; r < 2; ++r) {
    const int j = n0 + warp * 16 + g + 8 * r;
    if (j >= p.S) continue;
    QKV_UNROLL
    for (int n = 0; n < kD / 8; ++n) {
      QKV_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int c = n * 8 + 2 * t + e;
        if (c < p.Dk) dk_out[j * a.dk_stride[2] + c] = to_half<kType>(dk[n][2 * r + e] * p.scale);
        if (c < p.Dv) dv_out[j * a.dv_stride[2] + c] = to_half<kType>(dv[n][2 * r + e]);
      }
    }
  }
}

template <Half16 kType, int kD>
QKV_KERNEL void QKV_LAUNCH_BOUNDS(kThreads, 1) dq_kernel(Params p, BackwardArgs a) {
  using Shape = BackwardShape<kD>;
  constexpr int kLd = Shape::kLd;
  QKV_DYNAMIC_SHARED(uint16_t, shared);
  uint16_t* sq = shared;
  uint16_t* sdo = sq + kTileRows * kLd;
  uint16_t* sk = sdo + kTileRows * kLd;
  uint16_t* sv = sk + kTileKeys * kLd;

  const int b = static_cast<int>(blockIdx.z), h = static_cast<int>(blockIdx.y);
  const int hk = h / p.group;
  const int m0 = static_cast<int>(blockIdx.x) * kTileRows;
  const int rows = p.L - m0 < kTileRows ? p.L - m0 : kTileRows;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const bool vec = a.vec != 0;

  const uint16_t* q = static_cast<const uint16_t*>(p.q) + b * p.q_stride[0] + h * p.q_stride[1] +
                      m0 * p.q_stride[2];
  const uint16_t* d = static_cast<const uint16_t*>(a.dout) + b * a.dout_stride[0] +
                      h * a.dout_stride[1] + m0 * a.dout_stride[2];
  const uint16_t* k = static_cast<const uint16_t*>(p.k) + b * p.k_stride[0] + hk * p.k_stride[1];
  const uint16_t* v = static_cast<const uint16_t*>(p.v) + b * p.v_stride[0] + hk * p.v_stride[1];
  load_tile<kType, kTileRows, kD, NonFinite::zero>(sq, q, p.q_stride[2], rows, p.Dk, vec, nullptr);
  load_tile<kType, kTileRows, kD, NonFinite::keep>(sdo, d, a.dout_stride[2], rows, p.Dv, vec,
                                                   nullptr);

  int row[2], end[2];
  float m[2], log_sum[2], delta[2];
  QKV_UNROLL
  for (int r = 0; r < 2; ++r) {
    row[r] = m0 + warp * 16 + g + 8 * r;
    const bool in = row[r] < p.L;
    const int64_t at = (static_cast<int64_t>(b) * p.Hq + h) * p.L + row[r];
    end[r] = in ? visible_end(p, b, row[r]) : 0;
    m[r] = in ? a.max[at] : 0.0f;
    log_sum[r] = in ? a.log_sum[at] : 0.0f;
    delta[r] = in ? a.delta[at] : 0.0f;
    if (m[r] == negative_infinity()) m[r] = log_sum[r] = 0.0f;
  }
  const int kv_end = visible_end(p, b, m0 + rows - 1);

  float acc[kD / 8][4];
  QKV_UNROLL
  for (int n = 0; n < kD / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;

  for (int n0 = 0; n0 < kv_end; n0 += kTileKeys) {
    const int keys = kv_end - n0 < kTileKeys ? kv_end - n0 : kTileKeys;
    __syncthreads();  // every warp is done with the previous K and V tiles
    load_tile<kType, kTileKeys, kD, NonFinite::zero>(sk, k + n0 * p.k_stride[2], p.k_stride[2],
                                                     keys, p.Dk, vec, nullptr);
    load_tile<kType, kTileKeys, kD, NonFinite::zero>(sv, v + n0 * p.v_stride[2], p.v_stride[2],
                                                     keys, p.Dv, vec, nullptr);
    __syncthreads();

    float s[kTileKeys / 8][4], dp[kTileKeys / 8][4];
    QKV_UNROLL
    for (int n = 0; n < kTileKeys / 8; ++n) QKV_UNROLL
    for (int e = 0; e < 4; ++e) s[n][e] = dp[n][e] = 0.0f;
    QKV_UNROLL
    for (int kk = 0; kk < kD / 16; ++kk) {
      uint32_t aq[4], ad[4];
      load_a(aq, sq, kLd, warp * 16, kk * 16, g, t);
      load_a(ad, sdo, kLd, warp * 16, kk * 16, g, t);
      QKV_UNROLL
      for (int n = 0; n < kTileKeys / 8; ++n) {
        uint32_t bk[2], bv[2];
        load_b_nk(bk, sk, kLd, n * 8, kk * 16, g, t);
        load_b_nk(bv, sv, kLd, n * 8, kk * 16, g, t);
        simt::mma_16816<kType>(s[n], aq, bk);
        simt::mma_16816<kType>(dp[n], ad, bv);
      }
    }
    QKV_UNROLL
    for (int n = 0; n < kTileKeys / 8; ++n) {
      QKV_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2, j = n0 + n * 8 + 2 * t + (e & 1);
        probability_and_dlogit(p, b, h, row[r], j, end[r], m[r], log_sum[r], delta[r], s[n][e],
                               dp[n][e]);
      }
    }
    // dQ += dS·K: dS's accumulators are the A fragments; K stays [key][d].
    QKV_UNROLL
    for (int kk = 0; kk < kTileKeys / 16; ++kk) {
      uint32_t as[4];
      accumulators_as_a<kType>(as, dp[2 * kk], dp[2 * kk + 1]);
      QKV_UNROLL
      for (int n = 0; n < kD / 8; ++n) {
        uint32_t bk[2];
        load_b_kn(bk, sk, kLd, n * 8, kk * 16, g, t);
        simt::mma_16816<kType>(acc[n], as, bk);
      }
    }
  }

  uint16_t* dq_out = static_cast<uint16_t*>(a.dq) + b * a.dq_stride[0] + h * a.dq_stride[1];
  QKV_UNROLL
  for (int r = 0; r < 2; ++r) {
    if (row[r] >= p.L) continue;
    QKV_UNROLL
    for (int n = 0; n < kD / 8; ++n) {
      QKV_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int c = n * 8 + 2 * t + e;
        if (c < p.Dk)
          dq_out[row[r] * a.dq_stride[2] + c] = to_half<kType>(acc[n][2 * r + e] * p.scale);
      }
    }
  }
}

template <Half16 kType, int kD>
void launch_backward(const Params& k, const Problem& p, const BackwardArgs& a) {
  using Shape = BackwardShape<kD>;
  const unsigned hq = static_cast<unsigned>(p.Hq), batch = static_cast<unsigned>(p.B);
  if (p.L > 0) {
    check_launch(simt::launch(delta_kernel<kType>,
                              dim3(static_cast<unsigned>((p.L + kWarps - 1) / kWarps), hq, batch),
                              dim3(kThreads), 0, p.stream, k, a),
                 "the tensor-core backward's D pass");
    check_launch(
        simt::launch(dq_kernel<kType, kD>,
                     dim3(static_cast<unsigned>((p.L + kTileRows - 1) / kTileRows), hq, batch),
                     dim3(kThreads), Shape::kDqSharedBytes, p.stream, k, a),
        "the tensor-core backward's dQ kernel");
  }
  if (p.S > 0 && p.Hkv > 0) {
    check_launch(simt::launch(dkdv_kernel<kType, kD>,
                              dim3(static_cast<unsigned>((p.S + kTileKeys - 1) / kTileKeys),
                                   static_cast<unsigned>(p.Hkv), batch),
                              dim3(kThreads), Shape::kDkdvSharedBytes, p.stream, k, a),
                 "the tensor-core backward's dK/dV kernel");
  }
}

// flash_backward for Element::bf16 and Element::f16 (flash_cuda.h's contract).
inline void backward(const Problem& p, Strided out, SoftmaxRows rows, Strided dout, Strided dq,
                     Strided dk, Strided dv) {
  check_problem(p);
  if (p.B == 0) return;
  if (p.L > 0 && p.Hq > 0 && (rows.max == nullptr || rows.log_sum == nullptr))
    throw Error("CUDA: the backward needs the forward's SoftmaxRows (max and log_sum)",
                Error::Kind::runtime);
  const Params k = params_of(p);
  BackwardArgs a;
  a.out = out.data, a.dout = dout.data, a.dq = dq.data, a.dk = dk.data, a.dv = dv.data;
  for (int d = 0; d < 3; ++d) {
    a.out_stride[d] = out.stride[d], a.dout_stride[d] = dout.stride[d];
    a.dq_stride[d] = dq.stride[d], a.dk_stride[d] = dk.stride[d], a.dv_stride[d] = dv.stride[d];
  }
  a.max = rows.max, a.log_sum = rows.log_sum;
  a.vec = allows_vec(p.q) && allows_vec(p.k) && allows_vec(p.v) && allows_vec(dout);
  const size_t delta_bytes = static_cast<size_t>(p.B * p.Hq * p.L) * sizeof(float);
  void* delta = nullptr;
  if (delta_bytes > 0)
    check_launch(simt::device_alloc(&delta, delta_bytes, p.stream), "the backward's scratch");
  a.delta = static_cast<float*>(delta);
  const bool bf16 = p.element == Element::bf16;
  try {
    switch (padded_head_dim(p)) {
      case 64:
        bf16 ? launch_backward<Half16::bf16, 64>(k, p, a)
             : launch_backward<Half16::f16, 64>(k, p, a);
        break;
      case 128:
        bf16 ? launch_backward<Half16::bf16, 128>(k, p, a)
             : launch_backward<Half16::f16, 128>(k, p, a);
        break;
      default:
        bf16 ? launch_backward<Half16::bf16, 256>(k, p, a)
             : launch_backward<Half16::f16, 256>(k, p, a);
    }
  } catch (...) {
    if (delta) simt::device_free(delta, p.stream);
    throw;
  }
  if (delta) check_launch(simt::device_free(delta, p.stream), "freeing the backward's scratch");
}

}  // namespace tc
}  // namespace QKV_SIMT_NAMESPACE
}  // namespace qkv::cuda::kernel
