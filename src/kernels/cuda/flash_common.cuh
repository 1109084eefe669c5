// What every CUDA attention kernel shares: the problem as a kernel parameter, which keys a row
// sees, the mask's value, the units of the saved softmax rows (flash_cuda.h's SoftmaxRows), and a
// launch's failure as qkv::Error.
//
// Units: natural. A kernel forms each logit x_ij = scale·q_i·k_j + bias_ij, keeps the row's
// largest m_i, and takes exp(x − m) as exp2f((x − m)·log2(e)) (exp_of): one exp2f, as
// FlashAttention-2 does (Dao 2023, §3.1), but with the log2(e) applied to the difference, not to
// each logit. Scaling logits in the hundreds by log2(e) first costs their own rounding, |x|·2⁻²⁴,
// in every exponent: measured here on the CPU sweeps' large-logit cases, 1.2–1.4× the tolerance of
// DESIGN §3 in logsumexp (the CPU kernels keep raw units for the same reason). SoftmaxRows::max
// holds m_i, ::log_sum holds log Σ_j exp(x_ij − m_i), and logsumexp = max + log_sum. A backward
// recomputes x_ij with the same operations in the same order, so that it evaluates the forward's
// very exponents.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cuda/flash_cuda.h"
#include "kernels/cuda/simt.h"
#include "qkv/tensor.h"

namespace qkv::cuda::kernel {
inline namespace QKV_SIMT_NAMESPACE {

inline constexpr float kLog2e = 1.4426950408889634f;

// exp(d) for a difference of logits d = x − m ≤ 0 (or −∞): one exp2f.
QKV_HOST_DEVICE float exp_of(float d) { return exp2f(d * kLog2e); }

// The problem as the kernels read it: plain values, passed by value to every launch.
struct Params {
  int B = 1, Hq = 1, Hkv = 1, group = 1;  // group = Hq / Hkv
  int L = 0, S = 0, Dk = 0, Dv = 0;
  float scale = 1;
  int causal = 0;  // 0 none, 1 top-left, 2 bottom-right (qkv::Causal)
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t q_stride[3] = {0, 0, 0};  // b, h, row (the last dimension is contiguous)
  int64_t k_stride[3] = {0, 0, 0};
  int64_t v_stride[3] = {0, 0, 0};
  int mask_kind = 0;  // 0 none, 1 keep (uint8), 2 bias (float32): qkv::cuda::MaskKind
  const void* mask = nullptr;
  int64_t mask_stride[4] = {0, 0, 0, 0};  // b, h, i, j (0 where broadcast)
  const int32_t* key_lengths = nullptr;
};

inline Params params_of(const Problem& p) {
  Params k;
  k.B = static_cast<int>(p.B), k.Hq = static_cast<int>(p.Hq), k.Hkv = static_cast<int>(p.Hkv);
  k.group = p.Hkv > 0 ? static_cast<int>(p.Hq / p.Hkv) : 1;
  k.L = static_cast<int>(p.L), k.S = static_cast<int>(p.S);
  k.Dk = static_cast<int>(p.Dk), k.Dv = static_cast<int>(p.Dv);
  k.scale = p.scale;
  k.causal = p.causal == Causal::top_left ? 1 : p.causal == Causal::bottom_right ? 2 : 0;
  k.q = p.q.data, k.k = p.k.data, k.v = p.v.data;
  for (int d = 0; d < 3; ++d) {
    k.q_stride[d] = p.q.stride[d];
    k.k_stride[d] = p.k.stride[d];
    k.v_stride[d] = p.v.stride[d];
  }
  k.mask_kind = static_cast<int>(p.mask_kind);
  k.mask = p.mask.data;
  for (int d = 0; d < 4; ++d) k.mask_stride[d] = p.mask.stride[d];
  k.key_lengths = p.key_lengths;
  return k;
}

// Row i of batch b sees keys j < visible_end (causal and key_lengths; the mask comes on top).
// top-left: j ≤ i; bottom-right: j ≤ i + S − L. May be ≤ 0 (nothing visible) and is ≤ S.
QKV_HOST_DEVICE int visible_end(const Params& p, int b, int i) {
  int end = p.S;
  if (p.causal == 1) end = i + 1 < end ? i + 1 : end;
  if (p.causal == 2) end = i + 1 + p.S - p.L < end ? i + 1 + p.S - p.L : end;
  if (p.key_lengths != nullptr) {
    const int len = p.key_lengths[b];
    end = len < end ? len : end;
  }
  return end;
}

// The mask's term of logit (b, h, i, j) in natural units: 0 or −∞ for a keep mask, the bias for a
// float mask, 0 without one. Read only for keys below visible_end.
QKV_DEVICE float mask_term(const Params& p, int b, int h, int i, int j) {
  if (p.mask_kind == 0) return 0.0f;
  const int64_t at =
      b * p.mask_stride[0] + h * p.mask_stride[1] + i * p.mask_stride[2] + j * p.mask_stride[3];
  if (p.mask_kind == 1)
    return static_cast<const uint8_t*>(p.mask)[at] != 0 ? 0.0f : -__int_as_float(0x7f800000);
  return static_cast<const float*>(p.mask)[at];
}

// A NaN-propagating max: fmaxf(NaN, x) = x would let a poisoned score vanish from its row's max,
// and a row of NaN scores would look fully masked (max −∞, output 0) instead of NaN.
QKV_DEVICE float max_nan(float a, float b) { return (a != a || b != b) ? a + b : (a > b ? a : b); }

// A launch's or an allocation's status as qkv::Error (cudaError_t under nvcc, the emulator's Status
// under the host compiler).
template <class Status>
void check_launch(Status e, const char* what) {
  if (e != qkv::simt::kSuccess)
    throw Error(std::string("CUDA: ") + what + " failed: " + qkv::simt::error_string(e),
                Error::Kind::runtime);
}

}  // namespace QKV_SIMT_NAMESPACE
}  // namespace qkv::cuda::kernel
