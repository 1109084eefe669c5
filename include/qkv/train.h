// qkv/train.h — one training loop for every model qkv trains: the encoder–decoder models of
// qkv/seq2seq.h (transformer, rnnsearch) on the sequence tasks of qkv/tasks.h, and the Perceiver of
// qkv/perceiver.h on its task, count.
//
// The loop: AdamW with warmup, cosine decay to lr/10 and gradient clipping; (label-smoothed)
// cross-entropy; a held-out evaluation every eval_every steps with early stopping once it shows
// the target beyond doubt; a final test on held-out examples.
//
// Determinism: the initialization, the data and the dropout come from three streams of the seed
// (the same scheme for every model), the held-out sets from fixed seeds of their own, so the same
// seed and thread count give the same numbers, bit for bit.
//
// Errors about a value are FieldErrors (qkv/field_error.h) naming the field (`steps`,
// `batch_size`, `d_model`, ...); front ends name it as their users spell it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qkv/experiment.h"  // the experiments train variants side by side on this loop
#include "qkv/field_error.h"
#include "qkv/perceiver.h"
#include "qkv/seq2seq.h"

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
  int64_t test_examples = 1000;  // held-out examples of the final test

  void validate() const;  // a FieldError naming the first field out of range
};

// What the loop reports after every step.
struct TrainProgress {
  int64_t step = 0, steps = 0;  // steps done, steps at most
  double loss = 0;              // this step's mean cross-entropy (label-smoothed)
  // This step's argmax-right targets: the target tokens of a sequence task, the Perceiver's inputs.
  double token_accuracy = 0;
  std::optional<double> eval_accuracy;  // the latest held-out accuracy
  double seconds = 0;                   // since training began
  bool evaluated = false;               // an evaluation ran after this step
};
using ProgressFn = std::function<void(const TrainProgress&)>;

struct EvalPoint {
  int64_t step = 0;
  double accuracy = 0;  // held-out accuracy (sequences: exact, teacher-forced argmax)
  double loss = 0;      // the training loss averaged since the previous point
  double seconds = 0;
};

struct TrainSummary {
  std::string task;
  uint64_t seed = 0;
  int64_t steps = 0;                      // steps run
  std::optional<int64_t> reached_target;  // the first evaluation at or above the target
  bool stopped_early = false;             // an evaluation showed the target beyond doubt
  double final_loss = 0;                  // mean training loss of the last evaluation interval
  double test_accuracy = 0;  // on test_examples held-out examples (sequences: greedy decoding)
  int64_t test_examples = 0;
  std::optional<double> chance;  // a classifier's best accuracy without reading the input
  double train_seconds = 0;      // the training steps alone
  double wall_seconds = 0;       // everything: steps, evaluations, the final test
  int64_t tokens = 0;            // tokens (no padding) trained on; the Perceiver: input symbols
  double tokens_per_second = 0;  // tokens / train_seconds
  int64_t parameters = 0;
  std::vector<EvalPoint> history;
  std::vector<std::pair<Example, std::string>> mistakes;  // a few wrong test outputs
};

// What the loop needs of a model and its task.
class Trainable {
 public:
  struct Step {
    double loss = 0;
    int64_t correct = 0, count = 0;  // argmax-right targets of the batch, of how many
    int64_t tokens = 0;              // what the batch holds, padding not counted
  };
  virtual ~Trainable() = default;
  virtual const std::string& task() const = 0;
  virtual std::string task_description() const = 0;  // at the sizes it trains at
  virtual nn::Module& module() = 0;                  // the parameters trained
  // Forward and backward of one batch of options.batch_size training examples drawn from `data`
  // (dropout from `noise`): accumulates every parameter's gradient.
  virtual Step step(nn::Rng& data, nn::Rng& noise, const TrainOptions& options) = 0;
  // Accuracy on the first n examples of the task's fixed validation set.
  virtual double evaluate(int64_t n) = 0;
  // The final test on n examples of the fixed test set: test_accuracy, chance, mistakes.
  virtual void test(int64_t n, TrainSummary& summary) = 0;
  virtual void save(const std::string& path, const std::map<std::string, std::string>& extra) = 0;

  // What the front ends show of it: "transformer", "rnnsearch" or "perceiver"; its sizes by
  // field name, in order (layers, heads, d_model, ...); one line of text (continued with 13
  // spaces); a held-out input to try it on, when one is short enough to type.
  virtual std::string architecture() const = 0;
  virtual std::vector<std::pair<std::string, int64_t>> sizes() const = 0;
  virtual std::string description() = 0;
  virtual std::optional<std::string> sample_input() const = 0;
};

