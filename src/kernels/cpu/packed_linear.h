// A dense layer y = act(x·Wᵀ + b) on weights packed once, when the model is loaded, and reused by
// every call: OpenBLAS re-packs W on each SGEMM call, which at a model's sizes (W up to 2.4 MB,
// a few hundred rows of x, or 12 for one sentence) costs as much as a good part of the product,
// and forces each thread to take one large block of rows. Here the work splits into many small
// items (rows × column blocks) that the threads claim as they go, the bias starts each sum, and an
// activation (GELU) runs on each block of outputs while it is still in L1 (issue 12: the FFN's
// bias + GELU in the GEMM's epilogue).
//
// Exactness: every y[i, o] is b[o] + S₀ + S₁ + … in float32, in that order, Sⱼ the chain of
// multiply-adds x[i, k]·W[o, k] over the j-th 128 values of k in order, whatever the rows, the
// blocking or the thread that ran it: results are bitwise identical for any thread count and any
// batch around a row. On targets without FMA (SSE4 and older) a multiply-add is a multiply and an
// add.
#pragma once

#include <cstdint>
#include <memory>

#include "core/aligned.h"

namespace qkv::cpu {

// Wᵀ in panels of `width` output columns, 2 vectors of the SIMD target that packed it: panel p
// holds W[p·width + c, k] at data[(p·in + k)·width + c], zeros past `out`; the bias (zeros
// without one) padded the same way.
struct PackedLinear {
  int64_t in = 0, out = 0, width = 0;
  std::shared_ptr<const AlignedBuffer<float>> data, bias;
  int64_t panels() const { return width == 0 ? 0 : (out + width - 1) / width; }
};

// The panel width the current SIMD target packs and multiplies with.
int64_t packed_linear_width();

// w: [out, in] row-major; b: [out] or null.
PackedLinear pack_linear(const float* w, const float* b, int64_t out, int64_t in);
// The bytes pack_linear allocates for an [out, in] layer (its panels and its bias), on the SIMD
// target running now.
int64_t packed_linear_bytes(int64_t out, int64_t in);

enum class Activation { none, gelu };

// y = act(x·Wᵀ + b) — x: [n, in], y: [n, out], both row-major with rows ldx and ldy floats apart
// (ldx ≥ in, ldy ≥ out). GELU is gelu_row's (vec_ops.h). `w` must have been packed for the
// current target (width == packed_linear_width()); an internal error otherwise.
void packed_linear(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t n,
                   const PackedLinear& w, Activation act = Activation::none, int num_threads = 0);

// packed_linear on panels laid out as pack_linear lays them (⌈out / width⌉ panels at `panels`,
// their padded bias at `bias`) that the caller packs a block at a time as it uses them
// (quant_linear.h dequantizes its blocks into panels): every row of x through them, y's columns
// 0 … out − 1 — the same sums in the same order as packed_linear, so the same bits.
void packed_panels(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t n,
                   const float* panels, const float* bias, int64_t in, int64_t out,
                   Activation act = Activation::none);

}  // namespace qkv::cpu
