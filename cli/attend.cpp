// `qkv attend`: load or pick the inputs, run the reference attention, show or write the results.
#include "attend.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <iostream>
#include <limits>
#include <string_view>
#include <tuple>

#include "examples.h"
#include "inline_matrix.h"
#include "memory.h"
#include "options.h"
#include "output.h"
#include "qkv/explain.h"
#include "qkv/files.h"
#include "qkv/npy.h"
#include "text.h"

namespace qkv::cli {

namespace {

constexpr const char* kFooter =
    "Small inputs (one head, ≤ 16 queries and keys) are shown step by step; larger ones are\n"
    "summarized. Inputs are .npy files shaped [B, H, L, D], [H, L, D] or [L, D], or small\n"
    "matrices typed inline as JSON rows (an argument starting with '['; at most 64 KiB).\n\n"
    "Examples:\n"
    "  qkv attend --example phonebook\n"
    "  qkv attend --example list\n"
    "  qkv attend --query Q.npy --keys K.npy --values V.npy --causal top-left --out O.npy\n"
    "  qkv attend --query \"[[1,0],[0,1]]\" --keys \"[[1,0],[0,1],[1,1]]\" \\\n"
    "             --values \"[[1],[2],[3]]\"\n"
    "  qkv attend --query Q.npy --keys K.npy --values V.npy --score additive \\\n"
    "             --params Wq.npy Wk.npy v.npy --json\n";

[[noreturn]] void usage(const std::string& message) { throw Error(message); }

// "eight": a count in the help, taken from the list it counts (a literal "seven" outlived the
// eighth example).
std::string count_word(std::size_t n) {
  static const char* const words[] = {"zero",  "one",   "two",  "three", "four",   "five",  "six",
                                      "seven", "eight", "nine", "ten",   "eleven", "twelve"};
  return n < std::size(words) ? words[n] : std::to_string(n);
}

// Writes the outputs as one set: a failure in any leaves none of them.
void write_all(const std::vector<std::pair<OutputPath, std::string>>& outputs) {
  write_outputs(outputs);
  for (const auto& [output, bytes] : outputs)
    if (output.option == "--html") report_written(output.path, bytes.size());
}

// Reads a .npy given by an option, or parses an inline matrix ("[[1, 0], [0, 1]]"); errors name
// the option as well as the file.
Tensor read_input(const std::string& option, const std::string& path,
                  InlineUse use = InlineUse::tensor) {
  if (is_inline_matrix(path)) return parse_inline_matrix(option, path, use);
  try {
    return read_npy(path);
  } catch (const Error& e) {
    usage(option + " " + e.what());
  }
}

std::vector<int64_t> parse_lengths(const std::string& text) {
  std::vector<int64_t> lengths;
  for (const std::string& part : split_commas(text)) {
    int64_t n = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), n);
    if (ec != std::errc() || end != part.data() + part.size() || part.empty())
      usage("--key-lengths '" + text + "' has '" + part +
            "', not an integer; expected comma-separated lengths, one per batch, e.g. 3,5");
    lengths.push_back(n);
  }
  return lengths;
}

double parse_scale(const std::string& text) {
  double x = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (ec == std::errc::result_out_of_range)
    usage("--scale '" + text + "' is out of range; expected a finite number such as 0.125");
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    usage("--scale '" + text + "' is not a number; expected a finite number such as 0.125");
  return x;
}

void read_params(const AttendArgs& a, explain::AttentionCall& c) {
  const Score score = c.options.score;
  const std::size_t wanted = score == Score::general ? 1 : score == Score::additive ? 3 : 0;
  const std::string expected =
      score == Score::general ? "W [Dq, Dk]" : "W_q [A, Dq], W_k [A, Dk], v [A]";
  if (wanted == 0 && !a.params.empty())
    usage("--params is given but score " + a.score +
          " has no parameters; expected --params only "
          "with --score general or additive");
  if (a.params.size() != wanted)
    usage("--score " + a.score + " needs --params " + expected + " (" + std::to_string(wanted) +
          " file" + (wanted > 1 ? "s" : "") + "); got " + std::to_string(a.params.size()));
  ScoreParams& p = c.options.params;
  if (score == Score::general) p.w = read_input("--params", a.params[0], InlineUse::param);
  if (score == Score::additive) {
    p.w_q = read_input("--params", a.params[0], InlineUse::param);
    p.w_k = read_input("--params", a.params[1], InlineUse::param);
    p.v = read_input("--params", a.params[2], InlineUse::param);
  }
}