// Trains `model`; throws a FieldError for an option out of range.
TrainSummary train(Trainable& model, const TrainOptions& options, const ProgressFn& progress = {});
// The Trainables of the two families, over a model the caller keeps.
std::unique_ptr<Trainable> trainable(Seq2Seq& model, const Task& task);
std::unique_ptr<Trainable> trainable(Perceiver& model, const PerceiverTask& task);
// train(*trainable(model, task), ...).
TrainSummary train(Seq2Seq& model, const Task& task, const TrainOptions& options,
                   const ProgressFn& progress = {});
TrainSummary train(Perceiver& model, const PerceiverTask& task, const TrainOptions& options,
                   const ProgressFn& progress = {});

// ---- the tasks, and what trains them by default ----

struct TaskInfo {
  std::string name, description;
  std::vector<std::string> models;  // the models that train it, its default first
  TrainOptions options;             // its defaults (steps reach its target on a 2-core machine)
  int64_t layers = 2, heads = 4, d_model = 64;  // the Perceiver's layers: latent blocks
  int64_t length = 0, latents = 0;              // the Perceiver's (0: not this task's)
};
// Every task, the sequence tasks first, as `qkv train --help` lists them.
const std::vector<TaskInfo>& training_tasks();
// The task called `name`; otherwise a FieldError (field "task") listing the known ones.
const TaskInfo& training_task(const std::string& name);

// The models qkv trains, each with a paragraph on what it is and how it trains. The paragraph
// names fields as {field} (or {field=value}): FieldError::render spells them as a front end does.
struct TrainableModel {
  std::string name, description;
};
const std::vector<TrainableModel>& training_models();

// What a front end asks for; what it leaves unset takes the task's defaults. Sizes of another
// model (layers or heads of rnnsearch, length or latents of a sequence model) are refused.
struct TrainRequest {
  std::string task;
  std::string model;  // empty: the task's default
  std::optional<int64_t> layers, heads, d_model, length, latents;
  std::optional<int64_t> steps, batch_size, eval_every, test_examples;
  std::optional<double> lr, target_accuracy;
  std::optional<uint64_t> seed;
};

// A run checked and sized before anything is allocated.
struct TrainPlan {
  std::string task, model;
  TrainOptions options;  // the task's defaults with the request's values, checked
  std::optional<Seq2SeqConfig> seq2seq;
  std::optional<PerceiverConfig> perceiver;
  // Peak bytes of the training (qkv/memory.h); what it trains, for a message ("training this
  // transformer (2 layers, d_model 64, batch 64)"); and the fields that need less when smaller.
  int64_t bytes() const;
  std::string what() const;
  // "a smaller --layers, --d-model or --batch": the fields, as `name` spells them.
  std::string smaller(const FieldError::Namer& name) const;
  // A fresh model of the plan, initialized from seed's initialization stream.
  std::unique_ptr<Trainable> make(uint64_t seed) const;
};
// FieldErrors name the request's fields (task, model, layers, ..., steps, batch_size, ...).
TrainPlan plan_training(const TrainRequest& request);

// Saves a trained model with what was trained in its metadata ("qkv.steps", "qkv.seed",
// "qkv.test_accuracy": what `qkv explain --model` shows); trained_metadata() is that metadata.
std::map<std::string, std::string> trained_metadata(const TrainSummary& summary);
void save_trained(Trainable& model, const std::string& path, const TrainSummary& summary);

// ---- what a finished run shows (qkv train's output) ----
// The summary `qkv train` prints: as text (the model, the steps and whether the target was
// reached, loss, held-out accuracy, time, a few mistakes, and how to explain the model saved at
// `out`), and as one line of JSON. `threads` ran it; `out` is "" when nothing was saved.
std::string summary_text(const TrainSummary& summary, const TrainOptions& options, Trainable& model,
                         int threads, const std::string& out);
std::string summary_json(const TrainSummary& summary, const TrainOptions& options,
                         const Trainable& model, int threads, const std::string& out);

// ---- the sequence models' pieces ----

// A fresh model for `config`, initialized from seed's initialization stream.
std::unique_ptr<Seq2Seq> make_model(const Seq2SeqConfig& config, uint64_t seed,
                                    DType dtype = DType::f32);

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

}  // namespace qkv
