#include "qkv/json.h"

#include <cmath>

#include "qkv/explain.h"

namespace qkv::explain {

nlohmann::json to_json(const Explained& e, int64_t focus, int64_t layer) {
  nlohmann::json tokens = nlohmann::json::array();
  for (int64_t i = 0; i < e.size(); ++i) {
    const TokenInfo& t = e.tokens[static_cast<std::size_t>(i)];
    tokens.push_back({{"index", i},
                      {"id", t.id},
                      {"text", t.text},
                      {"surface", t.surface},
                      {"word", t.word},
                      {"special", t.special},
                      {"segment", t.segment}});
  }
  nlohmann::json layers = nlohmann::json::array();
  for (int64_t l = 0; l < e.layers; ++l) {
    if (layer >= 0 && l != layer) continue;
    const AttentionCapture& c = e.capture.layers[static_cast<std::size_t>(l)];
    const Tensor& hidden = e.capture.hidden[static_cast<std::size_t>(l)];
    layers.push_back({{"layer", l},
                      {"q", tensor_json(unbatch(c.q))},
                      {"k", tensor_json(unbatch(c.k))},
                      {"v", tensor_json(unbatch(c.v))},
                      {"scores", tensor_json(unbatch(c.scores))},
                      {"logits", tensor_json(unbatch(c.logits))},
                      {"weights", tensor_json(unbatch(c.weights))},
                      {"head_out", tensor_json(unbatch(c.head_out))},
                      {"hidden", tensor_json(unbatch(hidden))}});
  }
  nlohmann::json next = nlohmann::json::array();
  for (const auto& [token, p] : e.next_tokens) next.push_back({{"token", token}, {"p", p}});
  nlohmann::json j = {
      {"text", e.text},
      {"text_b", e.pair ? nlohmann::json(e.text_b) : nlohmann::json(nullptr)},
      {"truncated", e.truncated},
      {"model", {{"layers", e.layers}, {"heads", e.heads}, {"head_dim", e.head_dim}}},
      {"scale", e.scale},
      {"tokens", tokens},
      {"focus", focus},
      {"embedding", tensor_json(unbatch(e.embedding))},
      {"embeddings_layer_norm", tensor_json(unbatch(e.capture.embeddings))},
      {"layers", layers}};
  if (e.causal) {  // a decoder: its grouped heads and its next-token prediction
    j["model"]["kv_heads"] = e.kv_heads;
    j["causal"] = true;
    j["next_tokens"] = next;
    j["induction"] = tensor_json(e.induction);
  }
  return j;
}

nlohmann::json to_json(const AttentionCall& c, const AttentionResult& r) {
  nlohmann::json j;
  if (!c.caption.empty()) j["caption"] = c.caption;
  j["score"] = to_string(c.options.score);
  j["scale"] = effective_scale(c);
  j["normalize"] = to_string(c.options.normalize);
  j["causal"] = to_string(c.options.causal);
  j["shapes"] = {{"query", c.q.shape()},
                 {"keys", c.k.shape()},
                 {"values", c.v.shape()},
                 {"out", r.out.shape()}};
  if (!c.query_labels.empty()) j["query_labels"] = c.query_labels;
  if (!c.key_labels.empty()) j["key_labels"] = c.key_labels;
  if (!c.value_columns.empty()) j["value_columns"] = c.value_columns;
  j["query"] = tensor_json(c.q);
  j["keys"] = tensor_json(c.k);
  j["values"] = tensor_json(c.v);
  j["scores"] = tensor_json(r.scores);
  j["logits"] = tensor_json(r.logits);
  j["weights"] = tensor_json(r.weights);
  j["logsumexp"] = tensor_json(r.logsumexp);
  j["out"] = tensor_json(r.out);
  return j;
}

}  // namespace qkv::explain