explain::AttentionCall case_from_files(const AttendArgs& a) {
  if (a.query.empty() || a.keys.empty() || a.values.empty())
    usage(
        "expected --query, --keys and --values (.npy files or inline matrices such as "
        "\"[[1, 0], [0, 1]]\"), or --example NAME; see qkv attend --help");
  explain::AttentionCall c;
  const auto score = parse_score(a.score);
  if (!score)
    usage("--score '" + a.score +
          "' is unknown; expected scaled-dot, dot, general, additive, laplace, cosine or uniform");
  c.options.score = *score;
  const auto normalize = parse_normalize(a.normalize);
  if (!normalize) usage("--normalize '" + a.normalize + "' is unknown; expected softmax or none");
  c.options.normalize = *normalize;
  const auto causal = parse_causal(a.causal);
  if (!causal) usage("--causal '" + a.causal + "' is unknown; expected top-left or bottom-right");
  c.options.causal = *causal;
  const auto path = parse_path(a.path);
  if (!path) usage("--path '" + a.path + "' is unknown; expected auto, fused or reference");
  c.options.path = *path;
  if (!a.scale.empty()) c.options.scale = parse_scale(a.scale);
  if (!a.key_lengths.empty()) c.options.key_lengths = parse_lengths(a.key_lengths);

  c.q = read_input("--query", a.query);
  c.k = read_input("--keys", a.keys);
  c.v = read_input("--values", a.values);
  if (!a.mask.empty()) c.options.mask = read_input("--mask", a.mask, InlineUse::mask);
  read_params(a, c);

  ArgumentNames names;
  const auto shown = [](const char* option, const std::string& argument) {
    return option + (" " + shown_argument(argument));
  };
  names.q = shown("--query", a.query), names.k = shown("--keys", a.keys);
  names.v = shown("--values", a.values), names.mask = shown("--mask", a.mask);
  names.key_lengths = "--key-lengths", names.scale = "--scale";
  if (c.options.score == Score::general) names.w = shown("--params", a.params[0]);
  if (c.options.score == Score::additive)
    names.w_q = shown("--params", a.params[0]), names.w_k = shown("--params", a.params[1]),
    names.v_param = shown("--params", a.params[2]);
  check_attention(c.q, c.k, c.v, c.options, names);

  c.query_labels = split_commas(a.query_labels);
  c.key_labels = split_commas(a.key_labels);
  auto check_labels = [](const std::vector<std::string>& labels, const std::string& option,
                         const std::string& of, int64_t rows) {
    if (!labels.empty() && static_cast<int64_t>(labels.size()) != rows)
      usage(option + " has " + std::to_string(labels.size()) + " labels but " + of + " has " +
            std::to_string(rows) + " rows; expected one label per row");
  };
  check_labels(c.query_labels, "--query-labels", names.q, c.q.dim(-2));
  check_labels(c.key_labels, "--key-labels", names.k, c.k.dim(-2));
  return c;
}

// The .npy outputs of a run: --out, --weights and --lse, those asked for.
std::vector<std::pair<OutputPath, std::string>> npy_outputs(const AttendArgs& a,
                                                            const AttentionResult& r) {
  std::vector<std::pair<OutputPath, std::string>> files;
  for (const auto& [option, path, tensor] :
       {std::tuple{"--out", &a.out, &r.out}, std::tuple{"--weights", &a.weights, &r.weights},
        std::tuple{"--lse", &a.lse, &r.logsumexp}})
    if (!path->empty()) files.push_back({{option, *path}, encode_npy(*tensor)});
  return files;
}

// The first element of t that is NaN or ±∞, as "[i, j, ...]"; empty when every one is finite.
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

// The inputs that hold NaN or ∞, as "--query (first at [0, 3])"; a mask's −∞ only masks.
std::vector<std::string> non_finite_inputs(const explain::AttentionCall& c) {
  std::vector<std::string> found;
  auto look = [&](const std::string& name, const Tensor& t) {
    const std::string at = first_non_finite(t);
    if (!at.empty()) found.push_back(name + " (first at " + at + ")");
  };
  look("--query", c.q), look("--keys", c.k), look("--values", c.v);
  const ScoreParams& p = c.options.params;
  look("--params W", p.w), look("--params W_q", p.w_q), look("--params W_k", p.w_k);
  look("--params v", p.v);
  const Tensor& m = c.options.mask;
  if (m.defined() && m.dtype() != DType::b8)
    for (int64_t i = 0; i < m.numel(); ++i)
      if (std::isnan(m.value(i)) || m.value(i) == std::numeric_limits<double>::infinity()) {
        found.push_back("--mask (NaN or +∞ at " + std::to_string(i) + ")");
        break;
      }
  return found;
}

