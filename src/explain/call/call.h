// explain/call/call.h — One attention computation as `qkv attend` shows it: inputs, options,
// labels, and optionally the projections that made Q, K and V — from the user's .npy files or from
// a worked example.
#pragma once

#include <string>
#include <vector>

#include "qkv/attention.h"

namespace qkv::explain {

// "Q = X · W_Q": shown as a step before the scores when an example builds Q, K or V this way.
struct Projection {
  std::string result_name;  // "Q", "K" or "V"
  std::string input_name;   // "X"
  std::string weight_name;  // "W_Q"
  Tensor input, weight;     // [rows, d_in], [d_in, d_out]
};

struct AttentionCall {
  std::string caption;
  Tensor q, k, v;
  AttentionOptions options;
  std::vector<std::string> query_labels, key_labels, value_columns;
  std::vector<std::string> input_columns;  // names of the features of the projections' inputs
  std::vector<Projection> projections;
};

// The case's scale: the option if set, else the score's default for its head dim.
double effective_scale(const AttentionCall& c);

// Runs the case on the reference path with every intermediate kept (scores, logits, weights,
// logsumexp), for the step-by-step view and --json.
AttentionResult run_case(const AttentionCall& c);

}  // namespace qkv::explain
