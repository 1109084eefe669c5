// The float32 attention backward on CUDA cores: FlashAttention-2 (Dao 2023, Algorithm 2), split
// into two kernels so that every gradient has one owner and no float atomics are needed (the
// same inputs give the same bits on every run).
//
// Forward was O = P·V with P = softmax(X), X the logits, and it kept each row's max and log2 sum
// (SoftmaxRows, base-2 units). So, tile by tile:
//   P  = 2^(x − max − log_sum)         the forward's very exponent (same operations, same order)
//   dV = Pᵀ·dO                         ∂/∂V of O = P·V
//   dP = dO·Vᵀ
//   dX = P ∘ (dP − D), D = rowsum(dO ∘ O)   the softmax backward, since Σ_j P_ij dP_ij = D_i
//   dQ = scale·dX·K,  dK = scale·dXᵀ·Q
// delta_kernel computes D first. dkdv_kernel owns a tile of keys of one kv head and loops over
// the rows of every query head of its group; dq_kernel owns a tile of query rows and loops over
// the key tiles. Both recompute P and dX (FlashAttention-2's choice for dQ as well: recomputing
// is cheaper than a second pass over an L×S buffer or atomics).
//
// Non-finite values: Q, K and V are read with non-finite entries as 0, so that a masked (P = 0)
// key or a row that sees nothing adds exactly 0 — never 0·NaN. A row the forward poisoned has
// max = NaN, which makes P and dX NaN on exactly the keys it sees; a row whose output is NaN
// (a visible non-finite value) has D = NaN, which does the same to dX: the gradients are NaN
// where the float64 reference's are.
#pragma once

#include "kernels/cuda/flash_f32_forward.cuh"

