// Activation patching (qkv/explain_lens.h): a head's output, or the stream entering a layer, at
// one position copied from the clean run into the corrupted one.
#include <cmath>

#include "qkv/explain_lens.h"

namespace qkv::explain {

Patching patch(const Lens& clean, const Lens& corrupted, const Target& target,
               const OnProgress& progress) {
  const ResidualModel& m = corrupted.model();
  const int64_t n = corrupted.size(), layers = m.layers(), heads = m.heads(), d = m.head_dim(),
                hidden = m.hidden();
  if (clean.size() != n)
    throw Error("the clean prompt has " + std::to_string(clean.size()) +
                    " tokens and the corrupted one " + std::to_string(n) +
                    "; patching needs prompts of equal token length",
                Error::Kind::invalid_argument);
  Patching p{.clean = clean.measure(target), .corrupted = corrupted.measure(target)};
  const double gap = p.clean.metric - p.corrupted.metric;
  if (!(std::abs(gap) > 1e-6))
    throw Error("the clean and corrupted prompts give the target the same metric (" +
                    std::to_string(p.clean.metric) +
                    "); patching measures how much of their difference a part restores",
                Error::Kind::invalid_argument);
  const auto restored = [&](const Tensor& logits) {
    return (corrupted.measure(logits, target).metric - p.corrupted.metric) / gap;
  };
  p.heads = Tensor({layers, heads}, DType::f64);
  p.positions = Tensor({layers, heads, n}, DType::f64);
  p.stream = Tensor({layers, n}, DType::f64);
  // Per layer, its jobs in batched reruns from it: (head h, position at) copies a head's output
  // (at −1: every position); (−1, at) copies the stream entering the layer at one position.
  std::vector<std::pair<int64_t, int64_t>> jobs;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t at = -1; at < n; ++at) jobs.push_back({h, at});
  for (int64_t at = 0; at < n; ++at) jobs.push_back({-1, at});
  const auto jobs_count = static_cast<int64_t>(jobs.size());
  const int64_t total = layers * jobs_count;
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t begin = 0; begin < jobs_count; begin += corrupted.copies_per_rerun()) {
      const int64_t copies = std::min(corrupted.copies_per_rerun(), jobs_count - begin);
      const auto job = [&](int64_t b) { return jobs[static_cast<std::size_t>(begin + b)]; };
      const LayerHooks hooks{.heads = [&](int64_t layer, Tensor& o) {
        if (layer != l) return;
        for (int64_t b = 0; b < copies; ++b) {
          const auto [h, at] = job(b);
          if (h < 0) continue;
          const float* from = clean.heads(l).data<float>() + h * n * d;
          float* to = o.data<float>() + (b * heads + h) * n * d;
          for (int64_t i = at < 0 ? 0 : at; i < (at < 0 ? n : at + 1); ++i)
            std::copy_n(from + i * d, d, to + i * d);
        }
      }};
      const Tensor logits = corrupted.rerun(l, copies, hooks, [&](int64_t b, Tensor& stream) {
        const auto [h, at] = job(b);
        if (h < 0)
          std::copy_n(clean.stream(l).data<float>() + at * hidden, hidden,
                      stream.data<float>() + at * hidden);
      });
      for (int64_t b = 0; b < copies; ++b) {
        const auto [h, at] = job(b);
        const double share = restored(logits.narrow(0, b, 1).reshape({m.vocab()}));
        if (h < 0)
          p.stream.data<double>()[l * n + at] = share;
        else if (at < 0)
          p.heads.data<double>()[l * heads + h] = share;
        else
          p.positions.data<double>()[(l * heads + h) * n + at] = share;
      }
      if (progress) progress(l * jobs_count + begin + copies, total);
    }
  return p;
}

}  // namespace qkv::explain
