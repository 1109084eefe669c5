// explain_generation: generation, explained (qkv/explain_generation.h) — each token generate
// chooses, the heads that carried it by direct logit attribution, where they looked, and the KV
// cache after the pass that chose it.
#include <algorithm>
#include <numeric>

#include "qkv/explain_generation.h"
#include "qkv/explain_lens.h"

namespace qkv::explain {
namespace {

// The last query's `top` largest weights of head h in one captured layer ([1, H, n, n]).
std::vector<KeyWeight> looked_at(const AttentionCapture& layer, int64_t h, int64_t top) {
  const Tensor& w = layer.weights;
  const int64_t n = w.dim(3), last = w.dim(2) - 1;
  std::vector<KeyWeight> keys;
  for (int64_t j = 0; j < n; ++j)
    keys.push_back({.position = j, .weight = w.value(((h * w.dim(2)) + last) * n + j)});
  const auto kept = static_cast<std::ptrdiff_t>(std::min(top, n));
  std::partial_sort(
      keys.begin(), keys.begin() + kept, keys.end(), [](const KeyWeight& a, const KeyWeight& b) {
        return a.weight > b.weight || (a.weight == b.weight && a.position < b.position);
      });
  keys.resize(static_cast<std::size_t>(kept));
  return keys;
}

// The heads of `a` with the largest attributions, largest first.
std::vector<CarryingHead> carrying(const Attribution& a, const KvLayout& cache,
                                   const std::vector<AttentionCapture>& layers,
                                   const GenerationRequest& request) {
  std::vector<int64_t> order(a.heads.size());
  std::iota(order.begin(), order.end(), 0);
  const auto kept = static_cast<std::ptrdiff_t>(
      std::min<int64_t>(request.top_heads, static_cast<int64_t>(order.size())));
  std::partial_sort(order.begin(), order.begin() + kept, order.end(), [&](int64_t x, int64_t y) {
    return a.heads[static_cast<std::size_t>(x)] > a.heads[static_cast<std::size_t>(y)];
  });
  std::vector<CarryingHead> heads;
  for (std::ptrdiff_t i = 0; i < kept; ++i) {
    const int64_t index = order[static_cast<std::size_t>(i)], l = index / cache.heads,
                  h = index % cache.heads;
    heads.push_back(
        {.layer = l,
         .head = h,
         .kv_head = cache.kv_head(h),
         .attribution = a.heads[static_cast<std::size_t>(index)],
         .looked = looked_at(layers[static_cast<std::size_t>(l)], h, request.top_keys)});
  }
  return heads;
}

// Step `step`'s token `id`, chosen after `prefix`, explained.
GenerationStep explain_step(const CausalLM& model, const std::shared_ptr<const ResidualModel>& lm,
                            const std::vector<int32_t>& prefix, int64_t prompt_tokens, int64_t step,
                            int32_t id, const KvLayout& cache, const GenerationRequest& request) {
  const Lens lens(lm, prefix);
  const Target target{.id = id};
  const Measure measure = lens.measure(target);
  const Attribution a = direct_logit_attribution(lens, target);
  std::vector<AttentionCapture> layers;
  model.capture(prefix, layers);
  GenerationStep s{.step = step, .id = id, .text = model.token_text(id)};
  s.positions = static_cast<int64_t>(prefix.size());
  s.queries = step == 0 ? prompt_tokens : 1;
  s.cache_bytes = s.positions * cache.bytes_per_position();
  s.logit = measure.logit;
  s.log_prob = measure.log_prob;
  s.embedding = a.embedding;
  s.attention = std::accumulate(a.attention.begin(), a.attention.end(), 0.0);
  s.mlp = std::accumulate(a.mlp.begin(), a.mlp.end(), 0.0);
  s.total = a.total;
  s.heads = carrying(a, cache, layers, request);
  return s;
}

}  // namespace

KvLayout kv_layout(const LlamaConfig& c) {
  return {.layers = c.layers, .heads = c.heads, .kv_heads = c.kv_heads, .head_dim = c.head_dim};
}

ExplainedGeneration explain_generation(const CausalLM& model, const std::vector<int32_t>& prompt,
                                       const GenerationRequest& request, const OnStep& on_step) {
  if (request.top_heads < 1 || request.top_keys < 1)
    throw Error("explain_generation: top_heads " + std::to_string(request.top_heads) +
                    " and top_keys " + std::to_string(request.top_keys) + "; expected each ≥ 1",
                Error::Kind::invalid_argument);
  const std::shared_ptr<const ResidualModel> lm = model.residual();
  ExplainedGeneration g;
  g.cache = kv_layout(model.config());
  g.prompt_tokens = static_cast<int64_t>(prompt.size());
  g.ids = prompt;
  for (const int32_t id : prompt) g.tokens.push_back(model.token_text(id));
  // float32 products: the tokens explained are those the explanation's own passes choose (int8's
  // decode could pick the runner-up of a near tie, whose logit the explanation would not top).
  GenerateOptions options = request.generate;
  options.product = DecodeProduct::float32;
  model.generate(prompt, options, [&](int32_t id) {
    g.steps.push_back(explain_step(model, lm, g.ids, g.prompt_tokens,
                                   static_cast<int64_t>(g.steps.size()), id, g.cache, request));
    g.ids.push_back(id);
    g.tokens.push_back(g.steps.back().text);
    if (on_step) on_step(g, g.steps.back());
  });
  return g;
}

}  // namespace qkv::explain
