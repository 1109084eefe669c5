#include "explain/report/json.h"

#include <cmath>

namespace qkv::explain {
namespace {

nlohmann::json number_json(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

nlohmann::json nested(const Tensor& t, int dim, int64_t& pos) {
  if (dim == t.rank()) return number_json(t.value(pos++));
  nlohmann::json a = nlohmann::json::array();
  for (int64_t i = 0; i < t.dim(dim); ++i) a.push_back(nested(t, dim + 1, pos));
  return a;
}

// Drops the leading batch dimension of one.
Tensor unbatch(const Tensor& t) {
  Shape shape(t.shape().begin() + 1, t.shape().end());
  return t.contiguous().reshape(shape);
}

}  // namespace

nlohmann::json tensor_json(const Tensor& t) {
  const Tensor c = t.contiguous();
  int64_t pos = 0;
  return nested(c, 0, pos);
}

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
    const BertLayerCapture& c = e.capture.layers[static_cast<std::size_t>(l)];
    layers.push_back({{"layer", l},
                      {"q", tensor_json(unbatch(c.q))},
                      {"k", tensor_json(unbatch(c.k))},
                      {"v", tensor_json(unbatch(c.v))},
                      {"scores", tensor_json(unbatch(c.scores))},
                      {"logits", tensor_json(unbatch(c.logits))},
                      {"weights", tensor_json(unbatch(c.weights))},
                      {"head_out", tensor_json(unbatch(c.head_out))},
                      {"hidden", tensor_json(unbatch(c.hidden))}});
  }
  return {{"text", e.text},
          {"text_b", e.pair ? nlohmann::json(e.text_b) : nlohmann::json(nullptr)},
          {"truncated", e.truncated},
          {"model", {{"layers", e.layers}, {"heads", e.heads}, {"head_dim", e.head_dim}}},
          {"scale", e.scale},
          {"tokens", tokens},
          {"focus", focus},
          {"embedding", tensor_json(unbatch(e.embedding))},
          {"embeddings_layer_norm", tensor_json(unbatch(e.capture.embeddings))},
          {"layers", layers}};
}

}  // namespace qkv::explain
