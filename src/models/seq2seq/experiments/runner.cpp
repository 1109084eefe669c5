// The experiments' shared machinery (runner.h) and `run_experiment`, which picks one by name.
#include "runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace qkv {
namespace experiments {

std::string fmt(const char* format, double x) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, x);
  return buffer;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {

// One model trained and tested.
struct Run {
  double accuracy = 0;             // greedy decoding on the held-out test set
  std::optional<int64_t> reached;  // the step whose evaluation reached 99%
  double seconds = 0, tokens_per_second = 0, final_loss = 0;
  std::shared_ptr<Seq2Seq> model;
};

Run train_once(const Setup& s, uint64_t seed, const nn::MultiHeadAttentionOptions& attention,
               Runner& runner, const std::string& label) {
  const ExperimentOptions& options = runner.options;
  const Task task = make_task(s.task, s.task_options);
  Seq2SeqConfig config = config_for(task, s.layers, s.heads, s.d_model);
  config.attention = attention;
  const std::shared_ptr<Seq2Seq> model = make_model(config, seed);
  TrainOptions t;
  t.steps = s.steps;
  t.batch_size = s.batch;
  t.seed = seed;
  t.eval_examples = 200;
  t.test_examples = kTestExamples;
  t.target_accuracy = 2;  // never stop early: every variant gets the same steps
  const std::string run_label = label + " (seed " + std::to_string(seed) + ")";
  ++runner.run;
  if (options.progress) options.progress(run_label);
  ProgressFn step_progress;
  if (options.step_progress)
    step_progress = [&](const TrainProgress& p) {
      options.step_progress({.label = run_label,
                             .run = runner.run,
                             .runs = std::max(runner.runs, runner.run),
                             .step = p.step,
                             .steps = p.steps,
                             .seconds = now() - runner.start});
    };
  const TrainSummary summary = train(*model, task, t, step_progress);
  Run r{.accuracy = summary.test_accuracy,
        .seconds = summary.wall_seconds,
        .tokens_per_second = summary.tokens_per_second,
        .final_loss = summary.final_loss};
  for (const EvalPoint& p : summary.history)
    if (p.accuracy >= 0.99) {
      r.reached = p.step;
      break;
    }
  r.model = model;
  return r;
}

}  // namespace

Summary train_seeds(const Setup& s, const nn::MultiHeadAttentionOptions& attention, Runner& runner,
                    const std::string& label) {
  Summary out;
  std::vector<int64_t> reached;
  bool all = true;
  for (uint64_t seed : s.seeds) {
    const Run r = train_once(s, seed, attention, runner, label);
    out.accuracy += r.accuracy / static_cast<double>(s.seeds.size());
    out.seconds += r.seconds / static_cast<double>(s.seeds.size());
    out.tokens_per_second += r.tokens_per_second / static_cast<double>(s.seeds.size());
    out.models.push_back(r.model);
    if (r.reached)
      reached.push_back(*r.reached);
    else
      all = false;
  }
  if (all && !reached.empty()) out.reached = *std::max_element(reached.begin(), reached.end());
  return out;
}

std::string steps_str(const std::optional<int64_t>& s) { return s ? std::to_string(*s) : "—"; }
std::string pct(double x) { return fmt("%.1f%%", 100 * x); }

Setup sequence_setup(const std::string& task, bool quick) {
  Setup s{.task = task};
  if (quick) {  // the same model on shorter sequences, one seed, a third of the steps
    s.task_options = {.min_length = 6, .max_length = 10, .symbols = 12};
    s.steps = 300;
  } else {  // the task's defaults (reverse: lengths 8–16, 20 symbols): ~700 steps to 99%
    s.steps = 1000;
    s.seeds = {1, 2};
  }
  return s;
}

std::string setup_str(const Setup& s) {
  return "task " + s.task + ", " + std::to_string(s.layers) + " layer(s), d_model " +
         std::to_string(s.d_model) + ", " + std::to_string(s.heads) + " heads, " +
         std::to_string(s.steps) + " steps of batch " + std::to_string(s.batch) + ", seeds " +
         std::to_string(s.seeds.size());
}

}  // namespace experiments

std::vector<std::string> experiment_names() {
  return {"tie-qk", "no-wv", "scale", "heads", "scores"};
}

ExperimentResult run_experiment(const std::string& name, const ExperimentOptions& options) {
  const double start = experiments::now();
  experiments::Runner run{.options = options};
  ExperimentResult r;
  if (name == "tie-qk")
    r = experiments::tie_qk(run);
  else if (name == "no-wv")
    r = experiments::no_wv(run);
  else if (name == "scale")
    r = experiments::scale(run);
  else if (name == "heads")
    r = experiments::heads(run);
  else if (name == "scores")
    r = experiments::scores(run);
  else {
    std::string known;
    for (const std::string& n : experiment_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("unknown experiment '" + name + "'; expected one of " + known);
  }
  r.seconds = experiments::now() - start;
  return r;
}

}  // namespace qkv
