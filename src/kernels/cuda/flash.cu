// The GPU backend's flash_forward and flash_backward: the element type picks the kernels (FFMA
// for float32, tensor cores for bf16 and fp16).
#include "kernels/cuda/gpu.h"
#include "kernels/cuda/tensor_core.h"
#include "qkv/tensor.h"

namespace qkv::cuda::gpu {

void flash_forward(const Problem& p, Strided out, float* logsumexp, SoftmaxRows rows) {
  if (p.element != Element::f32) return detail::tensor_core_forward(p, out, logsumexp, rows);
  throw Error("CUDA: the float32 kernels are not written yet", Error::Kind::runtime);
}

void flash_backward(const Problem& p, Strided out, SoftmaxRows rows, Strided dout, Strided dq,
                    Strided dk, Strided dv) {
  if (p.element != Element::f32)
    return detail::tensor_core_backward(p, out, rows, dout, dq, dk, dv);
  throw Error("CUDA: the float32 kernels are not written yet", Error::Kind::runtime);
}

}  // namespace qkv::cuda::gpu
