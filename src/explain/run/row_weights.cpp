// A run's weights where it kept them, and where it kept rows (a long text's decoder: q, k and each
// layer's row softmax from the fused path) recomputed (qkv/attention_weights.h): a row, and a
// weight of it, as the float64 reference's; single weights for the means over every row from the
// fused path's softmax. The switch between the two captures.
#include <cmath>

#include "qkv/attention_weights.h"
#include "qkv/explain_run.h"

namespace qkv::explain {
namespace {

const AttentionCapture& layer_of(const Block& b, int64_t l) {
  return b.layers[static_cast<std::size_t>(l)];
}

// The forward's options as the capture records them: what the recomputation must see.
AttentionOptions options_of(const AttentionCapture& c) {
  return {.score = c.score,
          .scale = c.scale,
          .normalize = c.normalize,
          .causal = c.causal,
          .mask = c.mask};
}

}  // namespace

int64_t Block::heads() const {
  if (layers.empty()) return 0;
  const AttentionCapture& c = layers.front();
  return c.weights.defined() ? c.weights.dim(1) : c.q.dim(1);
}

bool Block::rows() const {
  return !layers.empty() && !layers.front().weights.defined() && layers.front().saved_max.defined();
}

double Block::weight(int64_t l, int64_t h, int64_t i, int64_t j) const {
  const Tensor& w = layer_of(*this, l).weights;
  if (w.defined()) return w.value(((h * w.dim(2)) + i) * w.dim(3) + j);
  return weight_row(l, h, i)[static_cast<std::size_t>(j)];  // O(keys i sees · d)
}

std::vector<double> Block::weight_row(int64_t l, int64_t h, int64_t i) const {
  const AttentionCapture& c = layer_of(*this, l);
  if (c.weights.defined()) {
    const int64_t m = c.weights.dim(3);
    std::vector<double> row(static_cast<std::size_t>(m));
    for (int64_t j = 0; j < m; ++j) row[static_cast<std::size_t>(j)] = weight(l, h, i, j);
    return row;
  }
  const Tensor w = weight_rows(c.q, c.k, options_of(c), 0, h, {i});
  return {w.data<double>(), w.data<double>() + w.numel()};
}

std::vector<double> Block::weights_at(
    int64_t l, int64_t h, const std::vector<std::pair<int64_t, int64_t>>& entries) const {
  const AttentionCapture& c = layer_of(*this, l);
  std::vector<double> out;
  out.reserve(entries.size());
  if (c.weights.defined()) {
    for (const auto& [i, j] : entries) out.push_back(weight(l, h, i, j));
    return out;
  }
  const Tensor w =
      qkv::weights_at(c.q, c.k, {c.saved_max, c.saved_sum}, options_of(c), 0, h, entries);
  return {w.data<double>(), w.data<double>() + w.numel()};
}

double Block::score(int64_t l, int64_t h, int64_t i, int64_t j) const {
  const AttentionCapture& c = layer_of(*this, l);
  if (c.scores.defined()) return c.scores.value((h * c.scores.dim(2) + i) * c.scores.dim(3) + j);
  const int64_t n = c.q.dim(2), m = c.k.dim(2), d = c.q.dim(3);
  const float* q = c.q.data<float>() + (h * n + i) * d;
  const float* k = c.k.data<float>() + (h * m + j) * d;  // k holds one copy a query head
  double s = 0;
  for (int64_t t = 0; t < d; ++t) s += static_cast<double>(q[t]) * k[t];
  return s;
}

bool Block::masked(int64_t l, int64_t h, int64_t i, int64_t j) const {
  const AttentionCapture& c = layer_of(*this, l);
  if (c.logits.defined()) {
    const double x = c.logits.value((h * c.logits.dim(2) + i) * c.logits.dim(3) + j);
    return std::isinf(x) && x < 0;
  }
  if (!rows()) return false;  // nothing says: the view shows every key
  const int64_t n = c.q.dim(2), m = c.k.dim(2);
  if (c.mask.defined()) {  // a sliding window's keep-mask, [1 or B, 1 or H, n, m]
    const int64_t at_h = c.mask.dim(1) == 1 ? 0 : h;
    if (!c.mask.value((at_h * c.mask.dim(2) + i) * c.mask.dim(3) + j)) return true;
  }
  return (c.causal == Causal::top_left && j > i) ||
         (c.causal == Causal::bottom_right && j > i + m - n);
}

bool keeps_rows(const Model& model, const Input& input) {
  return !input.every_weight && model.kind() == ModelKind::causal_lm &&
         static_cast<int64_t>(model.causal_lm().tokenize(input.text).size()) > kRowsAbove;
}

int64_t run_rows_bytes(const CausalLM& model, int64_t tokens) {
  return model.capture_rows_bytes(tokens);
}

}  // namespace qkv::explain
