// What every `qkv experiment` shares: a setup, each seed trained and tested, the cells formatted.
// Each experiment (one file here) builds its table from these.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qkv/nn.h"
#include "qkv/train.h"

namespace qkv::experiments {

std::string fmt(const char* format, double x);  // snprintf of one number
double now();                                   // seconds, steady clock

// Held-out sequences each trained model is tested on (greedy decoding).
constexpr int64_t kTestExamples = 300;

struct Setup {
  std::string task;
  TaskOptions task_options;
  int64_t layers = 1, heads = 4, d_model = 64;
  int64_t steps = 1000, batch = 64;
  std::vector<uint64_t> seeds = {1};
};

// The experiment's options and its count of training runs, for the progress it reports.
struct Runner {
  const ExperimentOptions& options;
  int64_t runs = 0;  // set by each experiment before its first run
  int64_t run = 0;
  double start = now();
};

// Mean accuracy, the slowest seed's steps to 99% ("—" when a seed never got there), mean seconds.
struct Summary {
  double accuracy = 0, seconds = 0, tokens_per_second = 0;
  std::optional<int64_t> reached;                // empty if any seed missed
  std::vector<std::shared_ptr<Seq2Seq>> models;  // the trained models, one per seed
};

// Trains and tests `s` with `attention` once per seed (every variant gets the same steps: no early
// stop), reporting progress through runner.options under `label`.
Summary train_seeds(const Setup& s, const nn::MultiHeadAttentionOptions& attention, Runner& runner,
                    const std::string& label);

std::string steps_str(const std::optional<int64_t>& s);  // "700", or "—"
std::string pct(double x);                               // 0.953 → "95.3%"
// The full run: the task's defaults, 1,000 steps, seeds 1 and 2. Quick: lengths 6–10, 12
// symbols, 300 steps, seed 1.
Setup sequence_setup(const std::string& task, bool quick);
std::string setup_str(const Setup& s);  // "task reverse, 1 layer(s), d_model 64, ..."

ExperimentResult tie_qk(Runner& run);
ExperimentResult no_wv(Runner& run);
ExperimentResult scale(Runner& run);
ExperimentResult heads(Runner& run);
ExperimentResult scores(Runner& run);

}  // namespace qkv::experiments
