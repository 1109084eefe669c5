// A dense layer y = act(x·Wᵀ + b) under Precision::bf16 (qkv/attention_types.h; issue 31's opt-in
// for MiniLM's dense layers): W rounded to bf16 and packed once, when the model is loaded, as
// qk_tile_bf16's key panels (W's rows are the "keys", x's rows the "queries": one output is one
// dot product); x's rows rounded to bf16 on each call; every dot product summed in float32 in
// bf16_tile.h's order (vdpbf16ps's, or its bit-exact emulation), then b added and the activation
// taken in float32. The same bits for any thread count, any batch around a row, and every SIMD
// target (within bf16_tile.h's caveat on values below 2⁻¹²⁶).
#pragma once

#include <cstdint>
#include <memory>

#include "core/aligned.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/packed_linear.h"

namespace qkv::cpu {

struct Bf16Linear {
  int64_t in = 0, out = 0;
  std::shared_ptr<const AlignedBuffer<bf16>> panels;  // bf16_key_panel_elems(out, in)
  std::shared_ptr<const AlignedBuffer<float>> bias;   // out floats (zeros without one)
};

// w: [out, in] row-major float32, rounded here; b: [out] or null (kept in float32).
Bf16Linear pack_linear_bf16(const float* w, const float* b, int64_t out, int64_t in);
// The bytes pack_linear_bf16 allocates for an [out, in] layer.
int64_t bf16_linear_bytes(int64_t out, int64_t in);

// y = act(round(x)·Wᵀ + b) — x: [n, in], y: [n, out], rows ldx and ldy floats apart. GELU is
// gelu_row's (vec_ops.h).
void bf16_linear(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t n, const Bf16Linear& w,
                 Activation act = Activation::none, int num_threads = 0);

}  // namespace qkv::cpu
