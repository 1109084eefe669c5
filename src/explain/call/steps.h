// explain/call/steps.h — How `qkv attend` shows a result: every step for a small single-head case,
// a summary otherwise, and everything as JSON.
#pragma once

#include <string>
#include <vector>

#include "explain/call/call.h"

namespace qkv::explain {

struct StepOptions {
  int digits = 2;                      // decimals of printed numbers
  int top = 3;                         // keys listed per query in a summary
  bool same_inputs_as_before = false;  // a later run of an example: do not repeat Q, K, V
};

// True when the case is small enough to print every step: one batch and head, ≤ 16 queries/keys.
bool fits_step_by_step(const AttentionCall& c);

// Scores, scaling, mask, softmax, output and each output row as a weighted sum of value rows.
std::string explain_steps(const AttentionCall& c, const AttentionResult& r, const StepOptions& o);
// How many (batch, head) pairs and query rows a summary shows.
inline constexpr int64_t kSummaryPairs = 2, kSummaryRows = 8;
// Shapes, options, and the top keys of the first queries of the first heads: first[h] is the
// reference run (run_case) of first_rows(c, h, rows) for the first pairs h.
std::string summarize(const AttentionCall& c, const std::vector<AttentionResult>& first,
                      const StepOptions& o);

}  // namespace qkv::explain
