// explain/report/values_json.h — what the values carried, in a sentence's --json (json.cpp):
// per layer the value norms, the mixing, the rollouts, and with one layer asked what a NumPy
// recomputation needs beside q, k, v and the weights.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "qkv/explain_run.h"

namespace qkv::explain {

// The rollouts of a run, computed once for all its layers (empty where not computed).
struct RunValues {
  std::vector<Tensor> rollout, mixing_rollout;
};
RunValues run_values(const Run& run);
// Layer l's {ov_norms [H, m], mixing [n, m], rollout, mixing_rollout [n, n]} (null where not
// computed); with `one_layer`, also {w_o [hidden, H·d], mixing_gain [hidden] (null: pre-norm),
// stream_in [n, hidden]: the stream layer l reads}. Empty for a run without value norms.
nlohmann::json values_json(const Run& run, const RunValues& values, int64_t l, bool one_layer);
// The run's {norm: "pre-norm"|"post-LN", mixing_max_tokens, sinks: [{layer, head, weight,
// first_norm, others_norm, value_share, moved}] (sink_values)}, null without value norms.
nlohmann::json values_header_json(const Run& run);

}  // namespace qkv::explain
