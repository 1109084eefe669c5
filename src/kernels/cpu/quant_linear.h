// A dense layer y = x·Wᵀ whose W stays in its GGUF file's ggml type (core/gguf.h's GgmlType:
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, F16, BF16): a 135M-parameter model in Q4_1 keeps
// 94 MB instead of 538 MB of float32, and a token's pass reads that much less memory. Two ways to
// multiply, chosen by the caller:
//
//   float32  each block dequantized to float32 (exactly as core/gguf.h's dequantize()) into the
//            panels of packed_linear.h, a few panels at a time, and every row of x multiplied there
//            in float32: the same sums in the same order as packed_linear on the dequantized
//            matrix, so the same bits as the float32 path. Prefill (many rows) pays the
//            dequantization once for all its rows; it is the lens's exact path.
//   int8     llama.cpp's way for a few rows (decode): each row of x quantized to 8 bits per 32
//            values, q = round(x/d), d = max|x|/127, and the blocks' integers multiplied with q in
//            integer arithmetic (u8 × s8 pairs summed in 16 then 32 bits), then scaled by the
//            block's and x's scales in float32 (per 256 values of x for the K-quants, whose
//            super-blocks then need one scale: int8_block). The only error beyond float32's is
//            x's rounding: |Δx| ≤ d/2 a value, |Δy| ≤ Σ_blocks d_x/2 · Σ|w| (quant_linear_test
//            bounds it so).
//            F16 and BF16 weights have no integers: they run float32 whatever is asked.
//
// Learned from ggml's ggml-cpu/quants.c and arch/x86/quants.c (quantize_row_q8_0, ggml_vec_dot_*:
// maddubs on unsigned weights and signed activations), written anew for qkv's own layout of the
// quantized activations (scales per 32 and sums per 16 for every type, where ggml has Q8_0, Q8_1
// and Q8_K).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/aligned.h"

namespace qkv::cpu {

// W [out, in] in ggml type `type`: row o is row_bytes bytes at data + o·row_bytes (in a whole
// number of the type's blocks).
struct QuantMatrix {
  uint32_t type = 0;
  int64_t out = 0, in = 0;
  uint64_t row_bytes = 0;
  std::shared_ptr<const AlignedBuffer<std::byte>> data;
  const std::byte* row(int64_t o) const { return data->data() + static_cast<uint64_t>(o) * row_bytes; }
};

enum class QuantProduct { float32, int8 };

// y = x·Wᵀ (+ b) — x: [n, in], y: [n, out], rows ldx and ldy floats apart; b: [out] or null.
// With int8 the rows of x are quantized first (n·in bytes of scratch). Threads over blocks of
// output columns.
void quant_linear(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t n,
                  const QuantMatrix& w, const float* bias, QuantProduct product,
                  int num_threads = 0);

// Several products of the same x at once — y_j = x·W_jᵀ (+ b_j), every W_j of x's width: with
// int8, x quantized once and every matrix's rows shared among the threads in one job (a decode
// step's q, k and v, or gate and up, are small: one wake-up of the threads instead of three).
struct QuantOutput {
  const QuantMatrix* w = nullptr;
  const float* bias = nullptr;  // [out] or null
  float* y = nullptr;           // [n, out], rows ldy floats apart
  int64_t ldy = 0;
};
void quant_linears(const float* x, int64_t ldx, int64_t n, const std::vector<QuantOutput>& outs,
                   QuantProduct product, int num_threads = 0);

// Whether int8 is more than float32 for `type`: false for F16, BF16 and F32, which have no
// integers to multiply.
bool quant_has_int8(uint32_t type);

// The rows of x as int8 sees them: q[i] = round(x[i]/d_b) over each block b of `block` values,
// d_b = max|x|/127 (0 for a block of zeros), and the sum of every 16 q's. The block is the
// weights' own (int8_block): 32 for the legacy types, whose scales are per 32; 256 for the
// K-quants, as ggml's Q8_K, so that a super-block's integer sums need one scale.
struct QuantizedRow {
  const int8_t* q;
  const float* d;      // [in / block]
  const int16_t* s16;  // [in / 16]: |Σ| ≤ 16·127
  int64_t block = 32;
};
int64_t int8_block(uint32_t type);
void quantize_row_int8(const float* x, int64_t in, int64_t block, int8_t* q, float* d,
                       int16_t* s16);

// One row of W (row_bytes of type `type`) · one quantized row: int8's dot product, on the SIMD
// target running now (AVX-512 VNNI's vpdpbusd where the CPU has it and set_int8_vnni allows).
float quant_dot_int8(uint32_t type, const std::byte* row, const QuantizedRow& x, int64_t in);

// Tests: whether the AVX-512 target may use VNNI (default: where the CPU has it), and whether it
// does now.
void set_int8_vnni(bool allowed);
bool int8_uses_vnni();

}  // namespace qkv::cpu
