#include "qkv/json.h"

#include <cmath>

#include "explain/report/lens_json.h"
#include "explain/report/values_json.h"
#include "qkv/explain.h"

namespace qkv::explain {

namespace {

using nlohmann::json;

json numbers(const std::vector<double>& xs) {
  json a = json::array();
  for (const double x : xs) a.push_back(number_json(x));
  return a;
}

// {text, tokens: [{index, id, text, surface, word, special}], focus, model, embedding,
//  layers: [{q, k, v, scores, logits, weights, head_out, hidden} and what the values carried
//  (values_json.h)], values} — per layer tensors are
// [heads, tokens, ...] (the batch of one dropped); `layer` alone (≥ 0) keeps only that layer.
json sentence_json(const Run& e, int64_t focus, int64_t layer) {
  json tokens = json::array();
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
  json layers = json::array();
  const RunValues values = run_values(e);
  const std::vector<AttentionCapture>& captured = e.blocks.front().layers;
  for (int64_t l = 0; l < e.model.layers; ++l) {
    if (layer >= 0 && l != layer) continue;
    const AttentionCapture& c = captured[static_cast<std::size_t>(l)];
    const auto at = static_cast<std::size_t>(l);
    const Tensor hidden = at < e.hidden.size() ? e.hidden[at] : Tensor();
    layers.push_back({{"layer", l},
                      {"q", tensor_json(unbatch(c.q))},
                      {"k", tensor_json(unbatch(c.k))},
                      {"v", tensor_json(unbatch(c.v))},
                      {"scores", tensor_json(unbatch(c.scores))},
                      {"logits", tensor_json(unbatch(c.logits))},
                      {"weights", tensor_json(unbatch(c.weights))},
                      {"head_out", tensor_json(unbatch(c.head_out))},
                      {"hidden", tensor_json(unbatch(hidden))}});
    layers.back().update(values_json(e, values, l, layer >= 0));  // values_json.cpp
  }
  json j = {
      {"text", e.text},
      {"text_b", e.pair ? json(e.text_b) : json(nullptr)},
      {"truncated", e.truncated},
      {"model",
       {{"layers", e.model.layers}, {"heads", e.model.heads}, {"head_dim", e.model.head_dim}}},
      {"scale", number_json(e.model.scale)},
      {"tokens", tokens},
      {"focus", focus},
      {"embedding", tensor_json(unbatch(e.output.embedding))},
      {"embeddings_layer_norm", tensor_json(unbatch(e.embeddings))},
      {"layers", layers},
      {"values", values_header_json(e)}};
  if (e.causal()) {  // a decoder: its grouped heads and its next-token prediction
    json next = json::array();
    for (const auto& [token, p] : e.output.next_tokens)
      next.push_back({{"token", token}, {"p", number_json(p)}});
    j["model"]["kv_heads"] = e.model.kv_heads;
    j["model"]["architecture"] = e.model.family;
    if (!e.model.weights.empty()) j["model"]["weights"] = e.model.weights;
    if (!e.model.features.empty()) {
      j["model"]["attention_features"] = e.model.features;
      j["model"]["formulas"] = {{"q", e.model.query}, {"k", e.model.key}, {"v", e.model.value}};
    }
    j["causal"] = true;
    j["next_tokens"] = next;
    j["induction"] = tensor_json(e.induction);
  }
  add_lens_json(j, e);
  return j;
}

// A trained encoder-decoder: the alignment of one layer and head, every head's, their entropies.
json seq2seq_json(const Run& run, JsonOptions o) {
  if (o.layer < 0) o.layer = run.model.layers - 1;  // unset: the last layer, as the views open on
  const Tensor heads = alignment(run, o.layer);     // [H, steps, S]
  const int64_t steps = heads.dim(1), n = heads.dim(2);
  const auto rows = [&](int64_t h) {
    json m = json::array();
    for (int64_t t = 0; t < steps; ++t) {
      json r = json::array();
      for (int64_t j = 0; j < n; ++j) r.push_back(number_json(heads.at<double>(h, t, j)));
      m.push_back(std::move(r));
    }
    return m;
  };
  json per_head = json::array();
  for (int64_t h = 0; h < heads.dim(0); ++h) per_head.push_back(rows(h));
  json source = json::array();
  for (const char ch : run.text) source.push_back(std::string(1, ch));
  json j = {{"model", o.model_path},
            {"architecture", run.model.family},
            {"task", run.model.task},
            {"input", run.text},
            {"output", run.output.decoded},
            {"layer", o.layer},
            {"head", o.head},
            {"entropy", numbers(head_entropy(heads))},
            {"source", source},
            {"steps", run.output.steps},
            {"alignment", rows(o.head)},
            {"heads", per_head}};
  // What each source character's value carries into the stream, head by head at that layer:
  // ‖W_O^h v_j‖ (Kobayashi et al. 2020); the value-weighted alignment is alignment × it.
  const Block& cross = run.blocks.front();
  if (static_cast<int64_t>(cross.ov_norms.size()) > o.layer) {
    const Tensor& norms = cross.ov_norms[static_cast<std::size_t>(o.layer)];  // [1, H, S]
    json per = json::array();
    for (int64_t h = 0; h < norms.dim(1); ++h) {
      json row = json::array();
      for (int64_t k = 0; k < norms.dim(2); ++k)
        row.push_back(number_json(norms.at<double>(0, h, k)));
      per.push_back(std::move(row));
    }
    j["ov_norms"] = std::move(per);
  }
  add_lens_json(j, run, /*heads_in_lens=*/true);
  return j;
}

// A Perceiver: its prediction and what each latent gathers.
json perceiver_json(const Run& run, const JsonOptions& o) {
  const Gathers g = gathers(run, o.top);
  json latents = json::array();
  for (const LatentGather& lg : g.gathered) {
    json top = json::array();
    for (const auto& [l, w] : lg.top)
      top.push_back({{"position", l},
                     {"symbol", std::string(1, run.text[static_cast<std::size_t>(l)])},
                     {"weight", number_json(w)}});
    latents.push_back(
        {{"counted_share", number_json(lg.counted_mean)},
         {"times_uniform", lg.times_uniform ? number_json(*lg.times_uniform) : json(nullptr)},
         {"counted_share_per_head", numbers(lg.counted_share)},
         {"effective_positions", number_json(lg.effective_positions)},
         {"top", top}});
  }
  return {{"model", "perceiver"},
          {"length", g.length},
          {"count", g.count},
          {"uniform_share", number_json(g.uniform_share)},
          {"predicted", run.output.predicted},
          {"probabilities", numbers(run.output.probabilities)},
          {"latents", latents},
          {"html", o.html_path.empty() ? json(nullptr) : json(o.html_path)}};
}

}  // namespace

std::string json_of(const Run& run, const JsonOptions& options) {
  const json j = run.model.family == "perceiver" ? perceiver_json(run, options)
                 : !run.blocks.empty() && run.blocks.front().kind == BlockKind::cross_attention
                     ? seq2seq_json(run, options)
                     : sentence_json(run, options.focus, options.layer);
  // A decoder's byte-level token may hold part of a character ("🙂" is three tokens): shown as
  // U+FFFD, as the HTML report and Python show it.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string lens_json(const Run& run) {
  json j = json::object();
  add_lens_json(j, run);
  return j.empty() ? std::string() : j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace qkv::explain
