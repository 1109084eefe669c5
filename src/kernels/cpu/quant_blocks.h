// kernels/cpu/quant_blocks.h — the pieces quant_linear.cpp and quant_dot.cpp share: the portable
// int8 dot product (every target without AVX2, and the check of the SIMD ones), and the
// dispatched row loop.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_linear.h"

namespace qkv::cpu {

// One row of W · one quantized row, in plain integer loops: each group of 16 weights is
// w = a·q + b (q an integer), so Σ w·x = d_x·(a·Σ q·q_x + b·Σ q_x).
float quant_dot_portable(uint32_t type, const uint8_t* row, const QuantizedRow& x, int64_t in);

// y[r·ldy + o] = W[o]·x_r (+ bias[o]) for r < n and o in [o0, o1), on the SIMD target running
// now: W's rows row_bytes apart from w.
void quant_dot_rows(uint32_t type, const std::byte* w, uint64_t row_bytes, int64_t o0, int64_t o1,
                    const QuantizedRow* xs, int64_t n, int64_t in, const float* bias, float* y,
                    int64_t ldy);

}  // namespace qkv::cpu
