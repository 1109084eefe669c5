// How `qkv attend` shows a result: every step for a small single-head case, a summary otherwise,
// and everything as JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "attend_case.h"

namespace qkv::cli {

struct RenderOptions {
  int digits = 2;                      // decimals of printed numbers
  int top = 3;                         // keys listed per query in a summary
  bool same_inputs_as_before = false;  // a later run of an example: do not repeat Q, K, V
};

// True when the case is small enough to print every step: one batch and head, ≤ 16 queries/keys.
bool fits_step_by_step(const AttendCase& c);

// Scores, scaling, mask, softmax, output and each output row as a weighted sum of value rows.
std::string explain_steps(const AttendCase& c, const AttentionResult& r, const RenderOptions& o);
// Shapes, options, and the top keys of the first queries of each head.
std::string summarize(const AttendCase& c, const AttentionResult& r, const RenderOptions& o);

// Every input and result as nested arrays; non-finite numbers as "Infinity", "-Infinity", "NaN".
nlohmann::json to_json(const AttendCase& c, const AttentionResult& r);
nlohmann::json tensor_json(const Tensor& t);

}  // namespace qkv::cli
