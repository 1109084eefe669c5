// The bf16 and fp16 kernels' entry points (tensor_core.h): the launchers of
// tensor_core_forward.cuh and tensor_core_backward.cuh, which the emulated tests call directly.
#include "kernels/cuda/tensor_core.h"
#include "kernels/cuda/tensor_core_backward.cuh"
#include "kernels/cuda/tensor_core_forward.cuh"

namespace qkv::cuda::detail {

void tensor_core_forward(const Problem& p, Strided out, float* logsumexp, SoftmaxRows rows) {
  kernel::tc::forward(p, out, logsumexp, rows);
}
void tensor_core_backward(const Problem& p, Strided out, SoftmaxRows rows, Strided dout, Strided dq,
                          Strided dk, Strided dv) {
  kernel::tc::backward(p, out, rows, dout, dq, dk, dv);
}

}  // namespace qkv::cuda::detail
