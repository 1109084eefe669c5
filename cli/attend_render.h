// How `qkv attend` shows a result: every step for a small single-head case, a summary otherwise,
// and everything as JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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
// How many (batch, head) pairs and query rows a summary shows.
inline constexpr int64_t kSummaryPairs = 2, kSummaryRows = 8;
// Shapes, options, and the top keys of the first queries of the first heads: first[h] is the
// reference run (run_case) of first_rows(c, h, rows) for the first pairs h.
std::string summarize(const AttendCase& c, const std::vector<AttentionResult>& first,
                      const RenderOptions& o);

// Every input and result as nested arrays; non-finite numbers as "Infinity", "-Infinity", "NaN".
nlohmann::json to_json(const AttendCase& c, const AttentionResult& r);
nlohmann::json tensor_json(const Tensor& t);

}  // namespace qkv::cli
