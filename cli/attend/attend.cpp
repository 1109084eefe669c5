// `qkv attend`: load or pick the inputs, run the reference attention, show or write the results.
#include "attend/attend.h"

#include <algorithm>
#include <array>
#include <iostream>
#include <string_view>
#include <tuple>

#include "memory.h"
#include "options.h"
#include "output.h"
#include "qkv/files.h"
#include "qkv/npy.h"
#include "qkv/terminal.h"

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
    "             --params Wq.npy Wk.npy v.npy --json\n"
    "  qkv attend --query Q.npy --keys K.npy --values V.npy --precision bf16 --out O.npy\n";

[[noreturn]] void usage(const std::string& message) { throw Error(message); }

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

// The options a run of --example uses; the others are usage errors there.
constexpr std::array<std::string_view, 4> kExampleTakes = {"--example", "--json", "--html",
                                                           "--digits"};

// --example NAME: "list" is the command's own, every other name the library's.
const explain::Example& example_named(const std::string& name) {
  try {
    return explain::find_example(name);
  } catch (const FieldError& e) {
    usage(e.message(option_of) + " (or list)");
  }
}

int run_example(const AttendArgs& a) {
  // An example fixes its own inputs, score, scale, mask and normalization and is always shown
  // step by step, so everything but the views (--json, --html, --digits) would be ignored.
  for (const std::string& option : a.given)
    if (std::find(kExampleTakes.begin(), kExampleTakes.end(), option) == kExampleTakes.end())
      usage("--example " + a.example + " cannot honour " + option +
            " (an example sets its own inputs and options); expected --example NAME with only "
            "--json, --html or --digits");
  if (a.example == "list") {
    std::cout << explain::example_list();
    return 0;
  }
  const explain::Example& e = example_named(a.example);
  check_outputs({{"--html", a.html}});
  const std::vector<AttentionResult> results = explain::run_example(e);
  if (!a.html.empty())
    write_and_say({{{"--html", a.html},
                    explain::html_report(
                        explain::report_of(e.name + " — " + e.title, e.story, e.runs, results))}});
  if (a.json)
    std::cout << explain::json_of(e, results, 2) << "\n";
  else
    std::cout << explain::explain_example(e, results, {.digits = a.digits, .top = a.top});
  return 0;
}

}  // namespace

