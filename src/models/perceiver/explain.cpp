// What each latent gathers: the cross-attention weights of one input, per head and latent.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "qkv/perceiver.h"

namespace qkv {

PerceiverExplanation explain_perceiver(Perceiver& model, const PerceiverTask& task,
                                       const std::string& input, int64_t top) {
  PerceiverExplanation e;
  e.input = input;
  e.counted = task.counted();
  e.count = std::count(input.begin(), input.end(), task.counted());
  const Tensor logits = model.forward({task.encode(input)}, true).to(DType::f64);
  const int64_t classes = logits.dim(1);
  // softmax of the one row, for the probabilities the terminal shows
  const double* z = logits.data<double>();
  const double m = *std::max_element(z, z + classes);
  double sum = 0;
  for (int64_t c = 0; c < classes; ++c) sum += std::exp(z[c] - m);
  for (int64_t c = 0; c < classes; ++c) e.probabilities.push_back(std::exp(z[c] - m) / sum);
  e.predicted = static_cast<int32_t>(std::max_element(z, z + classes) - z);

  const Tensor w = model.cross_weights().to(DType::f64);  // [1, H, N, L]
  e.heads = w.dim(1);
  e.latents = w.dim(2);
  e.length = w.dim(3);
  e.uniform_share = static_cast<double>(e.count) / static_cast<double>(e.length);
  e.weights.assign(w.data<double>(), w.data<double>() + w.numel());
  for (int64_t n = 0; n < e.latents; ++n) {
    LatentGather g;
    std::vector<double> mean(static_cast<std::size_t>(e.length), 0.0);
    for (int64_t h = 0; h < e.heads; ++h) {
      const double* row = e.weights.data() + (h * e.latents + n) * e.length;
      double share = 0;
      for (int64_t l = 0; l < e.length; ++l) {
        if (input[static_cast<std::size_t>(l)] == e.counted) share += row[l];
        mean[static_cast<std::size_t>(l)] += row[l] / static_cast<double>(e.heads);
      }
      g.counted_share.push_back(share);
      g.counted_mean += share / static_cast<double>(e.heads);
    }
    if (e.count > 0) g.times_uniform = g.counted_mean / e.uniform_share;
    double entropy = 0;
    for (double p : mean)
      if (p > 0) entropy -= p * std::log(p);
    g.effective_positions = std::exp(entropy);
    std::vector<int64_t> order(static_cast<std::size_t>(e.length));
    std::iota(order.begin(), order.end(), 0);
    const int64_t k = std::min(top, e.length);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
      return mean[static_cast<std::size_t>(a)] > mean[static_cast<std::size_t>(b)] ||
             (mean[static_cast<std::size_t>(a)] == mean[static_cast<std::size_t>(b)] && a < b);
    });
    for (int64_t i = 0; i < k; ++i)
      g.top.emplace_back(order[static_cast<std::size_t>(i)],
                         mean[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])]);
    e.gathers.push_back(std::move(g));
  }
  return e;
}

}  // namespace qkv
