// tests/kernels/cuda/flash_cuda_test_support.h — a test Case (tests/kernels/reference) as the
// CUDA kernels' Problem (src/kernels/cuda/flash_cuda.h) on the emulator's "device" memory, which
// is host memory: the inputs rounded to float32, the mask as a uint8 keep mask or a float32 bias
// with broadcast strides, key lengths as int32; and the results back as Tensors, so that
// tests/kernels/cpu/flash_test_support.h's rule checks them as it checks the CPU kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/flash_test_support.h"
#include "kernels/cuda/flash_cuda.h"

namespace qkv_test::cuda {

using qkv::Shape;
using qkv::Tensor;
using qkv_test::Case;

// [B, H, rows, D] values of a Case, as float32, stored [B, H, rows, D] or, with `blhd`,
// [B, rows, H, D] (the layout a projection writes); the Strided view of them either way.
struct Stored {
  std::vector<float> data;
  qkv::cuda::Strided view;
};

inline Stored store(const std::vector<double>& x, int64_t B, int64_t H, int64_t rows, int64_t D,
                    bool blhd = false) {
  Stored s;
  s.data.resize(static_cast<size_t>(B * H * rows * D));
  const int64_t st[3] = {blhd ? rows * H * D : H * rows * D, blhd ? D : rows * D, blhd ? H * D : D};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t d = 0; d < D; ++d)
          s.data[static_cast<size_t>(b * st[0] + h * st[1] + i * st[2] + d)] =
              static_cast<float>(x[static_cast<size_t>(((b * H + h) * rows + i) * D + d)]);
  s.view.data = s.data.data();
  for (int d = 0; d < 3; ++d) s.view.stride[d] = st[d];
  s.view.stride[3] = 1;
  return s;
}

// Reads back a Stored array as a contiguous float32 Tensor of `shape` ([B, H, rows, D]).
inline Tensor fetch(const Stored& s, const Shape& shape) {
  std::vector<float> x(static_cast<size_t>(shape[0] * shape[1] * shape[2] * shape[3]));
  size_t at = 0;
  for (int64_t b = 0; b < shape[0]; ++b)
    for (int64_t h = 0; h < shape[1]; ++h)
      for (int64_t i = 0; i < shape[2]; ++i)
        for (int64_t d = 0; d < shape[3]; ++d)
          x[at++] = s.data[static_cast<size_t>(b * s.view.stride[0] + h * s.view.stride[1] +
                                               i * s.view.stride[2] + d)];
  return Tensor::from(shape, x);
}

// The inputs of one case on the "device", and the Problem that points at them.
struct DeviceCase {
  Stored q, k, v;
  std::vector<uint8_t> keep;
  std::vector<float> bias;
  std::vector<int32_t> key_lengths;
  qkv::cuda::Problem problem;
};

// q_blhd: q stored [B, L, Hq, Dk] (a non-contiguous view for the kernels).
inline DeviceCase upload(const Case& c, bool q_blhd = false) {
  DeviceCase d;
  qkv::cuda::Problem& p = d.problem;
  p.element = qkv::cuda::Element::f32;
  p.B = c.B, p.Hq = c.Hq, p.Hkv = c.Hkv, p.L = c.L, p.S = c.S, p.Dk = c.Dk, p.Dv = c.Dv;
  p.scale = static_cast<float>(c.scale_value());
  p.causal = c.causal;
  d.q = store(c.q, c.B, c.Hq, c.L, c.Dk, q_blhd);
  d.k = store(c.k, c.B, c.Hkv, c.S, c.Dk);
  d.v = store(c.v, c.B, c.Hkv, c.S, c.Dv);
  p.q = d.q.view, p.k = d.k.view, p.v = d.v.view;
  if (c.mask_kind != MaskKind::none) {
    // Broadcast strides over [B, Hq, L, S]: the mask's dims align at the last; size 1 repeats.
    const int r = static_cast<int>(c.mask_shape.size());
    int64_t stride = 1;
    for (int m = r - 1; m >= 0; --m) {
      p.mask.stride[4 - r + m] = c.mask_shape[static_cast<size_t>(m)] == 1 ? 0 : stride;
      stride *= c.mask_shape[static_cast<size_t>(m)];
    }
    for (int m = 0; m < 4 - r; ++m) p.mask.stride[m] = 0;
    if (c.mask_kind == MaskKind::boolean) {
      p.mask_kind = qkv::cuda::MaskKind::keep;
      for (double x : c.mask) d.keep.push_back(x != 0.0 ? 1 : 0);
      p.mask.data = d.keep.data();
    } else {
      p.mask_kind = qkv::cuda::MaskKind::bias;
      for (double x : c.mask) d.bias.push_back(static_cast<float>(x));
      p.mask.data = d.bias.data();
    }
  }
  if (!c.key_lengths.empty()) {
    for (int64_t n : c.key_lengths) d.key_lengths.push_back(static_cast<int32_t>(n));
    p.key_lengths = d.key_lengths.data();
  }
  return d;
}

