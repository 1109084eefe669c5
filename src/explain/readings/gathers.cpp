// What each of a Perceiver's latents gathers: its cross-attention weights on one input, per head
// and latent — how much lands on the counted symbol, how spread it is, where it looks most.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "qkv/explain_readings.h"

namespace qkv::explain {

Gathers gathers(const Run& run, int64_t top) {
  const auto latent = std::find_if(run.blocks.begin(), run.blocks.end(),
                                   [](const Block& b) { return b.kind == BlockKind::latent; });
  if (latent == run.blocks.end() || latent->layers.empty())
    throw Error("the run has no latent block; expected a Perceiver's");
  const Tensor w = latent->layers.front().weights.to(DType::f64).contiguous();  // [1, H, N, L]
  const std::string& input = run.text;
  Gathers g{.count = std::count(input.begin(), input.end(), run.counted),
            .heads = w.dim(1),
            .latents = w.dim(2),
            .length = w.dim(3)};
  g.uniform_share = static_cast<double>(g.count) / static_cast<double>(g.length);
  const double* weights = w.data<double>();
  for (int64_t n = 0; n < g.latents; ++n) {
    LatentGather lg;
    std::vector<double> mean(static_cast<std::size_t>(g.length), 0.0);
    for (int64_t h = 0; h < g.heads; ++h) {
      const double* row = weights + (h * g.latents + n) * g.length;
      double share = 0;
      for (int64_t l = 0; l < g.length; ++l) {
        if (input[static_cast<std::size_t>(l)] == run.counted) share += row[l];
        mean[static_cast<std::size_t>(l)] += row[l] / static_cast<double>(g.heads);
      }
      lg.counted_share.push_back(share);
      lg.counted_mean += share / static_cast<double>(g.heads);
    }
    if (g.count > 0) lg.times_uniform = lg.counted_mean / g.uniform_share;
    double entropy = 0;
    for (double p : mean)
      if (p > 0) entropy -= p * std::log(p);
    lg.effective_positions = std::exp(entropy);
    std::vector<int64_t> order(static_cast<std::size_t>(g.length));
    std::iota(order.begin(), order.end(), 0);
    const int64_t k = std::min(top, g.length);
    const auto at = [&](int64_t l) { return mean[static_cast<std::size_t>(l)]; };
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
      return at(a) > at(b) || (at(a) == at(b) && a < b);
    });
    for (int64_t i = 0; i < k; ++i)
      lg.top.emplace_back(order[static_cast<std::size_t>(i)],
                          at(order[static_cast<std::size_t>(i)]));
    g.gathered.push_back(std::move(lg));
  }
  return g;
}

}  // namespace qkv::explain
