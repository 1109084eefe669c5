// An encoder-decoder's alignment (the cross-attention of one decoder layer) and how sharp each
// head's is.
#include <algorithm>
#include <cmath>

#include "qkv/explain_readings.h"

namespace qkv::explain {

Tensor alignment(const Run& run, int64_t layer) {
  const auto cross = std::find_if(run.blocks.begin(), run.blocks.end(), [](const Block& b) {
    return b.kind == BlockKind::cross_attention;
  });
  if (cross == run.blocks.end() || layer < 0 || layer >= static_cast<int64_t>(cross->layers.size()))
    throw Error("the run has no cross-attention of layer " + std::to_string(layer));
  const Tensor w = cross->layers[static_cast<std::size_t>(layer)].weights.to(DType::f64);
  return w.contiguous().reshape({w.dim(1), w.dim(2), w.dim(3)});  // [1, H, T, S] → [H, T, S]
}

std::vector<double> head_entropy(const Tensor& a) {
  const int64_t heads = a.dim(0), steps = a.dim(1), n = a.dim(2);
  std::vector<double> entropy(static_cast<std::size_t>(heads), 0.0);
  for (int64_t k = 0; k < heads; ++k) {
    double& e = entropy[static_cast<std::size_t>(k)];
    for (int64_t t = 0; t < steps; ++t)
      for (int64_t j = 0; j < n; ++j) {
        const double w = a.value((k * steps + t) * n + j);
        if (w > 0) e -= w * std::log(w);
      }
    e /= static_cast<double>(std::max<int64_t>(steps, 1));
  }
  return entropy;
}

int64_t sharpest_head(const std::vector<double>& entropy) {
  return std::min_element(entropy.begin(), entropy.end()) - entropy.begin();
}

}  // namespace qkv::explain
