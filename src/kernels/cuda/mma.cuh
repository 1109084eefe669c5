// One warp's tensor-core product D = A·B + C of a 16×16 A (row-major) and a 16×8 B
// (column-major), 16-bit inputs, float32 accumulators: PTX's mma.sync.aligned.m16n8k16 (PTX ISA,
// "Matrix Fragments for mma.m16n8k16", sm_80 and later). Each lane holds a fragment:
//
//   g = lane / 4 (the group), t = lane % 4 (the thread in its group)
//   A: a[0] = (row g,   cols 2t, 2t+1)   a[1] = (row g+8, cols 2t, 2t+1)
//      a[2] = (row g,   cols 2t+8, 2t+9) a[3] = (row g+8, cols 2t+8, 2t+9)
//   B: b[0] = (rows 2t, 2t+1, col g)     b[1] = (rows 2t+8, 2t+9, col g)
//   C, D: c[0], c[1] = (row g, cols 2t, 2t+1)   c[2], c[3] = (row g+8, cols 2t, 2t+1)
//
// Each 32-bit register holds two 16-bit elements, the lower-numbered one in the low half. The
// host compiler's build (the tests' emulator) gathers the warp's fragments and multiplies them as
// this table says, in float32 with exact products of the 16-bit inputs: a kernel that indexes
// fragments by this table computes the same on both.
#pragma once

#include "kernels/cuda/simt.h"

namespace qkv::simt {

enum class Half16 { bf16, f16 };

template <Half16 kType>
QKV_DEVICE void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__)
  if constexpr (kType == Half16::bf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#else
  emulated_mma_16816(kType == Half16::bf16, d, a, b);
#endif
}

// Two 16-bit elements in one register, `lo` the lower-numbered.
QKV_HOST_DEVICE uint32_t pack16(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

}  // namespace qkv::simt