// NaN in, NaN out is a result (docs/CONVENTIONS.md §1.4), shown as NaN with this note; NaN from
// finite inputs is an overflow (qkv/attention.h) and an error, never printed as a result.
std::string non_finite_note(const explain::AttentionCall& c) {
  const auto found = non_finite_inputs(c);
  if (found.empty()) return "";
  std::string names;
  for (const std::string& f : found) names += (names.empty() ? "" : ", ") + f;
  return "note: NaN or ∞ in " + names + ": the rows that read them are NaN (NaN in, NaN out)\n";
}

void check_overflow(const explain::AttentionCall& c, const AttentionResult& r) {
  if (!non_finite_inputs(c).empty()) return;
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

bool same_values(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (a.value(i) != b.value(i)) return false;
  return true;
}

// Whether two runs of an example start from the same Q, K, V (and the same projections).
bool same_inputs(const explain::AttentionCall& a, const explain::AttentionCall& b) {
  if (a.projections.size() != b.projections.size()) return false;
  for (std::size_t i = 0; i < a.projections.size(); ++i)
    if (!same_values(a.projections[i].weight, b.projections[i].weight)) return false;
  return same_values(a.q, b.q) && same_values(a.k, b.k) && same_values(a.v, b.v);
}

// The options a run of --example uses; the others are usage errors there.
constexpr std::array<std::string_view, 4> kExampleTakes = {"--example", "--json", "--html",
                                                           "--digits"};

int run_example(const AttendArgs& a) {
  // An example fixes its own inputs, score, scale, mask and normalization and is always shown
  // step by step, so everything but the views (--json, --html, --digits) would be ignored.
  for (const std::string& option : a.given)
    if (std::find(kExampleTakes.begin(), kExampleTakes.end(), option) == kExampleTakes.end())
      usage("--example " + a.example + " cannot honour " + option +
            " (an example sets its own inputs and options); expected --example NAME with only "
            "--json, --html or --digits");
  if (a.example == "list") {
    for (const Example& e : examples())
      std::cout << pad_right(e.name, 10) << "  " << e.title << "\n";
    return 0;
  }
  const Example& e = find_example(a.example);
  check_outputs({{"--html", a.html}});
  const explain::StepOptions ro{.digits = a.digits, .top = a.top};
  nlohmann::json runs = nlohmann::json::array();
  std::vector<AttentionResult> results;
  std::string text = e.name + " — " + e.title + "\n";
  for (const std::string& line : e.story) text += "  " + line + "\n";
  for (std::size_t i = 0; i < e.runs.size(); ++i) {
    const explain::AttentionCall& c = e.runs[i];
    const AttentionResult& r = results.emplace_back(run_case(c));
    explain::StepOptions this_run = ro;
    this_run.same_inputs_as_before = i > 0 && same_inputs(c, e.runs[i - 1]);
    runs.push_back(explain::to_json(c, r));
    text += "\n━━ Run " + std::to_string(i + 1) + " of " + std::to_string(e.runs.size()) + ": " +
            c.caption + "\n";
    text += explain_steps(c, r, this_run);
  }
  if (!e.takeaway.empty()) text += "\n" + wrap("What it shows: " + e.takeaway, 96, 2) + "\n";
  if (!a.html.empty())
    write_all({{{"--html", a.html},
                explain::html_report(
                    explain::report_of(e.name + " — " + e.title, e.story, e.runs, results))}});
  if (a.json)
    std::cout << nlohmann::json{{"example", e.name},
                                {"title", e.title},
                                {"story", e.story},
                                {"runs", runs},
                                {"takeaway", e.takeaway}}
                     .dump(2)
              << "\n";
  else
    std::cout << text;
  return 0;
}

}  // namespace

