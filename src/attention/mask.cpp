// Masks → one additive bias over the scores (DESIGN.md §3): a bool mask is true where a query may
// attend; a float mask is added; causal and key lengths hide keys; all combine by AND.
#include <limits>

#include "attention/validate.h"

namespace qkv::attention_detail {
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

}  // namespace

void broadcast_strides(const Shape& shape, int64_t stride[4]) {
  const int rank = static_cast<int>(shape.size());
  int64_t step = 1;
  for (int i = 1; i <= 4; ++i) {
    const int64_t size = i <= rank ? shape[rank - i] : 1;
    stride[4 - i] = size == 1 ? 0 : step;
    step *= size;
  }
}

Tensor logit_bias(const AttentionOptions& o, const Dims& d) {
  if (!o.mask.defined() && o.causal == Causal::none && o.key_lengths.empty()) return Tensor();
  Tensor bias({d.B, d.Hq, d.L, d.S}, DType::f64);
  double* out = bias.data<double>();

  // The mask as a contiguous copy, read through broadcast strides over [B, Hq, L, S].
  const Tensor& m = o.mask;
  const Tensor mask_f64 = m.defined() && m.dtype() != DType::b8 ? m.to(DType::f64) : Tensor();
  const Tensor mask_bool = m.defined() && m.dtype() == DType::b8 ? m.contiguous() : Tensor();
  int64_t stride[4] = {0, 0, 0, 0};
  if (m.defined()) broadcast_strides(m.shape(), stride);

  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.Hq; ++h)
      for (int64_t i = 0; i < d.L; ++i)
        for (int64_t j = 0; j < d.S; ++j) {
          double x = 0;
          bool visible = causal_visible(o.causal, i, j, d.L, d.S);
          if (!o.key_lengths.empty() && j >= o.key_lengths[b]) visible = false;
          if (m.defined()) {
            const int64_t at = b * stride[0] + h * stride[1] + i * stride[2] + j * stride[3];
            if (mask_bool.defined())
              visible = visible && mask_bool.data<bool>()[at];
            else
              x = mask_f64.data<double>()[at];
          }
          *out++ = visible ? x : -kInf;
        }
  return bias;
}

}  // namespace qkv::attention_detail
