// qkv/attend.h — one call of qkv::attention, explained (`qkv attend` as a library): the call
// (inputs, options, labels, the projections that made Q, K and V) from the arguments a user types
// (.npy files or inline matrices, option names) or from the worked examples shipped inside the
// library (examples/attend/*.json); its run, with every intermediate kept where it is shown; the
// checks around a run (NaN in, overflow out); and what is shown of it: every step, a summary, its
// memory, the HTML report's blocks, JSON. The command parses options and prints; everything between
// lives here (src/explain/call/). An argument at fault is a FieldError (qkv/field_error.h) naming
// its field of CallArguments (query, keys, key_lengths, ...): each front end spells it its way (the
// command: --query, --key-lengths).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qkv/attention.h"
#include "qkv/explain_report.h"
#include "qkv/field_error.h"
#include "qkv/tensor.h"

namespace qkv::explain {

// ---- the call ----

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
// logsumexp), for the step-by-step view, the report and JSON.
AttentionResult run_case(const AttentionCall& c);

// ---- the call the user typed, inline matrices: `qkv attend --query "[[1, 0], [0, 1]]"` ----

// The arguments of one call, as typed: paths or inline matrices, names of options. Empty strings
// are options not given. Each member is the field its errors name.
struct CallArguments {
  std::string query, keys, values, mask, key_lengths, scale;
  std::string score = "scaled-dot", normalize = "softmax", causal = "none", path = "auto";
  std::string precision = "fp32";
  std::vector<std::string> params;  // general: W; additive: W_q W_k v
  std::string query_labels, key_labels;
};

// Reads the inputs (read_npy or parse_inline_matrix), parses the options and checks the call
// (check_attention, labels one per row). Throws a FieldError (usage) naming the field at fault:
//   "{score} 'dott' is unknown; expected scaled-dot, dot, general, additive, ..."
AttentionCall call_from(const CallArguments& a);
// The inputs given as files (not inline), as {field, path}: what the outputs must not replace.
std::vector<std::pair<std::string, std::string>> input_files(const CallArguments& a);

// Whether an argument is an inline matrix, so that a learner can try "what if" numbers in the
// shell without writing .npy files: its first non-space character is '['. Anything else is a file
// path (a path that starts with '[' can be given as ./[name]).
bool is_inline_matrix(const std::string& argument);
enum class InlineUse {
  tensor,  // query, keys, values: numbers; a flat list is one row, [1, D]
  mask,    // mask: numbers (added to the logits) or true/false (may attend), not mixed
  param,   // params: numbers; a flat list stays a vector (additive's v is [A])
};
// Parses JSON nested lists of one depth — [D], [L, D] or [H, L, D] — into a float64 (or, for a
// mask of true/false, bool) tensor. Throws a FieldError naming `field` for text over 64 KiB,
// invalid JSON, NaN or ∞ (JSON has neither; a .npy file can hold them), an empty list, ragged
// rows, a deeper nesting or an entry that is not a number.
Tensor parse_inline_matrix(const std::string& field, const std::string& text, InlineUse use);
// The argument as shown in messages: a path as it is, inline text shortened to 40 characters.
std::string shown_argument(const std::string& argument);

// ---- a run and its checks ----

// What `qkv attend` computes of a call: out and logsumexp from the chosen path (the fused kernel
// where it applies), the explanation from the float64 reference (run_case) where `whole` asks for
// every weight; a summary's first rows (first_rows) run on their own.
struct Attended {
  AttentionResult result;
  Path path = Path::reference;         // the path that computed out and logsumexp
  std::vector<AttentionResult> first;  // the summary's runs; empty when shown step by step
};
// `whole`: every weight, score and logit is needed (step by step, --weights, --json, --html).
// Throws check_overflow's error.
Attended attend(const AttentionCall& c, bool whole);

// The first element of t that is NaN or ±∞, as "[i, j, ...]"; empty when every one is finite.
std::string first_non_finite(const Tensor& t);
// "note: NaN or ∞ in query (first at [0, 3]): the rows that read them are NaN (NaN in, NaN
// out)\n", each input named by `name` (a field, "params W"), or "" when every input is finite (a
// mask's −∞ only masks). NaN in, NaN out is a result (docs/CONVENTIONS.md §1.4).
std::string non_finite_note(const AttentionCall& c, const FieldError::Namer& name);
// NaN from finite inputs is an overflow (qkv/attention.h), never a result: throws qkv::Error
// (runtime) "the scores overflow float32: output row [0, 0, 1] has a score or logit beyond ...".
void check_overflow(const AttentionCall& c, const AttentionResult& r);

// "attention: score scaled-dot, scale 0.707, softmax, output by the fused path\n"
std::string call_heading(const AttentionCall& c, Path path);

// ---- step by step, or a summary ----

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

// ---- its memory ----
// The L×S matrices (weights, scores, logits) exist only where an output needs them all (--weights,
// --json, --html) or the case is small enough to explain step by step; the text summary of a large
// case runs the reference on the few query rows it shows. So the fused path stays O(L·D) end to
// end, and anything that needs the L×S matrices says how much memory before it starts.

// B·Hq·L·S: the attention weights of the case (INT64_MAX where that overflows).
int64_t weight_count(const AttentionCall& c);
// (batch, head) pairs, B·Hq.
int64_t head_pairs(const AttentionCall& c);
// Bytes the float64 reference takes beyond the inputs when it keeps every weight, score and logit
// (run_case: qkv::attention_bytes of its options), and with `json` the JSON of them too.
int64_t reference_bytes(const AttentionCall& c, bool json);
// The first `rows` query rows of flat (batch, head) pair `pair`, as a problem of its own: q
// [rows, Dq], k and v [S, D] of the pair's kv head, and every mask of the whole problem — the
// user's, causal with the whole problem's alignment, key lengths — as one float mask [rows, S]
// (−∞ where hidden). Its reference run gives exactly those rows of the whole run.
AttentionCall first_rows(const AttentionCall& c, int64_t pair, int64_t rows);

// ---- the HTML report and JSON ----

// One call (or every run of a worked example) as the report's blocks: one block per run and
// batch entry, its heads side by side.
Report report_of(const std::string& title, const std::vector<std::string>& story,
                 const std::vector<AttentionCall>& cases,
                 const std::vector<AttentionResult>& results);

struct CallJsonOptions {
  std::optional<Path> path;  // adds "path": the one that computed out and logsumexp
  int indent = -1;           // spaces a level; −1: one line
};
// One call as JSON text (`qkv attend --json`): {caption, score, scale, normalize, causal, shapes:
// {query, keys, values, out}, query_labels, key_labels, value_columns, query, keys, values,
// scores, logits, weights, logsumexp, out}, keys in name order, every number through
// qkv::number_json.
std::string json_of(const AttentionCall& c, const AttentionResult& r,
                    const CallJsonOptions& options = {});

// ---- the worked examples: `qkv attend --example NAME` ----

struct Example {
  std::string name, title, takeaway;
  std::vector<std::string> story;  // two lines, printed above the runs
  std::vector<AttentionCall> runs;
};

// Every shipped example, in name order. Throws qkv::Error if an embedded file is malformed.
const std::vector<Example>& examples();
// The example called `name`; throws a FieldError (field "example") listing the names when there
// is none.
const Example& find_example(const std::string& name);
// Whether two runs of an example start from the same Q, K, V (and the same projections).
bool same_inputs(const AttentionCall& a, const AttentionCall& b);
// Every run of an example on the reference path (run_case), in order.
std::vector<AttentionResult> run_example(const Example& e);
// The example step by step: its title and story, each run ("━━ Run 1 of 2: caption") explained
// (later runs that start from the same inputs do not repeat them), then "What it shows: ...".
std::string explain_example(const Example& e, const std::vector<AttentionResult>& results,
                            const StepOptions& o);
// {example, title, story, runs: [json_of(call, result)...], takeaway}, `indent` as above.
std::string json_of(const Example& e, const std::vector<AttentionResult>& results, int indent = -1);
// "phonebook   Who is John? ..." a line an example.
std::string example_list();

}  // namespace qkv::explain
