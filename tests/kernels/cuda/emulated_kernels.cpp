// emulated_kernels.h: the same dispatch as src/kernels/cuda/flash.cu and device.cu — float32 on
// the FFMA kernels, bf16 and fp16 on the tensor-core kernels — compiled by the host compiler from
// the very .cuh sources nvcc compiles, so they run on the SIMT emulator.
#include "kernels/cuda/emulated_kernels.h"

#include "kernels/cuda/flash_f32_backward.cuh"
#include "kernels/cuda/flash_f32_forward.cuh"
#include "kernels/cuda/softmax_rows.cuh"
#include "kernels/cuda/tensor_core_backward.cuh"
#include "kernels/cuda/tensor_core_forward.cuh"

namespace qkv_test::emulated {

using namespace qkv::cuda;

void flash_forward(const Problem& p, Strided out, float* logsumexp, SoftmaxRows rows) {
  if (p.element == Element::f32) return kernel::f32::forward(p, out, logsumexp, rows);
  kernel::tc::forward(p, out, logsumexp, rows);
}
void flash_backward(const Problem& p, Strided out, SoftmaxRows rows, Strided dout, Strided dq,
                    Strided dk, Strided dv) {
  if (p.element == Element::f32) return kernel::f32::backward(p, out, rows, dout, dq, dk, dv);
  kernel::tc::backward(p, out, rows, dout, dq, dk, dv);
}
void rows_from_logsumexp(const float* lse, int64_t n, SoftmaxRows rows, void* stream) {
  kernel::rows_from_logsumexp(lse, n, rows, stream);
}

}  // namespace qkv_test::emulated
