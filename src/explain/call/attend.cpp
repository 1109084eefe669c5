// explain/call/attend.cpp — one call as `qkv attend` takes it: arguments to a checked call, the
// run, its NaN and overflow checks, and the worked examples' text (qkv/attend.h).
#include "qkv/attend.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <tuple>

#include "qkv/npy.h"
#include "qkv/terminal.h"

namespace qkv::explain {

namespace {

// A usage error about `field`; `text` names fields as {field} and passes the user's own text
// through FieldError::literal.
[[noreturn]] void usage(const std::string& field, const std::string& text) {
  throw FieldError(field, text);
}

// What the user typed, inside a message: its braces name no field.
std::string typed(const std::string& text) { return FieldError::literal(text); }

// "scaled-dot, dot, general, additive, laplace, cosine or uniform": from all_scores(), so a new
// score is named here without an edit.
std::string score_choices() {
  std::string s;
  const auto& all = all_scores();
  for (std::size_t i = 0; i < all.size(); ++i)
    s += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + std::string(to_string(all[i]));
  return s;
}

// Reads a .npy given by a field, or parses an inline matrix ("[[1, 0], [0, 1]]"); errors name
// the field as well as the file.
Tensor read_input(const std::string& field, const std::string& path,
                  InlineUse use = InlineUse::tensor) {
  if (is_inline_matrix(path)) return parse_inline_matrix(field, path, use);
  try {
    return read_npy(path);
  } catch (const Error& e) {
    usage(field, "{" + field + "} " + typed(e.what()));
  }
}

std::vector<int64_t> parse_lengths(const std::string& text) {
  std::vector<int64_t> lengths;
  for (const std::string& part : split_commas(text)) {
    int64_t n = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), n);
    if (ec != std::errc() || end != part.data() + part.size() || part.empty())
      usage("key_lengths", "{key_lengths} '" + typed(text) + "' has '" + typed(part) +
                               "', not an integer; expected comma-separated lengths, one per "
                               "batch, e.g. 3,5");
    lengths.push_back(n);
  }
  return lengths;
}

double parse_scale(const std::string& text) {
  double x = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (ec == std::errc::result_out_of_range)
    usage("scale",
          "{scale} '" + typed(text) + "' is out of range; expected a finite number such as 0.125");
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    usage("scale",
          "{scale} '" + typed(text) + "' is not a number; expected a finite number such as 0.125");
  return x;
}

void read_params(const CallArguments& a, AttentionCall& c) {
  const Score score = c.options.score;
  const std::size_t wanted = score == Score::general ? 1 : score == Score::additive ? 3 : 0;
  const std::string expected =
      score == Score::general ? "W [Dq, Dk]" : "W_q [A, Dq], W_k [A, Dk], v [A]";
  const std::string name(to_string(score));
  if (wanted == 0 && !a.params.empty())
    usage("params", "{params} is given but score " + name +
                        " has no parameters; expected {params} only with {score=general} or "
                        "additive");
  if (a.params.size() != wanted)
    usage("params", "{score=" + name + "} needs {params} " + expected + " (" +
                        std::to_string(wanted) + " file" + (wanted > 1 ? "s" : "") + "); got " +
                        std::to_string(a.params.size()));
  ScoreParams& p = c.options.params;
  if (score == Score::general) p.w = read_input("params", a.params[0], InlineUse::param);
  if (score == Score::additive) {
    p.w_q = read_input("params", a.params[0], InlineUse::param);
    p.w_k = read_input("params", a.params[1], InlineUse::param);
    p.v = read_input("params", a.params[2], InlineUse::param);
  }
}

void parse_options(const CallArguments& a, AttentionOptions& o) {
  const auto score = parse_score(a.score);
  if (!score)
    usage("score", "{score} '" + typed(a.score) + "' is unknown; expected " + score_choices());
  o.score = *score;
  const auto normalize = parse_normalize(a.normalize);
  if (!normalize)
    usage("normalize",
          "{normalize} '" + typed(a.normalize) + "' is unknown; expected softmax or none");
  o.normalize = *normalize;
  const auto causal = parse_causal(a.causal);
  if (!causal)
    usage("causal",
          "{causal} '" + typed(a.causal) + "' is unknown; expected top-left or bottom-right");
  o.causal = *causal;
  const auto path = parse_path(a.path);
  if (!path)
    usage("path",
          "{path} '" + typed(a.path) + "' is unknown; expected auto, fused, reference or cuda");
  o.path = *path;
  const auto precision = parse_precision(a.precision);
  if (!precision)
    usage("precision",
          "{precision} '" + typed(a.precision) + "' is unknown; expected fp32 or bf16");
  o.precision = *precision;
  if (!a.scale.empty()) o.scale = parse_scale(a.scale);
  if (!a.key_lengths.empty()) o.key_lengths = parse_lengths(a.key_lengths);
}

