// qkv/explain_generation.h — generation, explained. A decoder continues a prompt token by token
// (CausalLM::generate itself, with its KV cache: the tokens are exactly plain generation's), and
// each token is explained as it comes:
//
//   the heads that carried it  direct logit attribution (qkv/explain_lens.h) of the token just
//                              chosen, at the last position of a Lens over the prompt and the
//                              tokens before it: each head's W_O^h·o_h through the final norm
//                              (its scale frozen) on the token's unembedding row. With the
//                              embedding's and the MLPs' parts it sums to the token's logit.
//   where they looked          the last query's largest attention weights over the keys
//                              (CausalLM::capture of the same ids)
//   the KV cache               what generation's cache holds once the pass that chose the token
//                              ran: K and V of every position so far, per layer and kv head. That
//                              pass computed queries for its new positions only — the whole prompt
//                              at step 0, one token after — and keeps none: Q is never reused,
//                              while every later query reads all the cached K and V.
//
// Grouped-query attention: query head h reads kv head h / (heads / kv_heads) (SmolLM2-135M: 9
// query heads share 3 kv heads, 3 each), so the cache holds kv_heads heads, not heads.
//
// Cost: besides generation's own one-position step, each step runs two passes over its whole
// prefix (the Lens and the capture, n positions: O(n²) attention a head), so a step costs about as
// much as a prompt that long; 64 tokens are fine, thousands are not.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qkv/causal_lm.h"
#include "qkv/json.h"

namespace qkv::explain {

// The cache's shape, from the model's config.
struct KvLayout {
  int64_t layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t group() const { return heads / kv_heads; }  // query heads a kv head serves
  int64_t kv_head(int64_t head) const { return head / group(); }
  // K and V of one position in every layer and kv head, float32:
  // layers × kv_heads × head_dim × 2 × 4.
  int64_t bytes_per_position() const { return layers * kv_heads * head_dim * 2 * 4; }
};
KvLayout kv_layout(const LlamaConfig& config);

struct KeyWeight {
  int64_t position = 0;  // the key's position (0: the prompt's first token)
  double weight = 0;     // the last query's attention weight on it
};

struct CarryingHead {
  int64_t layer = 0, head = 0, kv_head = 0;
  double attribution = 0;         // its direct part of the token's logit
  std::vector<KeyWeight> looked;  // the last query's largest weights, largest first
};

struct GenerationStep {
  int64_t step = 0;  // 0 for the first generated token
  int32_t id = 0;
  std::string text;  // the token's bytes (CausalLM::token_text)
  // The prefix the token was chosen after (the prompt and the tokens before it): the positions
  // whose K and V the cache holds, per layer and kv head, once this step's pass ran.
  int64_t positions = 0;
  // Queries that pass computed per layer and head, and the K and V it appended per layer and kv
  // head: the prompt's length at step 0, then 1.
  int64_t queries = 0;
  int64_t cache_bytes = 0;         // positions × KvLayout::bytes_per_position()
  double logit = 0, log_prob = 0;  // the token's, at the Lens's last position
  // Its direct logit attribution in parts: they sum to `total`, the logit up to rounding.
  double embedding = 0, attention = 0, mlp = 0, total = 0;
  std::vector<CarryingHead> heads;  // the largest attributions, largest first
};

struct ExplainedGeneration {
  KvLayout cache;
  int64_t prompt_tokens = 0;
  // Every position's token: the prompt's, then the generated ones (the keys heads looked at).
  std::vector<int32_t> ids;
  std::vector<std::string> tokens;  // their texts
  std::vector<GenerationStep> steps;
};

struct GenerationRequest {
  GenerateOptions generate;  // as CausalLM::generate takes it, but its product always float32
  int64_t top_heads = 3;     // heads kept a step, 1 … heads·layers
  int64_t top_keys = 3;      // keys kept a head, 1 … (any: clipped to the positions)
};

// Runs model.generate(prompt, request.generate) and explains each token as it comes; `on_step`
// is called with the generation so far (its last step the new one) before the next token is
// computed. Needs the model's weights loaded. A top_heads or top_keys below 1 is a qkv::Error
// (Kind::invalid_argument); the rest as generate's.
using OnStep = std::function<void(const ExplainedGeneration&, const GenerationStep&)>;
ExplainedGeneration explain_generation(const CausalLM& model, const std::vector<int32_t>& prompt,
                                       const GenerationRequest& request,
                                       const OnStep& on_step = {});

// ---- views: text at 80 columns (streamed: the header, then each step as it comes), and JSON ----
// The cache's layout and the grouped-query sharing, before the first step.
std::string generation_header_text(const ExplainedGeneration& g);
// One step: the token, its logit and parts, the cache after its pass, its heads and their keys.
std::string generation_step_text(const ExplainedGeneration& g, const GenerationStep& step);
// The end: the text generated, and the cache's final size.
std::string generation_footer_text(const ExplainedGeneration& g);

// {"cache": {layers, heads, kv_heads, head_dim, group, bytes_per_position,
//            "sharing": [{kv_head, heads: [h…]}]},
//  "prompt_tokens", "tokens": [{id, text}],
//  "steps": [{step, id, text, positions, queries, cache_bytes, logit, log_prob,
//             "attribution": {embedding, attention, mlp, total},
//             "heads": [{layer, head, kv_head, attribution,
//                        "looked": [{position, text, weight}]}]}]}
nlohmann::json generation_json(const ExplainedGeneration& g);

}  // namespace qkv::explain
