#include "explain/report.h"

namespace qkv::explain {
namespace {

// [1, H, n, m] → [H, n, m]
Tensor unbatch(const Tensor& t) {
  Shape shape(t.shape().begin() + 1, t.shape().end());
  return t.contiguous().reshape(shape);
}

}  // namespace

Report report_of(const Explained& e, int64_t focus, const std::string& title) {
  ReportBlock block{
      .name = "self-attention",
      .note = "every token asks (query) and every token answers (key, value)",
      .score = "scaled_dot",
      .scale = e.scale,
  };
  for (const TokenInfo& t : e.tokens)
    block.queries.push_back({.text = t.text, .special = t.special, .punctuation = t.punctuation});
  block.keys = block.queries;
  for (const BertLayerCapture& c : e.capture.layers)
    block.layers.push_back(
        {.q = unbatch(c.q), .k = unbatch(c.k), .v = unbatch(c.v), .weights = unbatch(c.weights)});
  Report r{.title = title, .focus = focus};
  r.texts.emplace_back(e.truncated ? "text (truncated: the model read its first " +
                                         std::to_string(e.size()) + " tokens)"
                                   : "text",
                       e.text);
  r.blocks.push_back(std::move(block));
  return r;
}

}  // namespace qkv::explain
