// explain/call/json.cpp — one call of attention as JSON text (`qkv attend --json`) and a worked
// example's runs (qkv/attend.h); numbers through qkv::number_json, nlohmann's types stay here.
#include "qkv/json.h"

#include "qkv/attend.h"

namespace qkv::explain {
namespace {

using nlohmann::json;

json call_json(const AttentionCall& c, const AttentionResult& r) {
  json j;
  if (!c.caption.empty()) j["caption"] = c.caption;
  j["score"] = to_string(c.options.score);
  j["scale"] = effective_scale(c);
  j["normalize"] = to_string(c.options.normalize);
  j["causal"] = to_string(c.options.causal);
  // Only when asked for, so that the default's JSON stays what it was.
  if (c.options.precision != Precision::fp32) j["precision"] = to_string(c.options.precision);
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

}  // namespace

std::string json_of(const AttentionCall& c, const AttentionResult& r,
                    const CallJsonOptions& options) {
  json j = call_json(c, r);
  if (options.path) j["path"] = to_string(*options.path);
  return j.dump(options.indent);
}

std::string json_of(const Example& e, const std::vector<AttentionResult>& results, int indent) {
  json runs = json::array();
  for (std::size_t i = 0; i < e.runs.size() && i < results.size(); ++i)
    runs.push_back(call_json(e.runs[i], results[i]));
  const json j = {{"example", e.name},
                  {"title", e.title},
                  {"story", e.story},
                  {"runs", runs},
                  {"takeaway", e.takeaway}};
  return j.dump(indent);
}

}  // namespace qkv::explain
