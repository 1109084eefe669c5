// qkv/train.h — training the encoder-decoder models of qkv/model.h on the built-in tasks, and
// the experiments that train one variant after another.
//
// Training a Seq2Seq on a Task: the loop (AdamW with warmup, cosine
// decay and gradient clipping; label-smoothed cross-entropy), periodic held-out evaluation with
// early stopping, and the final exact-sequence accuracy by greedy decoding.
//
// Determinism: the data, the initialization and the evaluation sets come from nn::Rng streams of
// the seed, so the same seed and thread count give the same numbers, bit for bit.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qkv/model.h"

namespace qkv {

struct TrainOptions {
  int64_t steps = 3000;          // at most; fewer when the target accuracy is reached
  int64_t batch_size = 64;       // examples a step
  double lr = 1e-3;              // peak learning rate (AdamW): warmup, then cosine to lr/10 at
                                 // `steps`
  int64_t warmup = -1;           // linear warmup steps; −1: min(200, steps / 10)
  double label_smoothing = 0.1;  // Szegedy et al. 2016
  double clip_norm = 1.0;        // global gradient norm; 0: none
  double weight_decay = 0.01;
  uint64_t seed = 1;
  // Stop once an evaluation shows the held-out accuracy at this beyond doubt: measured accuracy
  // minus 2 standard errors ≥ target (on 1,000 examples at 99% the standard error is 0.3%, and a
  // model stopped the moment it touches 99% tests below it about as often as above); > 1: never.
  double target_accuracy = 0.99;
  int64_t eval_every = 0;        // steps between evaluations; 0: min(100, max(10, steps / 10))
  int64_t eval_examples = 1000;  // held-out examples of each periodic evaluation
  int64_t test_examples = 1000;  // held-out examples of the final greedy-decoding test
};

// What the loop reports after every step.
struct TrainProgress {
  int64_t step = 0, steps = 0;          // steps done, steps at most
  double loss = 0;                      // this step's mean cross-entropy (label-smoothed)
  double token_accuracy = 0;            // this step's argmax-right target tokens
  std::optional<double> eval_accuracy;  // the latest held-out exact-sequence accuracy
  double seconds = 0;                   // since training began
  bool evaluated = false;               // an evaluation ran after this step
};
using ProgressFn = std::function<void(const TrainProgress&)>;

struct EvalPoint {
  int64_t step = 0;
  double accuracy = 0;  // held-out exact-sequence accuracy (teacher-forced argmax: see trainer.cpp)
  double loss = 0;      // the training loss averaged since the previous point
  double seconds = 0;
};

struct TrainSummary {
  std::string task;
  int64_t steps = 0;                      // steps run
  std::optional<int64_t> reached_target;  // the first evaluation at or above the target
  bool stopped_early = false;             // an evaluation showed the target beyond doubt
  double final_loss = 0;                  // mean training loss of the last evaluation interval
  double test_accuracy = 0;               // greedy decoding on test_examples held-out examples
  int64_t test_examples = 0;
  double train_seconds = 0;      // the training steps alone
  double wall_seconds = 0;       // everything: steps, evaluations, the final test
  int64_t tokens = 0;            // source + target tokens (no padding) trained on
  double tokens_per_second = 0;  // tokens / train_seconds
  int64_t parameters = 0;
  std::vector<EvalPoint> history;
  std::vector<std::pair<Example, std::string>> mistakes;  // a few wrong test outputs
};

// A fresh model for `config`, initialized from `seed`.
std::unique_ptr<Seq2Seq> make_model(const Seq2SeqConfig& config, uint64_t seed,
                                    DType dtype = DType::f32);

// Trains `model` on `task`; throws qkv::Error for bad options.
TrainSummary train(Seq2Seq& model, const Task& task, const TrainOptions& options,
                   const ProgressFn& progress = {});

// Exact-sequence accuracy with the true prefix fed in (one forward per batch). It equals greedy
// decoding's: if every position's argmax is right, greedy decoding reproduces the target step by
// step; if position k is the first wrong one, greedy decoding reaches it with the same prefix and
// goes wrong there too.
double teacher_forced_accuracy(Seq2Seq& model, const std::vector<Example>& examples,
                               int64_t batch_size = 256);
// Exact-sequence accuracy of greedy decoding; the outputs go to `outputs` when not null.
double greedy_accuracy(Seq2Seq& model, const std::vector<Example>& examples,
                       std::vector<std::string>* outputs = nullptr);

// The held-out sets, fixed for a task whatever the training seed: the periodic evaluation set
// and the final test set (different streams).
std::vector<Example> validation_set(const Task& task, int64_t n);
std::vector<Example> test_set(const Task& task, int64_t n);

// ---- experiments ----
// `qkv experiment NAME`: design questions about attention answered
// by training small models side by side (fixed seeds) and measuring.
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

}  // namespace qkv
