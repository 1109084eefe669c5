// qkv/explain.h — attention made visible: a model run or one call of qkv::attention, captured
// (qkv::AttentionCapture) and shown in the terminal, as SVG and PNG images, as one self-contained
// HTML report, and as JSON. `qkv explain` and `qkv attend` are built on it. A model's run is one
// record, explain::Run (qkv/explain_run.h), made by explain::capture; the readings
// (qkv/explain_readings.h), the terminal and images (qkv/explain_views.h) and the report and JSON
// (qkv/explain_report.h) read it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qkv/attention.h"
#include "qkv/explain_readings.h"
#include "qkv/explain_report.h"
#include "qkv/explain_run.h"
#include "qkv/explain_views.h"
#include "qkv/model.h"
#include "qkv/tensor.h"
#include "qkv/terminal.h"

namespace qkv::explain {

// ---- text for terminals: qkv/terminal.h (core), named here as before ----
using qkv::bar;
using qkv::clip;
using qkv::display_width;
using qkv::fixed;
using qkv::grouped;
using qkv::heatmap_cell;
using qkv::pad_left;
using qkv::pad_right;
using qkv::printable;
using qkv::render;
using qkv::short_number;
using qkv::split_commas;
using qkv::Table;
using qkv::table_row;
using qkv::wrap;

// ---- JSON ----

struct AttentionCall;  // below

// One call of qkv::attention (`qkv attend --json`): options, shapes, labels, every input and
// result as nested arrays (core/json.h).
nlohmann::json to_json(const AttentionCall& c, const AttentionResult& r);

// ---- one call of qkv::attention ----
// One attention computation as `qkv attend` shows it: inputs, options,
// labels, and optionally the projections that made Q, K and V — from the user's .npy files or from
// a worked example.

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

// ---- one call, step by step ----
// How `qkv attend` shows a result: every step for a small single-head case,
// a summary otherwise, and everything as JSON.

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

// ---- one call: what it computes and its memory ----
// What `qkv attend` computes, and how much memory it takes: the L×S matrices
// (weights, scores, logits) exist only where an output needs them all (--weights, --json, --html)
// or the case is small enough to explain step by step; the text summary of a large case runs the
// reference on the few query rows it shows. So the fused path stays O(L·D) end to end, and anything
// that needs the L×S matrices says how much memory before it starts and refuses past a limit.

// B·Hq·L·S: the attention weights of the case (INT64_MAX where that overflows).
int64_t weight_count(const AttentionCall& c);

// (batch, head) pairs, B·Hq.
int64_t head_pairs(const AttentionCall& c);

// Bytes the float64 reference takes beyond the inputs when it keeps every weight, score and logit
// (run_case: qkv::attention_bytes of its options), and with --json the JSON of them too.
int64_t reference_bytes(const AttentionCall& c, bool json);

// The first `rows` query rows of flat (batch, head) pair `pair`, as a problem of its own: q
// [rows, Dq], k and v [S, D] of the pair's kv head, and every mask of the whole problem — the
// user's, causal with the whole problem's alignment, key lengths — as one float mask [rows, S]
// (−∞ where hidden). Its reference run gives exactly those rows of the whole run.
AttentionCall first_rows(const AttentionCall& c, int64_t pair, int64_t rows);

// ---- one call in the HTML report ----
// `qkv attend --html`: one call of attention (or every run of a worked
// example) as the HTML report's blocks — one block per run and batch entry, its heads side by side.

Report report_of(const std::string& title, const std::vector<std::string>& story,
                 const std::vector<AttentionCall>& cases,
                 const std::vector<AttentionResult>& results);

}  // namespace qkv::explain