CLI::App* add_attend_command(CLI::App& app, AttendArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "attend", "run attention, softmax(scale · score(Q, K) + mask) · V, and explain each step");
  cmd->footer(kFooter);
  cmd->add_option("--query", a.query, "queries, [B, Hq, L, Dq]")->type_name("Q.npy");
  cmd->add_option("--keys", a.keys, "keys, [B, Hkv, S, Dk]")->type_name("K.npy");
  cmd->add_option("--values", a.values, "values, [B, Hkv, S, Dv]")->type_name("V.npy");
  cmd->add_option("--score", a.score,
                  "scaled-dot | dot | general | additive | laplace | cosine | uniform")
      ->type_name("NAME")
      ->capture_default_str();
  cmd->add_option("--scale", a.scale,
                  "multiplies every score (default: 1/√Dk for scaled-dot, else 1)")
      ->check(finite_number())
      ->type_name("S");
  cmd->add_option("--normalize", a.normalize, "softmax | none")
      ->type_name("HOW")
      ->capture_default_str();
  cmd->add_option("--causal", a.causal, "top-left | bottom-right")->type_name("ALIGN");
  cmd->add_option("--mask", a.mask,
                  "bool (true = may attend) or float (added), broadcast to "
                  "[B, Hq, L, S]")
      ->type_name("M.npy");
  cmd->add_option("--key-lengths", a.key_lengths, "valid keys per batch, e.g. 3,5")
      ->type_name("N,...");
  // Up to three values, and no splitting of "[a,b]" into a list (CLI11 does that for a vector
  // option with extra arguments allowed), so that an inline matrix reaches us whole.
  cmd->add_option("--params", a.params, "general: W; additive: W_q W_k v")
      ->type_name("P.npy")
      ->expected(1, 3)
      ->allow_extra_args(false);
  // Labels reach --json and --html: UTF-8, as JSON and HTML need.
  cmd->add_option("--query-labels", a.query_labels, "a label per query row")
      ->check(utf8_text())
      ->type_name("a,b,..");
  cmd->add_option("--key-labels", a.key_labels, "a label per key row")
      ->check(utf8_text())
      ->type_name("x,y,..");
  cmd->add_option("--out", a.out, "write the output [B, Hq, L, Dv]")->type_name("O.npy");
  cmd->add_option("--weights", a.weights, "write the weights [B, Hq, L, S]")->type_name("W.npy");
  cmd->add_option("--lse", a.lse, "write the logsumexp [B, Hq, L]")->type_name("LSE.npy");
  cmd->add_option("--path", a.path,
                  "auto | fused | reference: which kernel computes --out and --lse (fused: "
                  "float32 scaled-dot/dot softmax; the explanation always uses the float64 "
                  "reference)")
      ->capture_default_str()
      ->type_name("PATH");
  cmd->add_flag("--json", a.json, "print everything as JSON instead of text");
  cmd->add_option("--html", a.html,
                  "also write one self-contained HTML report: heatmap, lines, step view (offline)")
      ->type_name("FILE");
  cmd->add_option("--example", a.example,
                  "a built-in worked example such as phonebook, lsi or recommend, or 'list' for "
                  "all " +
                      count_word(examples().size()) +
                      "; only --json, --html and --digits apply with it")
      ->type_name("NAME");
  cmd->add_option("--digits", a.digits, "decimals in printed numbers (0 to 12)")
      ->type_name("N")
      ->capture_default_str()
      ->transform(integer({.lo = 0, .hi = 12}));
  cmd->add_option("--top", a.top, "keys listed per query in a summary (1 to 100)")
      ->type_name("K")
      ->capture_default_str()
      ->transform(integer({.lo = 1, .hi = 100}));
  add_memory_limit_option(*cmd, a.memory_limit, "the L×S matrices of --weights, --json and --html");
  cmd->parse_complete_callback([cmd, &a] {
    a.given.clear();
    for (const CLI::Option* option : cmd->get_options())
      if (option->count() > 0) a.given.push_back(option->get_name());
  });
  return cmd;
}