// The inputs as messages name them, fields and what was typed: "{query} q.npy", "{params} [[1,
// 2]]". check_attention's messages are then templates of fields (FieldError::render).
ArgumentNames names_of(const CallArguments& a, Score score) {
  ArgumentNames names;
  const auto shown = [](const char* field, const std::string& argument) {
    return "{" + std::string(field) + "} " + typed(shown_argument(argument));
  };
  names.q = shown("query", a.query), names.k = shown("keys", a.keys);
  names.v = shown("values", a.values), names.mask = shown("mask", a.mask);
  names.key_lengths = "{key_lengths}", names.scale = "{scale}";
  if (score == Score::general) names.w = shown("params", a.params[0]);
  if (score == Score::additive)
    names.w_q = shown("params", a.params[0]), names.w_k = shown("params", a.params[1]),
    names.v_param = shown("params", a.params[2]);
  return names;
}

// check_attention with the names above: its error, a template of fields, as a FieldError of the
// first field it names.
void check_call(const AttentionCall& c, const ArgumentNames& names) {
  try {
    check_attention(c.q, c.k, c.v, c.options, names);
  } catch (const Error& e) {
    std::string first;
    FieldError::render(e.what(), [&](std::string_view field, std::string_view) {
      if (first.empty()) first = field;
      return std::string();
    });
    throw FieldError(first, e.what(), e.kind());
  }
}

void check_labels(const std::vector<std::string>& labels, const std::string& field,
                  const std::string& of, int64_t rows) {
  if (!labels.empty() && static_cast<int64_t>(labels.size()) != rows)
    usage(field, "{" + field + "} has " + std::to_string(labels.size()) + " labels but " + of +
                     " has " + std::to_string(rows) + " rows; expected one label per row");
}

// The inputs that hold NaN or ∞, as "query (first at [0, 3])", each named by `name`; a mask's
// −∞ only masks.
std::vector<std::string> non_finite_inputs(const AttentionCall& c, const FieldError::Namer& name) {
  std::vector<std::string> found;
  auto look = [&](const char* field, const char* which, const Tensor& t) {
    const std::string at = first_non_finite(t);
    if (!at.empty()) found.push_back(name(field, {}) + which + " (first at " + at + ")");
  };
  look("query", "", c.q), look("keys", "", c.k), look("values", "", c.v);
  const ScoreParams& p = c.options.params;
  look("params", " W", p.w), look("params", " W_q", p.w_q), look("params", " W_k", p.w_k);
  look("params", " v", p.v);
  const Tensor& m = c.options.mask;
  if (m.defined() && m.dtype() != DType::b8)
    for (int64_t i = 0; i < m.numel(); ++i)
      if (std::isnan(m.value(i)) || m.value(i) == std::numeric_limits<double>::infinity()) {
        found.push_back(name("mask", {}) + " (NaN or +∞ at " + std::to_string(i) + ")");
        break;
      }
  return found;
}

// A field by its own name, as FieldError::what() names it.
std::string field_itself(std::string_view field, std::string_view value) {
  return std::string(field) + (value.empty() ? "" : " " + std::string(value));
}

bool same_values(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (a.value(i) != b.value(i)) return false;
  return true;
}

}  // namespace

AttentionCall call_from(const CallArguments& a) {
  if (a.query.empty() || a.keys.empty() || a.values.empty())
    usage(a.query.empty()  ? "query"
          : a.keys.empty() ? "keys"
                           : "values",
          "expected {query}, {keys} and {values} (.npy files or inline matrices such as "
          "\"[[1, 0], [0, 1]]\")");
  AttentionCall c;
  parse_options(a, c.options);
  c.q = read_input("query", a.query);
  c.k = read_input("keys", a.keys);
  c.v = read_input("values", a.values);
  if (!a.mask.empty()) c.options.mask = read_input("mask", a.mask, InlineUse::mask);
  read_params(a, c);
  const ArgumentNames names = names_of(a, c.options.score);
  check_call(c, names);
  c.query_labels = split_commas(a.query_labels);
  c.key_labels = split_commas(a.key_labels);
  check_labels(c.query_labels, "query_labels", names.q, c.q.dim(-2));
  check_labels(c.key_labels, "key_labels", names.k, c.k.dim(-2));
  return c;
}

std::vector<std::pair<std::string, std::string>> input_files(const CallArguments& a) {
  std::vector<std::pair<std::string, std::string>> inputs;
  auto input = [&](const char* field, const std::string& argument) {
    if (!argument.empty() && !is_inline_matrix(argument)) inputs.push_back({field, argument});
  };
  input("query", a.query), input("keys", a.keys), input("values", a.values);
  input("mask", a.mask);
  for (const std::string& p : a.params) input("params", p);
  return inputs;
}

