// Exact attention weights without the L×S matrix (qkv/attention_weights.h): a row's dot products
// and softmax in float64; single weights against the fused forward's saved max and sum.
#include <cmath>
#include <limits>

#include "attention/fused.h"
#include "attention/validate.h"
#include "qkv/attention_weights.h"

namespace qkv {
namespace {

using attention_detail::Dims;

// One (batch, head) of a checked problem, its inputs contiguous.
struct HeadProblem {
  Dims d;
  Tensor q, k, max_t, sum_t,
      mask;  // mask: float32 (bool as 0 / −∞), read through broadcast strides
  int64_t mask_stride[4] = {0, 0, 0, 0};
  const float* max = nullptr;
  const float* sum = nullptr;
  int64_t b = 0, h = 0, kv = 0;
  double scale = 1, unit = 1;  // unit: natural-log units of one unit of the saved max
  const std::vector<int64_t>* key_lengths = nullptr;
  Causal causal = Causal::none;

  int64_t row(int64_t i) const { return (b * d.Hq + h) * d.L + i; }
  // Keys [0, end) are visible by causality and key lengths; the mask may hide more.
  int64_t visible_end(int64_t i) const {
    int64_t end = d.S;
    if (!key_lengths->empty()) end = std::min(end, (*key_lengths)[static_cast<std::size_t>(b)]);
    if (causal == Causal::top_left) end = std::min(end, i + 1);
    if (causal == Causal::bottom_right) end = std::min(end, i + 1 + d.S - d.L);
    return std::max<int64_t>(end, 0);
  }
  double bias(int64_t i, int64_t j) const {
    if (!mask.defined()) return 0;
    return mask.data<float>()[b * mask_stride[0] + h * mask_stride[1] + i * mask_stride[2] +
                              j * mask_stride[3]];
  }
  // log Σ_j exp(logit_ij) of row i from the kernel's max and sum, in float64: NaN for a poisoned
  // row (max NaN), −∞ for a row that saw nothing (max −∞).
  double saved_lse(int64_t i) const {
    const double m = max[row(i)];
    if (std::isnan(m) || m == -std::numeric_limits<double>::infinity()) return m;
    return unit * m + std::log(static_cast<double>(sum[row(i)]));
  }
  // scale·q_i·k_j + mask_ij in float64; −∞ for a masked key.
  double logit(int64_t i, int64_t j) const {
    const double beta = j < visible_end(i) ? bias(i, j) : -INFINITY;
    if (beta == -std::numeric_limits<double>::infinity()) return beta;
    const float* qi = q.data<float>() + row(i) * d.Dq;
    const float* kj = k.data<float>() + ((b * d.Hkv + kv) * d.S + j) * d.Dk;
    double s = 0;
    for (int64_t t = 0; t < d.Dq; ++t) s += static_cast<double>(qi[t]) * kj[t];
    return scale * s + beta;
  }
};

// exp(x − lse) with a masked key (x = −∞) 0 whatever the row, NaN for a poisoned row.
double weight_of(double x, double lse) {
  if (x == -std::numeric_limits<double>::infinity()) return 0;
  if (lse == -std::numeric_limits<double>::infinity()) return 0;  // nothing seen: 0 (not NaN)
  return std::exp(x - lse);
}

[[noreturn]] void fail(const std::string& message) { throw Error(message); }

// `softmax` null: weight_rows, which needs none.
HeadProblem problem(const Tensor& q, const Tensor& k, const RowSoftmax* softmax,
                    const AttentionOptions& options, int64_t batch, int64_t head) {
  AttentionOptions o = options;  // what the forward asked besides its softmax does not matter
  o.need_weights = o.need_scores = o.need_logsumexp = false;
  HeadProblem p{.d = attention_detail::check_inputs(q, k, k, o)};
  const std::string why = attention_detail::fused_unsupported(q, k, k, o);
  if (!why.empty())
    fail("weights from the fused path's softmax do not apply to " + why +
         "; expected the options of a forward that ran the fused path");
  const Dims& d = p.d;
  Shape rows(q.shape().begin(), q.shape().end() - 1);
  if (softmax != nullptr)
    for (const auto& [name, t] : {std::pair{"max", &softmax->max}, std::pair{"sum", &softmax->sum}})
      if (!t->defined() || t->dtype() != DType::f32 || t->shape() != rows)
        fail(std::string("the row softmax's ") + name + " is " +
             (t->defined() ? std::string(dtype_name(t->dtype())) + " " + shape_str(t->shape())
                           : std::string("missing")) +
             "; expected float32 " + shape_str(rows) +
             " (the forward's saved_max and saved_sum, with keep_for_backward)");
  if (batch < 0 || batch >= d.B || head < 0 || head >= d.Hq)
    fail("batch " + std::to_string(batch) + ", head " + std::to_string(head) +
         " is out of range; expected batch 0–" + std::to_string(d.B - 1) + " and head 0–" +
         std::to_string(d.Hq - 1));
  p.q = q.contiguous(), p.k = k.contiguous();
  if (softmax != nullptr) {
    p.max_t = softmax->max.contiguous(), p.sum_t = softmax->sum.contiguous();
    p.max = p.max_t.data<float>(), p.sum = p.sum_t.data<float>();
  }
  p.b = batch, p.h = head, p.kv = head / (d.Hq / d.Hkv);
  p.scale = o.scale.value_or(default_scale(o.score, d.Dk));
  // As the kernels decide (flash::raw_units): raw scores without a mask for 0 < scale ≤ 1.
  const auto scale32 = static_cast<float>(p.scale);
  p.unit = !o.mask.defined() && scale32 > 0 && scale32 <= 1 ? p.scale : 1.0;
  if (o.mask.defined()) {
    const Tensor m = o.mask.contiguous();
    p.mask = Tensor(m.shape(), DType::f32);
    for (int64_t t = 0; t < m.numel(); ++t)
      p.mask.data<float>()[t] = m.dtype() == DType::b8 ? (m.data<bool>()[t] ? 0.0f : -INFINITY)
                                                       : static_cast<float>(m.value(t));
    attention_detail::broadcast_strides(m.shape(), p.mask_stride);
  }
  p.key_lengths = &options.key_lengths;
  p.causal = o.causal;
  return p;
}

void check_index(const char* what, int64_t index, int64_t count) {
  if (index < 0 || index >= count)
    fail(std::string(what) + " " + std::to_string(index) + " is out of range; expected 0–" +
         std::to_string(count - 1));
}

}  // namespace

Tensor weight_rows(const Tensor& q, const Tensor& k, const AttentionOptions& options, int64_t batch,
                   int64_t head, const std::vector<int64_t>& rows) {
  const HeadProblem p = problem(q, k, nullptr, options, batch, head);
  for (const int64_t i : rows) check_index("row", i, p.d.L);
  Tensor out({static_cast<int64_t>(rows.size()), p.d.S}, DType::f64);
  double* w = out.data<double>();
  std::vector<double> x(static_cast<std::size_t>(p.d.S));
  for (const int64_t i : rows) {
    // The row's own logsumexp, max first: log Σ_j exp(x_j − m) + m, NaN where an x_j is NaN.
    double m = -std::numeric_limits<double>::infinity();
    bool nan = false;
    for (int64_t j = 0; j < p.d.S; ++j) {
      const double xj = x[static_cast<std::size_t>(j)] = p.logit(i, j);
      nan = nan || std::isnan(xj);
      // Beyond float32's range (the inputs' precision): no representable softmax, as on every path.
      if (xj > std::numeric_limits<float>::max() || xj < -std::numeric_limits<float>::max())
        nan = nan || xj != -std::numeric_limits<double>::infinity();
      m = std::max(m, xj);
    }
    double sum = 0;
    if (m != -std::numeric_limits<double>::infinity())
      for (const double xj : x) sum += xj == -INFINITY ? 0.0 : std::exp(xj - m);
    const double lse = nan ? NAN : m == -INFINITY ? m : m + std::log(sum);
    for (const double xj : x) *w++ = weight_of(xj, lse);
  }
  return out;
}

Tensor weights_at(const Tensor& q, const Tensor& k, const RowSoftmax& softmax,
                  const AttentionOptions& options, int64_t batch, int64_t head,
                  const std::vector<std::pair<int64_t, int64_t>>& entries) {
  const HeadProblem p = problem(q, k, &softmax, options, batch, head);
  for (const auto& [i, j] : entries) check_index("row", i, p.d.L), check_index("key", j, p.d.S);
  Tensor out({static_cast<int64_t>(entries.size())}, DType::f64);
  double* w = out.data<double>();
  for (const auto& [i, j] : entries) *w++ = weight_of(p.logit(i, j), p.saved_lse(i));
  return out;
}

}  // namespace qkv