CLI::App* add_attend_command(CLI::App& app, AttendArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "attend", "run attention, softmax(scale · score(Q, K) + mask) · V, and explain each step");
  cmd->footer(kFooter);
  cmd->add_option("--query", a.call.query, "queries, [B, Hq, L, Dq]")->type_name("Q.npy");
  cmd->add_option("--keys", a.call.keys, "keys, [B, Hkv, S, Dk]")->type_name("K.npy");
  cmd->add_option("--values", a.call.values, "values, [B, Hkv, S, Dv]")->type_name("V.npy");
  cmd->add_option("--score", a.call.score,
                  "scaled-dot | dot | general | additive | laplace | cosine | uniform")
      ->type_name("NAME")
      ->capture_default_str();
  cmd->add_option("--scale", a.call.scale,
                  "multiplies every score (default: 1/√Dk for scaled-dot, else 1)")
      ->check(finite_number())
      ->type_name("S");
  cmd->add_option("--normalize", a.call.normalize, "softmax | none")
      ->type_name("HOW")
      ->capture_default_str();
  cmd->add_option("--causal", a.call.causal, "top-left | bottom-right")->type_name("ALIGN");
  cmd->add_option("--mask", a.call.mask,
                  "bool (true = may attend) or float (added), broadcast to "
                  "[B, Hq, L, S]")
      ->type_name("M.npy");
  cmd->add_option("--key-lengths", a.call.key_lengths, "valid keys per batch, e.g. 3,5")
      ->type_name("N,...");
  // Up to three values, and no splitting of "[a,b]" into a list (CLI11 does that for a vector
  // option with extra arguments allowed), so that an inline matrix reaches us whole.
  cmd->add_option("--params", a.call.params, "general: W; additive: W_q W_k v")
      ->type_name("P.npy")
      ->expected(1, 3)
      ->allow_extra_args(false);
  // Labels reach --json and --html: UTF-8, as JSON and HTML need.
  cmd->add_option("--query-labels", a.call.query_labels, "a label per query row")
      ->check(utf8_text())
      ->type_name("a,b,..");
  cmd->add_option("--key-labels", a.call.key_labels, "a label per key row")
      ->check(utf8_text())
      ->type_name("x,y,..");
  cmd->add_option("--out", a.out, "write the output [B, Hq, L, Dv]")->type_name("O.npy");
  cmd->add_option("--weights", a.weights, "write the weights [B, Hq, L, S]")->type_name("W.npy");
  cmd->add_option("--lse", a.lse, "write the logsumexp [B, Hq, L]")->type_name("LSE.npy");
  cmd->add_option("--path", a.call.path,
                  "auto | fused | reference | cuda: which kernel computes --out and --lse "
                  "(fused: float32 scaled-dot/dot softmax; cuda: the same on an NVIDIA GPU; "
                  "the explanation always uses the float64 reference)")
      ->capture_default_str()
      ->type_name("PATH");
  cmd->add_option("--precision", a.call.precision,
                  "fp32 | bf16: bf16 rounds q, k, v and the weights to bfloat16 before the "
                  "float32 products (faster where the CPU has bf16, less exact: "
                  "docs/CONVENTIONS.md §1.1b), e.g. --precision bf16")
      ->capture_default_str()
      ->type_name("P");
  cmd->add_flag("--json", a.json, "print everything as JSON instead of text");
  cmd->add_option("--html", a.html,
                  "also write one self-contained HTML report: heatmap, lines, step view (offline)")
      ->type_name("FILE");
  cmd->add_option("--example", a.example,
                  "a built-in worked example such as phonebook, lsi or recommend, or 'list' for "
                  "all " +
                      count_word(explain::examples().size()) +
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

// The report embeds every logit and weight (float32): bounded before anything is written. Only
// --weights, --json, --html and the step-by-step view need every weight, score and logit (the
// float64 reference, L×S); they say what that costs before it starts.
void check_attend_size(const AttendArgs& a, const explain::AttentionCall& c, bool whole) {
  const int64_t weights = weight_count(c);
  constexpr int64_t kMaxReportWeights = int64_t{1} << 21;
  if (!a.html.empty() && weights > kMaxReportWeights)
    usage("--html: " + std::to_string(weights) +
          " attention weights are too many for one report (at most " +
          std::to_string(kMaxReportWeights) + "); expected fewer queries or keys");
  const int64_t limit = memory_limit(a.memory_limit);
  const int64_t need = whole ? reference_bytes(c, a.json) : 0;
  if (need <= limit) return;
  const std::string what = !a.weights.empty() ? "--weights" : a.json ? "--json" : "--html";
  usage(what + " needs all " + grouped(weights) + " attention weights, scores and logits in " +
        "memory: about " + bytes_str(need) + ", over the limit of " + bytes_str(limit) + " (" +
        memory_limit_knob(a.memory_limit) +
        "); expected fewer queries or keys, or only --out and --lse, which need no L×S memory");
}

// The attention as a terminal reads it: the call's settings, then each step or the summary, then
// the files written.
void print_attend(const AttendArgs& a, const explain::AttentionCall& c,
                  const explain::Attended& run) {
  const explain::StepOptions o{.digits = a.digits, .top = a.top};
  const AttentionResult& r = run.result;
  std::cout << explain::call_heading(c, run.path) << explain::non_finite_note(c, option_of)
            << (run.first.empty() ? explain_steps(c, r, o) : summarize(c, run.first, o));
  for (const auto& [file, tensor] :
       {std::pair{a.out, &r.out}, std::pair{a.weights, &r.weights}, std::pair{a.lse, &r.logsumexp}})
    if (!file.empty())
      std::cout << "wrote " << printable(file) << "  " << shape_str(tensor->shape()) << " "
                << dtype_name(tensor->dtype()) << "\n";
}

}  // namespace

int run_attend(const AttendArgs& a) {
  if (!a.example.empty()) return run_example(a);
  if (a.call.query.empty() || a.call.keys.empty() || a.call.values.empty())
    usage(
        "expected --query, --keys and --values (.npy files or inline matrices such as "
        "\"[[1, 0], [0, 1]]\"), or --example NAME; see qkv attend --help");
  // Every output can be written, no two are one file and none replaces an input (--keys k.npy
  // --out k.npy), before any input is read. The library's errors name fields, shown as options
  // (cli/main.cpp).
  std::vector<InputPath> inputs;
  for (const auto& [field, path] : explain::input_files(a.call))
    inputs.push_back({option_of(field), path});
  check_outputs({{"--out", a.out}, {"--weights", a.weights}, {"--lse", a.lse}, {"--html", a.html}},
                inputs);
  const explain::AttentionCall c = explain::call_from(a.call);
  const bool whole = fits_step_by_step(c) || !a.weights.empty() || a.json || !a.html.empty();
  check_attend_size(a, c, whole);
  const explain::Attended run = explain::attend(c, whole);

  std::vector<std::pair<OutputPath, std::string>> outputs = npy_outputs(a, run.result);
  const auto shown = [](const std::string& argument) { return explain::shown_argument(argument); };
  if (!a.html.empty())
    outputs.push_back({{"--html", a.html},
                       explain::html_report(explain::report_of(
                           "qkv attend",
                           {"queries " + shown(a.call.query) + ", keys " + shown(a.call.keys) +
                            ", values " + shown(a.call.values)},
                           {c}, {run.result}))});
  // Every file or none, before anything is printed; the .npy files are said with their shapes.
  write_and_say(outputs, {"--out", "--weights", "--lse"});
  if (a.json) {
    std::cout << explain::json_of(c, run.result, {.path = run.path}) << "\n";
    return 0;
  }
  print_attend(a, c, run);
  return 0;
}

}  // namespace qkv::cli
