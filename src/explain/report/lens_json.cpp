#include "explain/report/lens_json.h"

#include "qkv/explain_circuits.h"
#include "qkv/json.h"

namespace qkv::explain {
namespace {

using nlohmann::json;

json measure_json(const Measure& m) {
  return {{"logit", number_json(m.logit)},
          {"log_prob", number_json(m.log_prob)},
          {"versus_logit", number_json(m.versus_logit)},
          {"metric", number_json(m.metric)}};
}

json numbers(const std::vector<double>& xs) {
  json a = json::array();
  for (const double x : xs) a.push_back(number_json(x));
  return a;
}

json heads_json(const CausalReading& r) {
  json heads = json::array();
  for (const HeadEffect& e : r.heads)
    heads.push_back(
        {{"layer", e.layer},
         {"head", e.head},
         {"ablation_logit_change", number_json(e.ablation_logit_change)},
         {"ablation_log_prob_change", number_json(e.ablation_log_prob_change)},
         {"ablation_metric_change", number_json(e.ablation_metric_change)},
         {"mean_ablation_logit_change", number_json(e.mean_ablation_logit_change)},
         {"mean_ablation_log_prob_change", number_json(e.mean_ablation_log_prob_change)},
         {"mean_ablation_metric_change", number_json(e.mean_ablation_metric_change)},
         {"direct_logit_attribution", number_json(e.direct_logit_attribution)}});
  if (r.patching) {
    const Tensor& p = r.patching->heads;
    for (std::size_t i = 0; i < heads.size(); ++i)
      heads[i]["patching_restored"] = number_json(p.data<double>()[i]);
  }
  return heads;
}

json logit_lens_json(const CausalReading& r) {
  json rows = json::array();
  std::size_t at = 0;
  for (const LensRow& row : r.logit_lens) {
    json top = json::array();
    for (const auto& [id, p] : row.top)
      top.push_back({{"id", id}, {"token", r.lens_text[at++]}, {"p", number_json(p)}});
    rows.push_back({{"layer", row.layer},
                    {"top", top},
                    {"target_rank", row.target_rank},
                    {"target_logit", number_json(row.target_logit)},
                    {"target_log_prob", number_json(row.target_log_prob)}});
  }
  return rows;
}

}  // namespace

void add_lens_json(json& j, const Run& run, bool heads_in_lens) {
  if (run.circuit) j["circuit"] = circuit_json(*run.circuit);
  if (!run.lens) return;
  const CausalReading& r = *run.lens;
  const Attribution& a = r.attribution;
  json lens = {
      {"target", {{"id", r.target.id}, {"token", r.target_text}, {"given", r.target_given}}},
      {"versus", r.target.versus >= 0 ? json{{"id", r.target.versus}, {"token", r.versus_text}}
                                      : json(nullptr)},
      {"layers", r.layer_names},
      {"captured_at", r.captured_at},
      {"tokens", r.tokens},
      {"step", r.step >= 0 ? json(r.step + 1) : json(nullptr)},
      {"position", static_cast<int64_t>(r.tokens.size()) - 1},
      {"clean", measure_json(r.clean)},
      {"attribution",
       {{"embedding", number_json(a.embedding)},
        {"attention", numbers(a.attention)},
        {"mlp", numbers(a.mlp)},
        {"constant", number_json(a.constant)},
        {"total", number_json(a.total)}}},
      {"logit_lens", logit_lens_json(r)},
      {"knockout", nullptr},
      {"patching", nullptr}};
  if (r.knocked) {
    json edges = json::array();
    for (const Edge& e : r.edges) edges.push_back({e.layer, e.head, e.query, e.key});
    lens["knockout"] = {
        {"spec", r.knockout}, {"edges", edges}, {"measure", measure_json(*r.knocked)}};
  }
  if (r.patching)
    lens["patching"] = {{"corrupt", r.corrupt},
                        {"clean", measure_json(r.patching->clean)},
                        {"corrupted", measure_json(r.patching->corrupted)},
                        {"heads", tensor_json(r.patching->heads)},
                        {"positions", tensor_json(r.patching->positions)},
                        {"stream", tensor_json(r.patching->stream)}};
  (heads_in_lens ? lens : j)["heads"] = heads_json(r);
  j["lens"] = std::move(lens);
}

}  // namespace qkv::explain
