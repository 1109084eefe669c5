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
  const int64_t total = layers * heads * (n + 1) + layers * n;
  int64_t done = 0;
  const auto step = [&] {
    if (progress) progress(++done, total);
  };
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t at = -1; at < n; ++at) {  // −1: every position
        const float* from = clean.heads(l).data<float>() + h * n * d;
        const LayerHooks hooks{.heads = [&](int64_t layer, Tensor& o) {
          if (layer != l) return;
          float* to = o.data<float>() + h * n * d;
          for (int64_t i = at < 0 ? 0 : at; i < (at < 0 ? n : at + 1); ++i)
            std::copy_n(from + i * d, d, to + i * d);
        }};
        const double share = restored(corrupted.rerun(l, hooks));
        if (at < 0)
          p.heads.data<double>()[l * heads + h] = share;
        else
          p.positions.data<double>()[(l * heads + h) * n + at] = share;
        step();
      }
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t at = 0; at < n; ++at) {
      // The stream entering layer l, position `at`, taken from the clean run.
      const LayerHooks none;
      Tensor h = corrupted.stream(l).clone();
      std::copy_n(clean.stream(l).data<float>() + at * hidden, hidden,
                  h.data<float>() + at * hidden);
      for (int64_t k = l; k < layers; ++k) m.layer(k, h, none);
      const Tensor last = h.narrow(0, n - 1, 1).clone();
      p.stream.data<double>()[l * n + at] =
          restored(m.unembed(m.final_norm(last)).reshape({m.vocab()}));
      step();
    }
  return p;
}

}  // namespace qkv::explain
