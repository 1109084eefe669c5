// A decoder's heads by what they do: attention sinks, previous-token heads and induction heads.
#include <algorithm>

#include "qkv/explain_readings.h"

namespace qkv::explain {

Tensor induction_scores(const std::vector<AttentionCapture>& repeat, int64_t t) {
  const auto layers = static_cast<int64_t>(repeat.size());
  const int64_t heads = layers > 0 ? repeat.front().weights.dim(1) : 0;
  Tensor out({layers, heads}, DType::f64);
  if (t < 2) return out;
  for (int64_t l = 0; l < layers; ++l) {
    const Tensor& w = repeat[static_cast<std::size_t>(l)].weights;  // [1, H, 2T, 2T]
    for (int64_t h = 0; h < heads; ++h) {
      double sum = 0;
      for (int64_t i = 1; i < t; ++i) sum += w.value((h * 2 * t + t + i - 1) * 2 * t + i);
      out.at<double>(l, h) = sum / static_cast<double>(t - 1);
    }
  }
  return out;
}

HeadRoles head_roles(const Run& run) {
  HeadRoles r;
  const int64_t n = run.size(), layers = run.model.layers, heads = run.model.heads;
  for (int64_t l = 0; l < layers && run.induction.defined(); ++l)
    for (int64_t h = 0; h < heads; ++h)
      if (run.induction.at<double>(l, h) > 0.3)
        r.induction.emplace_back(run.induction.at<double>(l, h), l, h);
  // Each query's weight on token 0 and on the token before it: two weights a row, read one by one
  // (a long text's recomputed from its rows, never a row of every key).
  std::vector<std::pair<int64_t, int64_t>> entries;
  for (int64_t i = 1; i < n; ++i) entries.emplace_back(i, 0), entries.emplace_back(i, i - 1);
  for (int64_t l = 0; l < layers && n > 1; ++l)
    for (int64_t h = 0; h < heads; ++h) {
      const std::vector<double> w = run.blocks.front().weights_at(l, h, entries);
      double first = 0, before = 0;
      for (std::size_t e = 0; e < w.size(); e += 2) first += w[e], before += w[e + 1];
      first /= static_cast<double>(n - 1), before /= static_cast<double>(n - 1);
      if (first > 0.5) r.sinks.emplace_back(first, l, h);
      if (before > 0.5) r.previous.emplace_back(before, l, h);
    }
  for (auto* list : {&r.sinks, &r.previous, &r.induction}) std::sort(list->rbegin(), list->rend());
  return r;
}

}  // namespace qkv::explain
