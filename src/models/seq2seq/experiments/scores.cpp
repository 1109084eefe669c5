// `qkv experiment scores`: each classic score(q, k) on one task.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runner.h"

namespace qkv::experiments {

namespace {

// What the quick run leaves out, as the committed full run measured it
// (tests/golden/experiments/scores.json, made by tests/golden/make_experiment_readings.sh on one
// thread; tests/cli/experiment_readings_test.cpp checks these numbers against that file).
constexpr const char* kFullRunOfTheUntrained =
    "General and laplace, from the full run (qkv experiment scores: lengths 8–16, 1,000 steps, "
    "14 minutes on one idle core; its table in README.md and "
    "tests/golden/experiments/scores.json): general 96.7% and laplace 95.3%, neither at 99% "
    "by step 1,000, where scaled-dot reached 100.0% (99% at step 1,000) and additive 100.0% "
    "(at step 600).";

}  // namespace

ExperimentResult scores(Runner& run) {
  const ExperimentOptions& o = run.options;
  ExperimentResult r{.name = "scores",
                     .question =
                         "Does the scoring function matter? The same model and task "
                         "with each classic score(q, k)."};
  Setup s = sequence_setup("reverse", o.quick);
  s.seeds = {1};
  r.setup = setup_str(s) +
            "; scaled-dot runs the fused float32 kernel, the others the float64 "
            "reference (so their speed is not comparable kernel for kernel).";
  // Quick: the full run's best, its baseline and its worst (tests/golden/experiments/scores.json),
  // which 300 steps already rank the same way; general and laplace need the full run's steps.
  const std::vector<Score> trained =
      o.quick ? std::vector<Score>{Score::scaled_dot, Score::additive, Score::cosine}
              : std::vector<Score>{Score::scaled_dot, Score::additive, Score::general,
                                   Score::laplace, Score::cosine};
  if (o.quick)
    r.setup +=
        " The quick run trains scaled-dot, additive and cosine only (\"·\": general and "
        "laplace are still far from trained after 300 steps; the reading ends with the full "
        "run's numbers for them).";
  r.columns = {"score", "test accuracy", "steps to 99%", "tokens/s"};
  run.runs = static_cast<int64_t>(trained.size());
  // Best: the highest accuracy, then the fewest steps to 99%.
  std::optional<std::pair<double, double>> best;
  std::string best_name, best_steps;
  double cosine = -1;
  for (Score sc :
       {Score::scaled_dot, Score::additive, Score::general, Score::laplace, Score::cosine}) {
    const std::string name(to_string(sc));
    if (std::find(trained.begin(), trained.end(), sc) == trained.end()) {
      r.rows.push_back({name, "·", "·", "·"});
      continue;
    }
    const Summary m = train_seeds(s, {.score = sc}, run, name);
    r.rows.push_back(
        {name, pct(m.accuracy), steps_str(m.reached), fmt("%.0f", m.tokens_per_second)});
    const std::pair<double, double> key(m.accuracy,
                                        -static_cast<double>(m.reached.value_or(1'000'000'000)));
    if (!best || key > *best) best = key, best_name = name, best_steps = steps_str(m.reached);
    if (sc == Score::cosine) cosine = m.accuracy;
  }
  // Cosine logits lie in [−1, 1] at scale 1: over n keys the largest weight softmax can give is
  // e / (e + (n − 1)/e).
  const int64_t keys = make_task(s.task, s.task_options).max_source_length();
  const double e = std::exp(1.0);
  r.reading =
      "Best: " + best_name + " (" + pct(best->first) +
      (best_steps != "—" ? ", 99% at step " + best_steps : std::string()) +
      "). All five can express \"find the matching position\"; they differ in how the match is "
      "measured. A dot product grows with the vectors' lengths, so training can sharpen it; "
      "additive learns a small MLP per pair, at a much higher cost per token. Cosine ignores "
      "length: at scale 1 its logits lie in [−1, 1], and over the " +
      std::to_string(keys) + " keys of the longest sources no weight can pass e/(e + " +
      std::to_string(keys - 1) +
      "/e) = " + fmt("%.2f", e / (e + static_cast<double>(keys - 1) / e)) +
      " — it cannot point at one position (" + pct(cosine) +
      ") without a learned temperature. Laplace scores by L1 distance. The dot product wins in "
      "practice mostly on speed: it is one matrix product, fused here.";
  if (o.quick) r.reading += std::string("\n\n") + kFullRunOfTheUntrained;
  return r;
}

}  // namespace qkv::experiments