Attended attend(const AttentionCall& c, bool whole) {
  AttentionOptions chosen = c.options;
  chosen.need_logsumexp = true;
  Attended a;
  a.path = chosen_path(c.q, c.k, c.v, chosen);
  if (whole) a.result = run_case(c);
  if (a.path == Path::fused || a.path == Path::cuda || !whole) {
    const AttentionResult computed = attention(c.q, c.k, c.v, chosen);
    a.result.out = computed.out;
    a.result.logsumexp = computed.logsumexp;
  }
  // The summary: the first rows of the first heads, each run on its own.
  if (!fits_step_by_step(c))
    for (int64_t pair = 0; pair < std::min(head_pairs(c), kSummaryPairs); ++pair)
      a.first.push_back(run_case(first_rows(c, pair, std::min(c.q.dim(-2), kSummaryRows))));
  check_overflow(c, a.result);
  return a;
}

std::string first_non_finite(const Tensor& t) {
  if (!t.defined() || t.dtype() == DType::b8) return "";
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (std::isfinite(t.value(i))) continue;
    std::string at;
    int64_t rest = i;
    for (int d = t.rank() - 1; d >= 0; --d) {
      at = std::to_string(rest % t.dim(d)) + (at.empty() ? "" : ", ") + at;
      rest /= t.dim(d);
    }
    return "[" + at + "]";
  }
  return "";
}

std::string non_finite_note(const AttentionCall& c, const FieldError::Namer& name) {
  const auto found = non_finite_inputs(c, name);
  if (found.empty()) return "";
  std::string names;
  for (const std::string& f : found) names += (names.empty() ? "" : ", ") + f;
  return "note: NaN or ∞ in " + names + ": the rows that read them are NaN (NaN in, NaN out)\n";
}

void check_overflow(const AttentionCall& c, const AttentionResult& r) {
  if (!non_finite_inputs(c, field_itself).empty()) return;
  const std::string at = first_non_finite(r.out);
  if (at.empty()) return;
  const bool f32 = r.out.dtype() == DType::f32;
  throw Error(std::string("the scores overflow ") + (f32 ? "float32" : "float64") +
                  ": output row " + at.substr(0, at.rfind(',')) + "] has a score or logit beyond " +
                  (f32 ? "±3.4e38" : "±1.8e308") +
                  ", so its softmax has no representable value; expected inputs scaled down" +
                  (f32 ? " (or float64 .npy files)" : ""),
              Error::Kind::runtime);
}

std::string call_heading(const AttentionCall& c, Path path) {
  const AttentionOptions& o = c.options;
  return "attention: score " + std::string(to_string(o.score)) + ", scale " +
         short_number(effective_scale(c)) + ", " + std::string(to_string(o.normalize)) +
         (o.causal != Causal::none ? ", causal " + std::string(to_string(o.causal)) : "") +
         (o.precision == Precision::bf16 ? ", precision bf16" : "") + ", output by the " +
         std::string(to_string(path)) + " path\n" +
         // bf16 says what the numbers below are of: the inputs as shown are not rounded.
         (o.precision == Precision::bf16
              ? "note: q, k and v were rounded to bfloat16 (8 significant bits) before the\n"
                "      products; the inputs below are shown as given\n"
              : "");
}

bool same_inputs(const AttentionCall& a, const AttentionCall& b) {
  if (a.projections.size() != b.projections.size()) return false;
  for (std::size_t i = 0; i < a.projections.size(); ++i)
    if (!same_values(a.projections[i].weight, b.projections[i].weight)) return false;
  return same_values(a.q, b.q) && same_values(a.k, b.k) && same_values(a.v, b.v);
}

std::vector<AttentionResult> run_example(const Example& e) {
  std::vector<AttentionResult> results;
  for (const AttentionCall& c : e.runs) results.push_back(run_case(c));
  return results;
}

std::string explain_example(const Example& e, const std::vector<AttentionResult>& results,
                            const StepOptions& o) {
  std::string text = e.name + " — " + e.title + "\n";
  for (const std::string& line : e.story) text += "  " + line + "\n";
  for (std::size_t i = 0; i < e.runs.size() && i < results.size(); ++i) {
    StepOptions this_run = o;
    this_run.same_inputs_as_before = i > 0 && same_inputs(e.runs[i], e.runs[i - 1]);
    text += "\n━━ Run " + std::to_string(i + 1) + " of " + std::to_string(e.runs.size()) + ": " +
            e.runs[i].caption + "\n";
    text += explain_steps(e.runs[i], results[i], this_run);
  }
  if (!e.takeaway.empty()) text += "\n" + wrap("What it shows: " + e.takeaway, 96, 2) + "\n";
  return text;
}

std::string example_list() {
  std::string s;
  for (const Example& e : examples()) s += pad_right(e.name, 10) + "  " + e.title + "\n";
  return s;
}

}  // namespace qkv::explain
