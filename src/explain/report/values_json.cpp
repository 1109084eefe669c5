#include "explain/report/values_json.h"

#include "qkv/explain.h"
#include "qkv/json.h"

namespace qkv::explain {

RunValues run_values(const Run& run) {
  RunValues v;
  if (run.blocks.empty() || run.blocks.front().ov_norms.empty() || run.size() > kMixingMaxTokens)
    return v;
  v.rollout = attention_rollout(run);
  if (has_mixing(run)) v.mixing_rollout = mixing_rollout(run);
  return v;
}

nlohmann::json values_json(const Run& run, const RunValues& values, int64_t l, bool one_layer) {
  if (run.blocks.empty() || run.blocks.front().ov_norms.empty()) return nlohmann::json::object();
  const Block& b = run.blocks.front();
  const auto at = static_cast<std::size_t>(l);
  const auto maybe = [at](const std::vector<Tensor>& ts) {
    return at < ts.size() ? tensor_json(ts[at]) : nlohmann::json(nullptr);
  };
  nlohmann::json j = {{"ov_norms", tensor_json(unbatch(b.ov_norms[at]))},
                      {"mixing", has_mixing(run) ? tensor_json(mixing(run, l)) : nullptr},
                      {"rollout", maybe(values.rollout)},
                      {"mixing_rollout", maybe(values.mixing_rollout)}};
  if (one_layer) {
    const Tensor& in = l == 0                       ? run.embeddings
                       : at - 1 < run.hidden.size() ? run.hidden[at - 1]
                                                    : Tensor();
    j["w_o"] = tensor_json(b.output_matrix[at]);
    j["mixing_gain"] = maybe(b.mixing_gain);
    j["stream_in"] = in.defined() ? tensor_json(unbatch(in)) : nullptr;
  }
  return j;
}

nlohmann::json values_header_json(const Run& run) {
  if (run.blocks.empty() || run.blocks.front().ov_norms.empty()) return nullptr;
  nlohmann::json sinks = nlohmann::json::array();
  for (const SinkValues& s : sink_values(run))
    sinks.push_back({{"layer", s.layer},
                     {"head", s.head},
                     {"weight", number_json(s.weight)},
                     {"first_norm", number_json(s.first_norm)},
                     {"others_norm", number_json(s.others_norm)},
                     {"value_share", number_json(s.value_share)},
                     {"moved", number_json(s.moved)}});
  return {{"norm", run.blocks.front().mixing_gain.empty() ? "pre-norm" : "post-LN"},
          {"mixing_max_tokens", kMixingMaxTokens},
          {"sinks", sinks}};
}

}  // namespace qkv::explain
