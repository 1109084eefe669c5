// What explaining needs in memory beyond the model's capture: the views that hold every number
// (explain::run_bytes with --json, and a Perceiver's page). Measured on qkv explain --json:
// SmolLM2 on 400 tokens (157 million numbers) peaked at 12.2 GB beside a 1.8 GB capture, 66
// bytes a number; all-MiniLM-L6-v2 on 202 tokens, 48 bytes a number.
#include "qkv/memory.h"

#include "models/bert/bert.h"
#include "models/llama/llama.h"
#include "qkv/explain.h"

namespace qkv::explain {
namespace {

constexpr double kJsonNumberBytes = 80;  // a number in nlohmann's tree (16) and in its text (~22)

// The numbers json_of writes for a run of n tokens: per layer q, k, v and the heads' outputs
// (n·d a head), scores, logits and weights (n² a head), the layer's hidden state (n·hidden), the
// value norms (n a head) and, within kMixingMaxTokens, the mixing and two rollouts (3·n²).
double json_numbers(int64_t layers, int64_t heads, int64_t head_dim, int64_t hidden, int64_t n) {
  const double t = static_cast<double>(n), h = static_cast<double>(heads);
  const double values = h * t + (n <= kMixingMaxTokens ? 3 * t * t : 0.0);
  return static_cast<double>(layers) * (4 * h * t * static_cast<double>(head_dim) + 3 * h * t * t +
                                        t * static_cast<double>(hidden) + values);
}

// What capture keeps beside the model's capture for the values (explain/run/values.cpp): the
// value norms (n a head and layer) and, within kMixingMaxTokens, the stream (n·hidden a layer,
// float32) and the mixing Grams (n·(H + 1)² a layer), float64.
double values_bytes(int64_t layers, int64_t heads, int64_t hidden, int64_t n) {
  const double t = static_cast<double>(n), l = static_cast<double>(layers);
  const double k = static_cast<double>(heads + 1);
  return 8 * l * static_cast<double>(heads) * t +
         (n <= kMixingMaxTokens ? 4 * (l + 1) * t * static_cast<double>(hidden) + 8 * l * t * k * k
                                : 0.0);
}

}  // namespace

int64_t run_bytes(const SentenceModel& model, int64_t tokens, bool json) {
  const BertConfig& c = model.config();
  const double view = json ? kJsonNumberBytes * json_numbers(c.num_layers, c.num_heads,
                                                             c.head_dim(), c.hidden_size, tokens)
                           : 0.0;
  return saturated_bytes(static_cast<double>(model.capture_bytes(tokens)) + view +
                         values_bytes(c.num_layers, c.num_heads, c.hidden_size, tokens));
}

int64_t run_bytes(const CausalLM& model, int64_t tokens, bool json) {
  const LlamaConfig& c = model.config();
  // The decoder keeps its stream within kMixingMaxTokens; its k and v are repeated to every
  // query head.
  const int64_t hidden = tokens <= kMixingMaxTokens ? c.hidden : 0;
  const double view =
      json ? kJsonNumberBytes * json_numbers(c.layers, c.heads, c.head_dim, hidden, tokens) : 0.0;
  return saturated_bytes(static_cast<double>(model.capture_bytes(tokens)) + view +
                         values_bytes(c.layers, c.heads, c.hidden, tokens));
}

int64_t run_bytes(const PerceiverConfig& c, bool html) {
  // With the page (the report, explain/report/html.cpp), a weight is a double in the report's
  // copy of the block (8), a float32 and its base64 (4 + 5.3) in the JSON tree, and that text
  // three times more — the dump, its script-safe copy, the page (16); a position is a token in
  // the report's copy and in the JSON tree (~200 bytes).
  const double weights = static_cast<double>(c.heads * c.latents) * static_cast<double>(c.length);
  return saturated_bytes(static_cast<double>(perceiver_explain_bytes(c)) +
                         (html ? 34 * weights + 200 * static_cast<double>(c.length) : 0.0));
}

}  // namespace qkv::explain