namespace {

// Every output can be written, no two are one file and none replaces an input (--keys k.npy
// --out k.npy), before any input is read.
void check_attend_outputs(const AttendArgs& a) {
  std::vector<InputPath> inputs;
  auto input = [&](const char* option, const std::string& argument) {
    if (!is_inline_matrix(argument)) inputs.push_back({option, argument});
  };
  input("--query", a.query), input("--keys", a.keys), input("--values", a.values);
  input("--mask", a.mask);
  for (const std::string& p : a.params) input("--params", p);
  check_outputs({{"--out", a.out}, {"--weights", a.weights}, {"--lse", a.lse}, {"--html", a.html}},
                inputs);
}

// The report embeds every logit and weight (float32): bounded before anything is written. Only
// --weights, --json, --html and the step-by-step view need every weight, score and logit (the
// float64 reference, L×S); they say what that costs before it starts.
void check_attend_size(const AttendArgs& a, const explain::AttentionCall& c, bool whole) {
  const int64_t weights = weight_count(c);
  constexpr int64_t kMaxReportWeights = int64_t{1} << 21;
  if (!a.html.empty() && weights > kMaxReportWeights)
    usage("--html: " + std::to_string(weights) +
          " attention weights are too many for one report (" + "at most " +
          std::to_string(kMaxReportWeights) + "); expected fewer queries or keys");
  const int64_t limit = a.memory_limit.empty() ? default_memory_limit()
                                               : parse_bytes("--memory-limit", a.memory_limit);
  if (!whole) return;
  const int64_t need = reference_bytes(c, a.json);
  if (need <= limit) return;
  const std::string what = !a.weights.empty() ? "--weights" : a.json ? "--json" : "--html";
  usage(what + " needs all " + grouped(weights) + " attention weights, scores and " +
        "logits in memory: about " + bytes_str(need) + ", over the limit of " + bytes_str(limit) +
        " (" + memory_limit_knob(a.memory_limit) +
        "); expected fewer queries or keys, or only --out " +
        "and --lse, which need no L×S memory");
}

// The attention as a terminal reads it: the call's settings, then each step or the summary, then
// the files written.
void print_attend(const AttendArgs& a, const explain::AttentionCall& c, const AttentionResult& r,
                  Path path, bool step_by_step, const std::vector<AttentionResult>& first) {
  const explain::StepOptions ro{.digits = a.digits, .top = a.top};
  std::cout << "attention: score " << to_string(c.options.score) << ", scale "
            << short_number(effective_scale(c)) << ", " << to_string(c.options.normalize)
            << (c.options.causal != Causal::none
                    ? ", causal " + std::string(to_string(c.options.causal))
                    : std::string())
            << ", output by the " << to_string(path) << " path\n";
  std::cout << non_finite_note(c);
  std::cout << (step_by_step ? explain_steps(c, r, ro) : summarize(c, first, ro));
  for (const auto& [file, tensor] :
       {std::pair{a.out, &r.out}, std::pair{a.weights, &r.weights}, std::pair{a.lse, &r.logsumexp}})
    if (!file.empty())
      std::cout << "wrote " << printable(file) << "  " << shape_str(tensor->shape()) << " "
                << dtype_name(tensor->dtype()) << "\n";
}

}  // namespace

int run_attend(const AttendArgs& a) {
  if (!a.example.empty()) return run_example(a);
  check_attend_outputs(a);
  const explain::AttentionCall c = case_from_files(a);
  const bool step_by_step = fits_step_by_step(c);
  const bool whole = step_by_step || !a.weights.empty() || a.json || !a.html.empty();
  check_attend_size(a, c, whole);

  // --out and --lse from the chosen path (the fused kernel where it applies, unless --path says
  // otherwise); the explanation from the float64 reference.
  AttentionOptions chosen = c.options;
  chosen.need_logsumexp = true;
  const Path path = chosen_path(c.q, c.k, c.v, chosen);
  AttentionResult r;
  if (whole) r = run_case(c);
  if (path == Path::fused || !whole) {
    const AttentionResult computed = attention(c.q, c.k, c.v, chosen);
    r.out = computed.out;
    r.logsumexp = computed.logsumexp;
  }
  // The summary: the first rows of the first heads, each run on its own.
  std::vector<AttentionResult> first;
  if (!step_by_step)
    for (int64_t pair = 0; pair < std::min(head_pairs(c), explain::kSummaryPairs); ++pair)
      first.push_back(run_case(first_rows(c, pair, std::min(c.q.dim(-2), explain::kSummaryRows))));
  check_overflow(c, r);

  std::vector<std::pair<OutputPath, std::string>> outputs = npy_outputs(a, r);
  if (!a.html.empty())
    outputs.push_back({{"--html", a.html},
                       explain::html_report(explain::report_of(
                           "qkv attend",
                           {"queries " + shown_argument(a.query) + ", keys " +
                            shown_argument(a.keys) + ", values " + shown_argument(a.values)},
                           {c}, {r}))});
  write_all(outputs);  // every file or none, before anything is printed
  if (a.json) {
    nlohmann::json j = explain::to_json(c, r);
    j["path"] = to_string(path);
    std::cout << j.dump() << "\n";
    return 0;
  }
  print_attend(a, c, r, path, step_by_step, first);
  return 0;
}

}  // namespace qkv::cli
