// qkv/attend.h — `qkv attend` as a library: one call of qkv::attention from the arguments a user
// types (.npy files or inline matrices, option names), the worked examples shipped inside the
// library (examples/attend/*.json), the checks around a run (NaN in, overflow out) and what is
// shown of it. The command parses options and prints; everything between lives here
// (src/explain/call/). Messages name the command's options ("--query", "--scale"), because these
// functions take the command's arguments.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/explain.h"

namespace qkv::explain {

// ---- inline matrices: `qkv attend --query "[[1, 0], [0, 1]]"` ----
// So that a learner can try "what if" numbers in the shell without writing .npy files.

// Whether an argument is an inline matrix: its first non-space character is '['. Anything else
// is a file path (a path that starts with '[' can be given as ./[name]).
bool is_inline_matrix(const std::string& argument);

enum class InlineUse {
  tensor,  // --query, --keys, --values: numbers; a flat list is one row, [1, D]
  mask,    // --mask: numbers (added to the logits) or true/false (may attend), not mixed
  param,   // --params: numbers; a flat list stays a vector (additive's v is [A])
};

// Parses JSON nested lists of one depth — [D], [L, D] or [H, L, D] — into a float64 (or, for a
// mask of true/false, bool) tensor. Throws qkv::Error naming `option` for text over 64 KiB, invalid
// JSON, NaN or ∞ (JSON has neither; a .npy file can hold them), an empty list, ragged rows, a
// deeper nesting or an entry that is not a number.
Tensor parse_inline_matrix(const std::string& option, const std::string& text, InlineUse use);

// The argument as shown in messages: a path as it is, inline text shortened to 40 characters.
std::string shown_argument(const std::string& argument);

// ---- the call the user typed ----

// The arguments of one call, as typed: paths or inline matrices, names of options. Empty strings
// are options not given.
struct CallArguments {
  std::string query, keys, values, mask, key_lengths, scale;
  std::string score = "scaled-dot", normalize = "softmax", causal = "none", path = "auto";
  std::vector<std::string> params;  // general: W; additive: W_q W_k v
  std::string query_labels, key_labels;
};

// Reads the inputs (read_npy or parse_inline_matrix), parses the options and checks the call
// (check_attention, labels one per row). Throws qkv::Error (usage) naming the option at fault:
//   "--score 'dott' is unknown; expected scaled-dot, dot, general, additive, ..."
AttentionCall call_from(const CallArguments& a);

// The inputs given as files (not inline), as {option, path}: what the outputs must not replace.
std::vector<std::pair<std::string, std::string>> input_files(const CallArguments& a);

// ---- a run and its checks ----

// What `qkv attend` computes of a call: --out and --lse from the chosen path (the fused kernel
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
// "note: NaN or ∞ in --query (first at [0, 3]): the rows that read them are NaN (NaN in, NaN
// out)\n", or "" when every input is finite (a mask's −∞ only masks). NaN in, NaN out is a result
// (docs/CONVENTIONS.md §1.4).
std::string non_finite_note(const AttentionCall& c);
// NaN from finite inputs is an overflow (qkv/attention.h), never a result: throws qkv::Error
// (runtime) "the scores overflow float32: output row [0, 0, 1] has a score or logit beyond ...".
void check_overflow(const AttentionCall& c, const AttentionResult& r);

// "attention: score scaled-dot, scale 0.707, softmax, output by the fused path\n"
std::string call_heading(const AttentionCall& c, Path path);

// ---- the worked examples: `qkv attend --example NAME` ----

struct Example {
  std::string name, title, takeaway;
  std::vector<std::string> story;  // two lines, printed above the runs
  std::vector<AttentionCall> runs;
};

// Every shipped example, in name order. Throws qkv::Error if an embedded file is malformed.
const std::vector<Example>& examples();
// The example called `name`; throws qkv::Error (usage) listing the names when there is none.
const Example& find_example(const std::string& name);

// Whether two runs of an example start from the same Q, K, V (and the same projections).
bool same_inputs(const AttentionCall& a, const AttentionCall& b);

// Every run of an example on the reference path (run_case), in order.
std::vector<AttentionResult> run_example(const Example& e);
// The example step by step: its title and story, each run ("━━ Run 1 of 2: caption") explained
// (later runs that start from the same inputs do not repeat them), then "What it shows: ...".
std::string explain_example(const Example& e, const std::vector<AttentionResult>& results,
                            const StepOptions& o);
// {example, title, story, runs: [to_json(call, result)...], takeaway}
nlohmann::json to_json(const Example& e, const std::vector<AttentionResult>& results);
// "phonebook   Who is John? ..." a line an example.
std::string example_list();

}  // namespace qkv::explain
