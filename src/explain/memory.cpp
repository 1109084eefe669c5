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
// (n·d a head), scores, logits and weights (n² a head), the layer's hidden state (n·hidden).
double json_numbers(int64_t layers, int64_t heads, int64_t head_dim, int64_t hidden, int64_t n) {
  const double t = static_cast<double>(n), h = static_cast<double>(heads);
  return static_cast<double>(layers) * (4 * h * t * static_cast<double>(head_dim) + 3 * h * t * t +
                                        t * static_cast<double>(hidden));
}

}  // namespace

int64_t run_bytes(const SentenceModel& model, int64_t tokens, bool json) {
  const BertConfig& c = model.config();
  const double view = json ? kJsonNumberBytes * json_numbers(c.num_layers, c.num_heads,
                                                             c.head_dim(), c.hidden_size, tokens)
                           : 0.0;
  return saturated_bytes(static_cast<double>(model.capture_bytes(tokens)) + view);
}

int64_t run_bytes(const CausalLM& model, int64_t tokens, bool json) {
  const LlamaConfig& c = model.config();
  // The decoder keeps no hidden states; its k and v are repeated to every query head.
  const double view =
      json ? kJsonNumberBytes * json_numbers(c.layers, c.heads, c.head_dim, 0, tokens) : 0.0;
  return saturated_bytes(static_cast<double>(model.capture_bytes(tokens)) + view);
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
