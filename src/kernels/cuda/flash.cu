// The GPU backend's flash_forward and flash_backward: the element type picks the kernels (FFMA
// for float32: flash_f32_forward.cuh and flash_f32_backward.cuh; tensor cores for bf16 and fp16:
// tensor_core.cu).
#include "kernels/cuda/flash_f32_backward.cuh"
#include "kernels/cuda/flash_f32_forward.cuh"
#include "kernels/cuda/gpu.h"
#include "kernels/cuda/tensor_core.h"

namespace qkv::cuda::gpu {

void flash_forward(const Problem& p, Strided out, float* logsumexp, SoftmaxRows rows) {
  if (p.element != Element::f32) return detail::tensor_core_forward(p, out, logsumexp, rows);
  kernel::f32::forward(p, out, logsumexp, rows);
}

void flash_backward(const Problem& p, Strided out, SoftmaxRows rows, Strided dout, Strided dq,
                    Strided dk, Strided dv) {
  if (p.element != Element::f32)
    return detail::tensor_core_backward(p, out, rows, dout, dq, dk, dv);
  kernel::f32::backward(p, out, rows, dout, dq, dk, dv);
}

}  // namespace qkv::cuda::gpu
