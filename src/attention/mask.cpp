// Masks → one additive bias over the scores (docs/CONVENTIONS.md §5): a bool mask is true where a
// query may attend; a float mask is added; causal and key lengths hide keys; all combine by AND.
#include <limits>

#include "attention/validate.h"

namespace qkv::attention_detail {

void broadcast_strides(const Shape& shape, int64_t stride[4]) {
  const int rank = static_cast<int>(shape.size());
  int64_t step = 1;
  for (int i = 1; i <= 4; ++i) {
    const int64_t size = i <= rank ? shape[rank - i] : 1;
    stride[4 - i] = size == 1 ? 0 : step;
    step *= size;
  }
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Whether query i (of L) may see key j (of S) under causal masking.
bool causal_visible(Causal causal, int64_t i, int64_t j, int64_t L, int64_t S) {
  switch (causal) {
    case Causal::none:
      return true;
    case Causal::top_left:
      return j <= i;  // PyTorch's is_causal
    case Causal::bottom_right:
      return j <= i + S - L;  // the last query sees every key
  }
  return true;
}

// The mask as a contiguous copy, read through broadcast strides over [B, Hq, L, S]. A float32
// problem reads a float mask as float32 holds it (as the fused kernel does): −1e300 is −∞ there,
// a mask, not a logit beyond float32's range.
Tensor float_mask(const Tensor& m, bool f32) {
  if (!m.defined() || m.dtype() == DType::b8) return Tensor();
  return f32 && m.dtype() == DType::f64 ? m.to(DType::f32).to(DType::f64) : m.to(DType::f64);
}

struct MaskReader {
  MaskReader(const Tensor& m, bool f32)
      : as_f64(float_mask(m, f32)),
        as_bool(m.defined() && m.dtype() == DType::b8 ? m.contiguous() : Tensor()) {
    if (m.defined()) broadcast_strides(m.shape(), stride);
  }
  Tensor as_f64, as_bool;
  int64_t stride[4] = {0, 0, 0, 0};
};

// The bias of rows [i0, i0 + rows) of (b, h): [rows, S] from `out` on.
void bias_rows(const AttentionOptions& o, const Dims& d, const MaskReader& m, int64_t b, int64_t h,
               int64_t i0, int64_t rows, double* out) {
  for (int64_t i = i0; i < i0 + rows; ++i)
    for (int64_t j = 0; j < d.S; ++j) {
      double x = 0;
      bool visible = causal_visible(o.causal, i, j, d.L, d.S);
      if (!o.key_lengths.empty() && j >= o.key_lengths[b]) visible = false;
      const int64_t at = b * m.stride[0] + h * m.stride[1] + i * m.stride[2] + j * m.stride[3];
      if (m.as_bool.defined())
        visible = visible && m.as_bool.data<bool>()[at];
      else if (m.as_f64.defined())
        x = m.as_f64.data<double>()[at];
      *out++ = visible ? x : -kInf;
    }
}

bool masks_anything(const AttentionOptions& o) {
  return o.mask.defined() || o.causal != Causal::none || !o.key_lengths.empty();
}

}  // namespace

Tensor logit_bias(const AttentionOptions& o, const Dims& d) {
  if (!masks_anything(o)) return Tensor();
  Tensor bias({d.B, d.Hq, d.L, d.S}, DType::f64);
  const MaskReader m(o.mask, d.f32);
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.Hq; ++h)
      bias_rows(o, d, m, b, h, 0, d.L, bias.data<double>() + (b * d.Hq + h) * d.L * d.S);
  return bias;
}

Tensor logit_bias_rows(const AttentionOptions& o, const Dims& d, int64_t b, int64_t h, int64_t i0,
                       int64_t rows) {
  if (!masks_anything(o)) return Tensor();
  Tensor bias({rows, d.S}, DType::f64);
  bias_rows(o, d, MaskReader(o.mask, d.f32), b, h, i0, rows, bias.data<double>());
  return bias;
}

}  // namespace qkv::attention_detail