namespace qkv::cuda::kernel {
inline namespace QKV_SIMT_NAMESPACE {
namespace f32 {

// The backward's inputs beyond Params: the forward's out and rows, dout, the gradients (strided
// [B, H, rows, D], contiguous columns) and the scratch D.
struct BackwardArgs {
  const float* out = nullptr;
  int64_t out_stride[3] = {0, 0, 0};
  const float* dout = nullptr;
  int64_t dout_stride[3] = {0, 0, 0};
  const float* max = nullptr;      // [B, Hq, L]
  const float* log_sum = nullptr;  // [B, Hq, L]
  float* delta = nullptr;          // [B, Hq, L] scratch: D_i = dO_i · O_i
  float* dq = nullptr;
  int64_t dq_stride[3] = {0, 0, 0};
  float* dk = nullptr;
  int64_t dk_stride[3] = {0, 0, 0};
  float* dv = nullptr;
  int64_t dv_stride[3] = {0, 0, 0};
};

// D_i = Σ_c dO_ic·O_ic: a warp per row, lanes strided over the columns, then a fixed tree.
QKV_KERNEL void QKV_LAUNCH_BOUNDS(kThreads, 1) delta_kernel(Params p, BackwardArgs a) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t rows_total = static_cast<int64_t>(p.B) * p.Hq * p.L;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + warp;
  if (row >= rows_total) return;  // whole warps only
  const int i = static_cast<int>(row % p.L), h = static_cast<int>(row / p.L % p.Hq),
            b = static_cast<int>(row / (static_cast<int64_t>(p.L) * p.Hq));
  const float* o = a.out + b * a.out_stride[0] + h * a.out_stride[1] + i * a.out_stride[2];
  const float* g = a.dout + b * a.dout_stride[0] + h * a.dout_stride[1] + i * a.dout_stride[2];
  float sum = 0.0f;
  for (int c = lane; c < p.Dv; c += 32) sum = fmaf(g[c], o[c], sum);
  sum = sum32(sum);
  if (lane == 0) a.delta[row] = sum;
}

// This thread's RM × RN micro-tile of S = Q·Kᵀ (raw scores, from 0, over d = 0 .. Dk − 1: the
// forward's very sums) and of dP = dO·Vᵀ, from the tiles in shared memory (row pitch LD): what
// both the dK/dV and the dQ kernel start each tile with.
template <int RM, int RN, int LD>
QKV_DEVICE void tile_products(float (&s)[RM][RN], float (&dp)[RM][RN], const float* qs,
                              const float* dos, const float* ks, const float* vs, int ty, int tx,
                              int dk, int dv) {
  QKV_UNROLL
  for (int a = 0; a < RM; ++a) {
    QKV_UNROLL
    for (int c = 0; c < RN; ++c) s[a][c] = 0.0f, dp[a][c] = 0.0f;
  }
  micro_gemm<RM, RN, 1, LD, 1, LD>(s, qs, ty, ks, tx, dk);
  micro_gemm<RM, RN, 1, LD, 1, LD>(dp, dos, ty, vs, tx, dv);
}

// P_ij and dX_ij of a visible (row, key) pair, from its raw score s = q·k, dP = dO·v and the
// row's saved max, log_sum and D; both 0 where the row does not see the key.
QKV_DEVICE void softmax_grad(const Params& p, int b, int h, int i, int j, int end, float s,
                             float dp, float mx, float ls, float d, float& prob, float& dx) {
  prob = 0.0f, dx = 0.0f;
  if (j >= end) return;
  const float term = mask_term(p, b, h, i, j);
  if (term == -inf()) return;
  const float x = fmaf(s, p.scale, term);
  prob = exp_of((x - mx) - ls);
  dx = prob * (dp - d);
}

template <int BN, int BM, int DC>
struct DkDvTile {
  static constexpr int kLd = DC + 1, kLp = BN + 1;
  static constexpr std::size_t shared_bytes() {
    return sizeof(float) * (2 * BN * kLd + 2 * BM * kLd + 2 * BM * kLp + 3 * BM) + sizeof(int) * BM;
  }
};

// dK and dV of BN keys of kv head blockIdx.y, batch blockIdx.z: every query head of the group,
// every row tile that sees some of the keys. Threads: score tile rows ty + 16a, keys tx + 8c;
// gradient rows (keys) ty + 16a, columns tx + 8c.
template <int BN, int BM, int DC>
QKV_KERNEL void QKV_LAUNCH_BOUNDS(kThreads, 1) dkdv_kernel(Params p, BackwardArgs args) {
  static_assert(BM % 16 == 0 && BN % 16 == 0 && DC % 8 == 0, "the 16 x 8 thread grid");
  constexpr int RM = BM / 16, RN = BN / 8, KM = BN / 16, CN = DC / 8;
  constexpr int LD = DkDvTile<BN, BM, DC>::kLd, LP = DkDvTile<BN, BM, DC>::kLp;
  QKV_DYNAMIC_SHARED(float, smem);
  float* ks = smem;
  float* vs = ks + BN * LD;
  float* qs = vs + BN * LD;
  float* dos = qs + BM * LD;
  float* ps = dos + BM * LD;
  float* dxs = ps + BM * LP;
  float* row_max = dxs + BM * LP;
  float* row_log_sum = row_max + BM;
  float* row_delta = row_log_sum + BM;
  int* row_end = reinterpret_cast<int*>(row_delta + BM);

  const int tid = threadIdx.x, tx = tid % 8, ty = tid / 8;
  const int j0 = blockIdx.x * BN, kv = blockIdx.y, b = blockIdx.z;
  const int n = imin(BN, p.S - j0);
  load_rows<BN, DC>(
      ks,
      static_cast<const float*>(p.k) + b * p.k_stride[0] + kv * p.k_stride[1] + j0 * p.k_stride[2],
      p.k_stride[2], n, p.Dk, true, nullptr);
  load_rows<BN, DC>(
      vs,
      static_cast<const float*>(p.v) + b * p.v_stride[0] + kv * p.v_stride[1] + j0 * p.v_stride[2],
      p.v_stride[2], n, p.Dv, true, nullptr);

  float dk[KM][CN], dv[KM][CN];
  QKV_UNROLL
  for (int a = 0; a < KM; ++a) {
    QKV_UNROLL
    for (int c = 0; c < CN; ++c) dk[a][c] = 0.0f, dv[a][c] = 0.0f;
  }
  // The first row tile with a row that sees key j0 (visible_end grows with i); none where the key
  // lengths end before j0.
  int first = 0;
  while (first < p.L && visible_end(p, b, imin(first + BM, p.L) - 1) <= j0) first += BM;

  for (int g = 0; g < p.group; ++g) {
    const int h = kv * p.group + g;
    const float* q = static_cast<const float*>(p.q) + b * p.q_stride[0] + h * p.q_stride[1];
    const float* dout = args.dout + b * args.dout_stride[0] + h * args.dout_stride[1];
    const int64_t row0 = (static_cast<int64_t>(b) * p.Hq + h) * p.L;
    for (int i0 = first; i0 < p.L; i0 += BM) {
      const int rows = imin(BM, p.L - i0);
      __syncthreads();  // the previous rows' readers of qs, dos, ps, dxs and the stats are done
      load_rows<BM, DC>(qs, q + i0 * p.q_stride[2], p.q_stride[2], rows, p.Dk, true, nullptr);
      load_rows<BM, DC>(dos, dout + i0 * args.dout_stride[2], args.dout_stride[2], rows, p.Dv,
                        false, nullptr);
      if (tid < BM) {
        const bool in = tid < rows;
        row_max[tid] = in ? args.max[row0 + i0 + tid] : 0.0f;
        row_log_sum[tid] = in ? args.log_sum[row0 + i0 + tid] : 0.0f;
        row_delta[tid] = in ? args.delta[row0 + i0 + tid] : 0.0f;
        row_end[tid] = in ? visible_end(p, b, i0 + tid) : 0;
      }
      __syncthreads();

      float s[RM][RN], dp[RM][RN];
      tile_products<RM, RN, LD>(s, dp, qs, dos, ks, vs, ty, tx, p.Dk, p.Dv);
      QKV_UNROLL
      for (int a = 0; a < RM; ++a) {
        const int r = ty + 16 * a;
        QKV_UNROLL
        for (int c = 0; c < RN; ++c) {
          const int jj = tx + 8 * c;
          float prob, dx;
          softmax_grad(p, b, h, i0 + r, j0 + jj, row_end[r], s[a][c], dp[a][c], row_max[r],
                       row_log_sum[r], row_delta[r], prob, dx);
          ps[r * LP + jj] = prob;
          dxs[r * LP + jj] = dx;
        }
      }
      __syncthreads();
      // dV_j += Σ_i P_ij dO_i and dK_j += Σ_i dX_ij q_i (scaled at the end), rows in order.
      micro_gemm<KM, CN, LP, 1, LD, 1>(dv, ps, ty, dos, tx, BM);
      micro_gemm<KM, CN, LP, 1, LD, 1>(dk, dxs, ty, qs, tx, BM);
    }
  }

  QKV_UNROLL
  for (int a = 0; a < KM; ++a) {
    const int j = j0 + ty + 16 * a;
    if (j >= p.S) continue;
    float* dk_row =
        args.dk + b * args.dk_stride[0] + kv * args.dk_stride[1] + j * args.dk_stride[2];
    float* dv_row =
        args.dv + b * args.dv_stride[0] + kv * args.dv_stride[1] + j * args.dv_stride[2];
    QKV_UNROLL
    for (int c = 0; c < CN; ++c) {
      const int col = tx + 8 * c;
      if (col < p.Dk) dk_row[col] = p.scale * dk[a][c];
      if (col < p.Dv) dv_row[col] = dv[a][c];
    }
  }
}

template <int BM, int BN, int DC>
struct DqTile {
  static constexpr int kLd = DC + 1, kLp = BN + 1;
  static constexpr std::size_t shared_bytes() {
    return sizeof(float) * (2 * BM * kLd + 2 * BN * kLd + BM * kLp);
  }
};

// dQ of BM rows of query head blockIdx.y, batch blockIdx.z, over the key tiles the rows see.
// Threads: rows ty + 16a of the score tile and of dQ; keys tx + 8c; dQ columns tx + 8c.
template <int BM, int BN, int DC>
QKV_KERNEL void QKV_LAUNCH_BOUNDS(kThreads, 1) dq_kernel(Params p, BackwardArgs args) {
  static_assert(BM % 16 == 0 && BN % 8 == 0 && DC % 8 == 0, "the 16 x 8 thread grid");
  constexpr int RM = BM / 16, RN = BN / 8, CN = DC / 8;
  constexpr int LD = DqTile<BM, BN, DC>::kLd, LP = DqTile<BM, BN, DC>::kLp;
  QKV_DYNAMIC_SHARED(float, smem);
  float* qs = smem;
  float* dos = qs + BM * LD;
  float* ks = dos + BM * LD;
  float* vs = ks + BN * LD;
  float* dxs = vs + BN * LD;

  const int tid = threadIdx.x, tx = tid % 8, ty = tid / 8;
  const int i0 = blockIdx.x * BM, h = blockIdx.y, b = blockIdx.z;
  const int kv = h / p.group;
  const int rows = imin(BM, p.L - i0);
  load_rows<BM, DC>(
      qs,
      static_cast<const float*>(p.q) + b * p.q_stride[0] + h * p.q_stride[1] + i0 * p.q_stride[2],
      p.q_stride[2], rows, p.Dk, true, nullptr);
  load_rows<BM, DC>(
      dos, args.dout + b * args.dout_stride[0] + h * args.dout_stride[1] + i0 * args.dout_stride[2],
      args.dout_stride[2], rows, p.Dv, false, nullptr);
  const float* k = static_cast<const float*>(p.k) + b * p.k_stride[0] + kv * p.k_stride[1];
  const float* v = static_cast<const float*>(p.v) + b * p.v_stride[0] + kv * p.v_stride[1];
  const int64_t row0 = (static_cast<int64_t>(b) * p.Hq + h) * p.L;

  int end[RM];
  float mx[RM], ls[RM], delta[RM], dq[RM][CN];
  QKV_UNROLL
  for (int a = 0; a < RM; ++a) {
    const int i = i0 + ty + 16 * a;
    const bool in = i < p.L;
    end[a] = in ? visible_end(p, b, i) : 0;
    mx[a] = in ? args.max[row0 + i] : 0.0f;
    ls[a] = in ? args.log_sum[row0 + i] : 0.0f;
    delta[a] = in ? args.delta[row0 + i] : 0.0f;
    QKV_UNROLL
    for (int c = 0; c < CN; ++c) dq[a][c] = 0.0f;
  }
  const int tile_end = visible_end(p, b, i0 + rows - 1);

  for (int j0 = 0; j0 < tile_end; j0 += BN) {
    const int n = imin(BN, tile_end - j0);
    __syncthreads();  // the previous tile's readers of ks, vs and dxs are done
    load_rows<BN, DC>(ks, k + j0 * p.k_stride[2], p.k_stride[2], n, p.Dk, true, nullptr);
    load_rows<BN, DC>(vs, v + j0 * p.v_stride[2], p.v_stride[2], n, p.Dv, true, nullptr);
    __syncthreads();
    float s[RM][RN], dp[RM][RN];
    tile_products<RM, RN, LD>(s, dp, qs, dos, ks, vs, ty, tx, p.Dk, p.Dv);
    QKV_UNROLL
    for (int a = 0; a < RM; ++a) {
      const int r = ty + 16 * a;
      QKV_UNROLL
      for (int c = 0; c < RN; ++c) {
        const int jj = tx + 8 * c;
        float prob, dx;
        softmax_grad(p, b, h, i0 + r, j0 + jj, end[a], s[a][c], dp[a][c], mx[a], ls[a], delta[a],
                     prob, dx);
        dxs[r * LP + jj] = dx;
      }
    }
    __syncthreads();
    // dQ_i += Σ_j dX_ij k_j over the whole tile (dX = 0 and k = 0 past n), keys in order.
    micro_gemm<RM, CN, 1, LP, LD, 1>(dq, dxs, ty, ks, tx, BN);
  }

  QKV_UNROLL
  for (int a = 0; a < RM; ++a) {
    const int i = i0 + ty + 16 * a;
    if (i >= p.L) continue;
    float* dq_row = args.dq + b * args.dq_stride[0] + h * args.dq_stride[1] + i * args.dq_stride[2];
    QKV_UNROLL
    for (int c = 0; c < CN; ++c)
      if (tx + 8 * c < p.Dk) dq_row[tx + 8 * c] = p.scale * dq[a][c];
  }
}

template <int BN, int BM, int DC>
void run_backward(const Params& p, const BackwardArgs& args, void* stream) {
  if (p.Hq > 65535 || p.Hkv > 65535 || p.B > 65535)
    throw Error("CUDA: float32 attention backward: B = " + std::to_string(p.B) + ", Hq = " +
                    std::to_string(p.Hq) + " must each be at most 65535 (the grid's y and z)",
                Error::Kind::invalid_argument);
  if (p.S > 0)
    check_launch(
        qkv::simt::launch(dkdv_kernel<BN, BM, DC>,
                          dim3(static_cast<unsigned>((p.S + BN - 1) / BN),
                               static_cast<unsigned>(p.Hkv), static_cast<unsigned>(p.B)),
                          dim3(kThreads), DkDvTile<BN, BM, DC>::shared_bytes(), stream, p, args),
        "the float32 attention backward's dK/dV launch");
  if (p.L > 0 && p.Hq > 0)
    check_launch(
        qkv::simt::launch(dq_kernel<BM, BN, DC>,
                          dim3(static_cast<unsigned>((p.L + BM - 1) / BM),
                               static_cast<unsigned>(p.Hq), static_cast<unsigned>(p.B)),
                          dim3(kThreads), DqTile<BM, BN, DC>::shared_bytes(), stream, p, args),
        "the float32 attention backward's dQ launch");
}

// flash_backward for Element::f32 (flash_cuda.h's contract): D, then dK/dV, then dQ, on the
// problem's stream. Tile variants by the larger head dim (dK/dV: keys × rows; dQ: rows × keys):
// ≤ 64: 64 keys × 32 rows (dQ: 32 rows × 64 keys); ≤ 128: 32 × 32; ≤ 256: 16 × 16 (shared
// memory ≤ 73 KB each).
inline void backward(const Problem& problem, Strided out, SoftmaxRows rows, Strided dout,
                     Strided dq, Strided dk, Strided dv) {
  if (problem.B == 0 || problem.Hkv == 0) return;
  if (problem.Dk > kMaxHeadDim || problem.Dv > kMaxHeadDim)
    throw Error("CUDA: the float32 attention kernels take head dims up to " +
                    std::to_string(kMaxHeadDim) + "; got Dk = " + std::to_string(problem.Dk) +
                    ", Dv = " + std::to_string(problem.Dv),
                Error::Kind::invalid_argument);
  const Params p = params_of(problem);
  BackwardArgs a;
  a.out = static_cast<const float*>(out.data);
  a.dout = static_cast<const float*>(dout.data);
  a.dq = static_cast<float*>(dq.data);
  a.dk = static_cast<float*>(dk.data);
  a.dv = static_cast<float*>(dv.data);
  for (int d = 0; d < 3; ++d) {
    a.out_stride[d] = out.stride[d], a.dout_stride[d] = dout.stride[d];
    a.dq_stride[d] = dq.stride[d], a.dk_stride[d] = dk.stride[d], a.dv_stride[d] = dv.stride[d];
  }
  a.max = rows.max, a.log_sum = rows.log_sum;
  const int64_t rows_total = problem.B * problem.Hq * problem.L;
  void* scratch = nullptr;
  if (rows_total > 0) {
    check_launch(qkv::simt::device_alloc(&scratch, sizeof(float) * rows_total, problem.stream),
                 "the allocation of the float32 backward's D rows");
    a.delta = static_cast<float*>(scratch);
  }
  try {
    if (rows_total > 0)
      check_launch(qkv::simt::launch(delta_kernel,
                                     dim3(static_cast<unsigned>((rows_total + kThreads / 32 - 1) /
                                                                (kThreads / 32))),
                                     dim3(kThreads), 0, problem.stream, p, a),
                   "the float32 attention backward's D launch");
    const int64_t D = problem.Dk > problem.Dv ? problem.Dk : problem.Dv;
    if (D <= 64)
      run_backward<64, 32, 64>(p, a, problem.stream);
    else if (D <= 128)
      run_backward<32, 32, 128>(p, a, problem.stream);
    else
      run_backward<16, 16, 256>(p, a, problem.stream);
  } catch (...) {
    if (scratch) qkv::simt::device_free(scratch, problem.stream);
    throw;
  }
  if (scratch) qkv::simt::device_free(scratch, problem.stream);
}

}  // namespace f32
}  // namespace QKV_SIMT_NAMESPACE
}  // namespace qkv::cuda::kernel
