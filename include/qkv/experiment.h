// qkv/experiment.h — `qkv experiment NAME`: design questions about attention answered by training
// small models side by side (fixed seeds) and measuring.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace qkv {

// The experiments:
//
//   tie-qk   W_Q = W_K (symmetric QKᵀ) against separate projections
//   no-wv    identity W_V, no W_O, against learned ones
//   scale    softmax(QKᵀ/√d_k) against softmax(QKᵀ) as d_k grows
//   heads    1, 2, 4, 8 heads at the same d_model
//   scores   scaled-dot, additive, general, laplace, cosine scoring on one task

// Where an experiment stands, after every training step: which run of how many, its step.
struct ExperimentProgress {
  std::string label;            // the run, e.g. "tied W_Q = W_K (seed 1)"
  int64_t run = 0, runs = 0;    // 1-based index of this training run, and how many there are
  int64_t step = 0, steps = 0;  // this run's steps done, and its steps
  double seconds = 0;           // since the experiment began
};

struct ExperimentOptions {
  // Smaller tasks and fewer steps, chosen so that each experiment still reads the same direction
  // as its full run (tests/golden/experiments holds the full runs; a test compares them).
  bool quick = false;
  std::function<void(const std::string&)> progress;              // hears a line per training run
  std::function<void(const ExperimentProgress&)> step_progress;  // hears every training step
};

struct ExperimentResult {
  std::string name, question, setup;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;  // formatted cells
  std::string reading;                         // one paragraph: what the table says
  double seconds = 0;
};

std::vector<std::string> experiment_names();
// Throws qkv::Error (usage) for an unknown name, listing the known ones.
ExperimentResult run_experiment(const std::string& name, const ExperimentOptions& options);

// What `qkv experiment` shows: the result as text (the question, the setup, the table, the
// reading, the time) and as one line of JSON ({experiment, question, setup, rows (an object a row,
// keyed by column), reading, seconds, quick}); and a run's progress, "experiment heads: run 3/8,
// 4 head(s) (seed 1), step 400/1000, ETA 1m20s" (the ETA assumes the runs left take as long a
// step as the ones done: rough, the widths and scores differ).
std::string experiment_text(const ExperimentResult& result);
std::string experiment_json(const ExperimentResult& result, bool quick);
std::string experiment_progress_line(const std::string& name, const ExperimentProgress& progress);

}  // namespace qkv