// A forward's results: out (stored [B, Hq, L, Dv], or [B, L, Hq, Dv] with out_blhd), the
// logsumexp and the saved softmax rows.
struct Forward {
  Stored out;
  std::vector<float> lse, max, log_sum;
  Tensor out_tensor(const Case& c) const { return fetch(out, {c.B, c.Hq, c.L, c.Dv}); }
  Tensor lse_tensor(const Case& c) const { return Tensor::from({c.B, c.Hq, c.L}, lse); }
};

using ForwardFn = void (*)(const qkv::cuda::Problem&, qkv::cuda::Strided, float*,
                           qkv::cuda::SoftmaxRows);
using BackwardFn = void (*)(const qkv::cuda::Problem&, qkv::cuda::Strided, qkv::cuda::SoftmaxRows,
                            qkv::cuda::Strided, qkv::cuda::Strided, qkv::cuda::Strided,
                            qkv::cuda::Strided);

inline Forward run_forward(ForwardFn fn, const DeviceCase& d, const Case& c,
                           bool out_blhd = false) {
  Forward f;
  // NaN-filled, so that an element the kernel forgets to write cannot pass as a result.
  f.out = store(std::vector<double>(static_cast<size_t>(c.B * c.Hq * c.L * c.Dv), kNaN), c.B, c.Hq,
                c.L, c.Dv, out_blhd);
  const size_t rows = static_cast<size_t>(c.B * c.Hq * c.L);
  f.lse.assign(rows, kNaN), f.max.assign(rows, kNaN), f.log_sum.assign(rows, kNaN);
  fn(d.problem, f.out.view, f.lse.data(), {f.max.data(), f.log_sum.data()});
  return f;
}

struct Backward {
  Stored dq, dk, dv;
};

inline Backward run_backward(BackwardFn fn, const DeviceCase& d, const Case& c, const Forward& f,
                             const std::vector<double>& dout) {
  Backward g;
  const Stored go = store(dout, c.B, c.Hq, c.L, c.Dv);
  g.dq = store(std::vector<double>(static_cast<size_t>(c.B * c.Hq * c.L * c.Dk), kNaN), c.B, c.Hq,
               c.L, c.Dk);
  g.dk = store(std::vector<double>(static_cast<size_t>(c.B * c.Hkv * c.S * c.Dk), kNaN), c.B, c.Hkv,
               c.S, c.Dk);
  g.dv = store(std::vector<double>(static_cast<size_t>(c.B * c.Hkv * c.S * c.Dv), kNaN), c.B, c.Hkv,
               c.S, c.Dv);
  qkv::cuda::SoftmaxRows rows{const_cast<float*>(f.max.data()),
                              const_cast<float*>(f.log_sum.data())};
  fn(d.problem, f.out.view, rows, go.view, g.dq.view, g.dk.view, g.dv.view);
  return g;
}

}  // namespace qkv_test::cuda
