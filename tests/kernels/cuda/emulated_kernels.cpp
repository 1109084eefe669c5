// emulated_kernels.h: the same dispatch as src/kernels/cuda/flash.cu and device.cu, on the
// emulator. (Wired to the kernels' launchers as they land.)
#include "kernels/cuda/emulated_kernels.h"

#include <cmath>
#include <limits>

#include "qkv/tensor.h"

namespace qkv_test::emulated {

void flash_forward(const qkv::cuda::Problem&, qkv::cuda::Strided, float*, qkv::cuda::SoftmaxRows) {
  throw qkv::Error("CUDA (emulated): the kernels are not wired yet", qkv::Error::Kind::runtime);
}
void flash_backward(const qkv::cuda::Problem&, qkv::cuda::Strided, qkv::cuda::SoftmaxRows,
                    qkv::cuda::Strided, qkv::cuda::Strided, qkv::cuda::Strided,
                    qkv::cuda::Strided) {
  throw qkv::Error("CUDA (emulated): the kernels are not wired yet", qkv::Error::Kind::runtime);
}
// As device.cu's kernel: max = lse·log2(e), log_sum = 0, −∞ and NaN rows kept.
void rows_from_logsumexp(const float* lse, int64_t n, qkv::cuda::SoftmaxRows rows, void*) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = lse[i];
    rows.max[i] = x * 1.4426950408889634f;
    rows.log_sum[i] = (x == -std::numeric_limits<float>::infinity() || std::isnan(x)) ? x : 0.0f;
  }
}

}  // namespace qkv_test::emulated
