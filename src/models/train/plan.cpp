// The tasks qkv trains, each listed once with the models that train it and its defaults, and
// the plan of a run: the front end's choice checked field by field and sized, before anything
// is allocated.
#include <algorithm>

#include "models/train/trainables.h"
#include "qkv/train.h"

namespace qkv {

namespace {

// Defaults that reach the tasks' targets on a 2-core machine (measured: see README).
TaskInfo sequence_task(const std::string& name, int64_t steps) {
  TaskInfo t{.name = name, .description = make_task(name).description()};
  t.models = {"transformer", "rnnsearch"};
  t.options.steps = steps;
  return t;
}

// The Perceiver: no label smoothing, 500 held-out examples an evaluation (measured: 100% held-out
// after 900 steps, chance 10%).
TaskInfo count_task() {
  const PerceiverTask task = make_perceiver_task("count");
  TaskInfo t{.name = task.name, .description = task.description};
  t.models = {"perceiver"};
  t.options.steps = 1500;
  t.options.label_smoothing = 0;
  t.options.eval_examples = 500;
  t.length = task.length;
  t.latents = 16;
  return t;
}

std::string names(const std::vector<TaskInfo>& tasks) {
  std::string s;
  for (const TaskInfo& t : tasks) s += (s.empty() ? "" : ", ") + t.name;
  return s;
}

const std::vector<std::string> kModels = {"transformer", "rnnsearch", "perceiver"};

// Sizes of another model than `model` (one qkv trains) are refused, not ignored.
void refuse_others(const TrainRequest& c, const std::string& model) {
  const std::string as = "{model=" + model + "}";
  if (model != "perceiver" && (c.length || c.latents))
    throw FieldError(c.length ? "length" : "latents",
                     c.length ? "{length} applies to {model=perceiver} only (the length of its "
                                "input); " +
                                    as +
                                    " takes its lengths from the task; expected no "
                                    "{length}"
                              : "{latents} applies to {model=perceiver} only (its latent "
                                "queries); " +
                                    as + " has none; expected no {latents}");
  if (model == "rnnsearch" && (c.layers || c.heads))
    throw FieldError(c.layers ? "layers" : "heads",
                     std::string(c.layers ? "{layers}" : "{heads}") +
                         " does not apply to {model=rnnsearch} (one bidirectional GRU encoder, "
                         "one GRU decoder, one additive attention); expected only {d_model} to "
                         "size it");
}

// A model qkv trains, and one that trains `task` (said before an unknown task is).
void check_model(const std::string& task, const std::string& model) {
  if (std::find(kModels.begin(), kModels.end(), model) == kModels.end())
    throw FieldError("model", "{model} " + model +
                                  " is not a model qkv trains; expected transformer, rnnsearch "
                                  "or perceiver");
  if (model == "perceiver" && task != "count")
    throw FieldError("task", "{task} " + task + " is not a Perceiver task; expected count" +
                                 (task.empty() ? ""
                                               : " (the other tasks train {model=transformer} "
                                                 "or rnnsearch)"));
  if (model != "perceiver" && task == "count")
    throw FieldError("task", "{task} count is the Perceiver's task, not the " + model +
                                 "'s; expected {model=perceiver} {task=count}");
}

}  // namespace

const std::vector<TaskInfo>& training_tasks() {
  static const std::vector<TaskInfo> tasks = [] {
    std::vector<TaskInfo> t;
    for (const std::string& name : task_names())
      t.push_back(sequence_task(name, name == "dates" || name == "lookup" ? 6000 : 4000));
    t.push_back(count_task());
    return t;
  }();
  return tasks;
}

const TaskInfo& training_task(const std::string& name) {
  const std::vector<TaskInfo>& tasks = training_tasks();
  for (const TaskInfo& t : tasks)
    if (t.name == name) return t;
  throw FieldError("task", "unknown task '" + name + "'; expected one of " + names(tasks));
}

const std::vector<TrainableModel>& training_models() {
  static const std::vector<TrainableModel> models = {
      {"transformer",
       "The transformer: a pre-norm encoder–decoder transformer, one character embedding,\n"
       "sinusoidal positions; AdamW with warmup, cosine decay to lr/10 at {steps} and\n"
       "gradient clipping at 1; label smoothing 0.1. Accuracy is exact-sequence: the\n"
       "whole output must match. Training stops early once a held-out evaluation shows\n"
       "{target_accuracy} beyond doubt, so the progress line's time is to the {steps} limit, "
       "an\nupper bound. Same {seed} and {threads}, same numbers; on a machine shared with\n"
       "other work, {threads=1} is often the fastest."},
      {"rnnsearch",
       "RNNsearch ({model=rnnsearch}, Bahdanau et al. 2014): a bidirectional GRU reads the\n"
       "source into annotations h_j; a GRU decoder's state s_{i-1} is the query of an\n"
       "additive attention, e_ij = v_a·tanh(W_a s_{i-1} + U_a h_j), whose keys and values\n"
       "are both the h_j. {d_model} sets the width (annotations and decoder state).\n"
       "(measured: dates, 99.6% held-out after 500 steps, 15 s of CPU on one thread)"},
      {"perceiver",
       "{model=perceiver} (Jaegle et al. 2021): {latents} N learned queries cross-attend\n"
       "to an input of {length} symbols (keys and values from the input), then {layers}\n"
       "latent self-attention blocks; task count: how many '#' among the letters."}};
  return models;
}

TrainPlan plan_training(const TrainRequest& c) {
  TrainPlan plan;
  const std::string& task = c.task;
  plan.task = task;
  plan.model = c.model.empty() ? training_task(task).models.front() : c.model;
  check_model(task, plan.model);
  refuse_others(c, plan.model);
  const TaskInfo& info = training_task(task);
  TrainOptions& o = plan.options;
  o = info.options;
  o.steps = c.steps.value_or(o.steps);
  o.batch_size = c.batch_size.value_or(o.batch_size);
  o.eval_every = c.eval_every.value_or(o.eval_every);
  o.test_examples = c.test_examples.value_or(o.test_examples);
  o.lr = c.lr.value_or(o.lr);
  o.target_accuracy = c.target_accuracy.value_or(o.target_accuracy);
  o.seed = c.seed.value_or(o.seed);
  if (plan.model == "perceiver") {
    const int64_t layers = c.layers.value_or(info.layers);
    if (layers < 0 || layers > 64)
      throw FieldError("layers",
                       "{layers} " + std::to_string(layers) + " is out of range; expected 0 to 64");
    const PerceiverTask t = make_perceiver_task(task, c.length.value_or(info.length));
    plan.perceiver = PerceiverConfig{.length = t.length,
                                     .vocab = static_cast<int64_t>(t.alphabet.size()),
                                     .classes = t.classes,
                                     .latents = c.latents.value_or(info.latents),
                                     .d_model = c.d_model.value_or(info.d_model),
                                     .heads = c.heads.value_or(info.heads),
                                     .blocks = layers,
                                     .task = t.name};
    plan.perceiver->validate();
  } else {
    const Task t = make_task(task);
    const int64_t d_model = c.d_model.value_or(info.d_model);
    plan.seq2seq = plan.model == "rnnsearch" ? rnnsearch_config_for(t, d_model)
                                             : config_for(t, c.layers.value_or(info.layers),
                                                          c.heads.value_or(info.heads), d_model);
    plan.seq2seq->validate();
  }
  o.validate();
  return plan;
}

int64_t TrainPlan::bytes() const {
  return seq2seq ? seq2seq_train_bytes(*seq2seq, options.batch_size)
                 : perceiver_train_bytes(*perceiver, options.batch_size);
}

std::string TrainPlan::what() const {
  const std::string batch = ", batch " + grouped(options.batch_size) + ")";
  if (seq2seq)
    return "training this " + model + " (" + grouped(seq2seq->layers) + " layers, d_model " +
           grouped(seq2seq->d_model) + batch;
  return "training this Perceiver (length " + grouped(perceiver->length) + ", latents " +
         grouped(perceiver->latents) + ", d_model " + grouped(perceiver->d_model) + batch;
}

std::string TrainPlan::smaller(const FieldError::Namer& name) const {
  const std::vector<std::string> fields =
      seq2seq ? std::vector<std::string>{"layers", "d_model", "batch_size"}
              : std::vector<std::string>{"length", "latents", "layers", "d_model", "batch_size"};
  std::string s = "a smaller";
  for (std::size_t i = 0; i < fields.size(); ++i)
    s += (i == 0 ? " " : i + 1 == fields.size() ? " or " : ", ") + name(fields[i], {});
  return s;
}

std::unique_ptr<Trainable> TrainPlan::make(uint64_t seed) const {
  if (seq2seq) return train_detail::owning_trainable(make_model(*seq2seq, seed), make_task(task));
  nn::Rng init = train_detail::seed_stream(seed, train_detail::kInit);
  return train_detail::owning_trainable(std::make_unique<Perceiver>(*perceiver, init),
                                        make_perceiver_task(task, perceiver->length));
}

}  // namespace qkv
