// Fused exact attention on an NVIDIA GPU: FlashAttention-2's algorithm (Dao 2023) on device
// memory. float32 runs on CUDA cores (FFMA), exact by DESIGN §3's rule; bf16 and fp16 run the two
// products on tensor cores (mma.sync m16n8k16, float32 accumulation) with the softmax in float32.
//
// This header is plain C++: the attention layer includes it whether or not the library was built
// with CUDA. Without CUDA every function here throws qkv::Error (Kind::runtime) that says so.
// The kernels themselves are written once (the .cuh files beside this one) and compiled twice:
// by nvcc for the GPU, and by the host compiler against simt_emulator.h for the tests that run
// them on a machine without a GPU (tests/kernels/cuda).
#pragma once

#include <cstdint>
#include <string>

#include "qkv/attention_types.h"

namespace qkv::cuda {

// The element type of q, k, v, out (and dout, dq, dk, dv).
enum class Element { f32, bf16, f16 };

// A device array seen as [B, H, rows, cols]: element (b, h, i, c) at
// data[b*stride[0] + h*stride[1] + i*stride[2] + c*stride[3]] (strides in elements). q, k, v, out,
// dout, dq, dk, dv have stride[3] == 1 (the attention layer makes them so); a mask may broadcast
// (stride 0 along a dimension of size 1).
struct Strided {
  void* data = nullptr;
  int64_t stride[4] = {0, 0, 0, 1};
};

enum class MaskKind {
  none,
  keep,  // uint8 [B, Hq, L, S] (broadcast): nonzero where a query may attend to a key
  bias,  // float32 [B, Hq, L, S] (broadcast): added to the logits; −∞ masks
};

// q: [B, Hq, L, Dk], k: [B, Hkv, S, Dk], v: [B, Hkv, S, Dv], out: [B, Hq, L, Dv]; query head h
// reads kv head h / (Hq / Hkv). Visible keys: causal (both alignments) AND j < key_lengths[b] AND
// the mask keeps it (bias > −∞). Every pointer is device memory.
struct Problem {
  Element element = Element::f32;
  int64_t B = 1, Hq = 1, Hkv = 1, L = 0, S = 0, Dk = 0, Dv = 0;
  float scale = 1;
  Causal causal = Causal::none;
  Strided q, k, v;
  MaskKind mask_kind = MaskKind::none;
  Strided mask;
  const int32_t* key_lengths = nullptr;  // [B] or null
  void* stream = nullptr;                // cudaStream_t; null: the legacy default stream
};

// Each row's softmax as the forward formed it, [B, Hq, L] float32 each, so that the backward
// evaluates the very exponents of the forward: P_ij = exp(x_ij − max_i − log_sum_i) with x_ij the
// row's logits scale·q_i·k_j + bias_ij (natural units; flash_common.cuh), max_i their largest and
// log_sum_i = log Σ_j exp(x_ij − max_i). Why not the logsumexp alone: a float32 lse of a row whose
// logits are in the hundreds is off by |lse|·2⁻²⁴, an error exp(x − lse) passes on to every P of
// the row (the CPU kernels measured it; issue 11). A row that sees no key has max = log_sum = −∞;
// a poisoned row has NaN.
struct SoftmaxRows {
  float* max = nullptr;
  float* log_sum = nullptr;
};

// Semantics shared with the CPU kernels (qkv/attention.h): a row that sees no key gives out 0 and
// logsumexp −∞; NaN or ∞ in q_i or in a visible k_j makes row i NaN (out and logsumexp); NaN or ∞
// in a visible v_j makes row i's out NaN; masked keys are never read.
//
// out: [B, Hq, L, Dv] of p.element. logsumexp: [B, Hq, L] contiguous float32 (natural log of
// Σ_j exp(scale·q·k + bias)), or null; rows: filled where its pointers are set. Asynchronous on
// p.stream.
void flash_forward(const Problem& p, Strided out, float* logsumexp, SoftmaxRows rows = {});

// Gradients given dout [B, Hq, L, Dv] and the forward's out and rows (what flash_forward wrote
// for these very inputs). dq: [B, Hq, L, Dk], dk: [B, Hkv, S, Dk], dv: [B, Hkv, S, Dv] of
// p.element, overwritten. Deterministic: no floating-point atomics, so the same inputs give the
// same bits on every run. Scratch (the rows' D = rowsum(dO∘O), float32 partials) is allocated on
// p.stream and freed before the call returns.
void flash_backward(const Problem& p, Strided out, SoftmaxRows rows, Strided dout, Strided dq,
                    Strided dk, Strided dv);

// The rows a logsumexp alone gives (FlashAttention's own backward input): max = lse, log_sum =
// 0 (−∞ and NaN rows kept). n = B·Hq·L, device memory.
void rows_from_logsumexp(const float* lse, int64_t n, SoftmaxRows rows, void* stream);

// Whether this build has the CUDA kernels, and the first device's description ("NVIDIA H200,
// sm_90, 132 SMs, 139 GiB") or why there is none ("qkv was built without CUDA", "no CUDA device:
// <the driver's words>"). Never throws.
bool built_with_cuda();
bool device_present(std::string* description_or_why = nullptr);

}  // namespace qkv::cuda
