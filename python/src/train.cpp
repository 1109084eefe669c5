// Training and the experiments for Python, as `qkv train` and `qkv experiment` run them
// (cli/train.cpp, cli/train_perceiver.cpp, cli/experiment.cpp), returning their summaries as dicts
// that python/qkv/_train.py turns into dataclasses. The arguments arrive checked by _train.py,
// which names them as Python spells them (qkv's own checks name the command's flags). Training runs
// without the GIL; the progress callable and Ctrl-C are heard after every step.
#include "qkv/train.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "qkv/perceiver.h"
#include "unlocked.h"

namespace qkv::python {

namespace nb = nanobind;

namespace {

nb::object optional_of(const std::optional<double>& x) { return x ? nb::cast(*x) : nb::none(); }

nb::dict progress_of(const TrainProgress& p) {
  nb::dict d;
  d["step"] = p.step;
  d["steps"] = p.steps;
  d["loss"] = p.loss;
  d["token_accuracy"] = p.token_accuracy;
  d["eval_accuracy"] = optional_of(p.eval_accuracy);
  d["seconds"] = p.seconds;
  d["evaluated"] = p.evaluated;
  return d;
}

// The evaluations of a run, oldest first, as dicts: the seq2seq and the Perceiver trainers record
// the same four numbers at each (EvalPoint, PerceiverEvalPoint).
template <typename Point>
nb::list history_of(const std::vector<Point>& points) {
  nb::list history;
  for (const Point& e : points) {
    nb::dict point;
    point["step"] = e.step;
    point["accuracy"] = e.accuracy;
    point["loss"] = e.loss;
    point["seconds"] = e.seconds;
    history.append(point);
  }
  return history;
}

// What every trainer's summary says of its run (TrainSummary, PerceiverTrainSummary): the task, the
// steps taken and why they stopped, the loss and the held-out accuracy, and the time.
template <typename Summary>
nb::dict run_of(const Summary& s) {
  nb::dict d;
  d["task"] = s.task;
  d["steps"] = s.steps;
  d["stopped_early"] = s.stopped_early;
  d["final_loss"] = s.final_loss;
  d["test_accuracy"] = s.test_accuracy;
  d["test_examples"] = s.test_examples;
  d["train_seconds"] = s.train_seconds;
  d["wall_seconds"] = s.wall_seconds;
  return d;
}

nb::dict summary_of(const TrainSummary& s, const Seq2Seq& model) {
  const nb::list history = history_of(s.history);
  nb::list mistakes;
  for (const auto& [example, output] : s.mistakes) {
    nb::dict mistake;
    mistake["source"] = example.source;
    mistake["target"] = example.target;
    mistake["output"] = output;
    mistakes.append(mistake);
  }
  const Seq2SeqConfig& c = model.config();
  nb::dict config;
  config["architecture"] = std::string(to_string(c.architecture));
  config["layers"] = c.layers;
  config["heads"] = c.heads;
  config["d_model"] = c.d_model;
  config["ffn_hidden"] = c.hidden();
  config["vocab"] = model.vocab().size();
  nb::dict d = run_of(s);
  d["reached_target"] = s.reached_target ? nb::cast(*s.reached_target) : nb::none();
  d["tokens"] = s.tokens;
  d["tokens_per_second"] = s.tokens_per_second;
  d["parameters"] = s.parameters;
  d["history"] = history;
  d["mistakes"] = mistakes;
  d["config"] = config;
  return d;
}

// `qkv train --model perceiver`'s summary in the shape of summary_of's, so that qkv.train returns
// one TrainSummary for every model: the input symbols read stand for the tokens, the first
// evaluation at or above the target is found in the history (as the seq2seq trainer marks it),
// and a classifier has no wrong sequences to show.
nb::dict perceiver_summary_of(const PerceiverTrainSummary& s, const PerceiverConfig& c,
                              int64_t batch_size, double target) {
  const nb::list history = history_of(s.history);
  nb::object reached = nb::none();
  for (const PerceiverEvalPoint& e : s.history)
    if (e.accuracy >= target) {
      reached = nb::cast(e.step);
      break;
    }
  nb::dict config;
  config["architecture"] = "perceiver";
  config["layers"] = c.blocks;
  config["heads"] = c.heads;
  config["d_model"] = c.d_model;
  config["latents"] = c.latents;
  config["length"] = c.length;
  config["classes"] = c.classes;
  config["vocab"] = c.vocab;
  const int64_t symbols = s.steps * batch_size * c.length;
  nb::dict d = run_of(s);
  d["reached_target"] = reached;
  d["tokens"] = symbols;
  d["tokens_per_second"] =
      s.train_seconds > 0 ? static_cast<double>(symbols) / s.train_seconds : 0.0;
  d["parameters"] = s.parameters;
  d["history"] = history;
  d["mistakes"] = nb::list();
  d["config"] = config;
  d["chance"] = s.chance;
  return d;
}

// The metadata `qkv train --out` writes beside the weights, so `qkv explain --model` reads a model
// saved from Python or from the command alike.
std::map<std::string, std::string> saved_metadata(int64_t steps, uint64_t seed, double accuracy) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", accuracy);
  return {{"qkv.steps", std::to_string(steps)},
          {"qkv.seed", std::to_string(seed)},
          {"qkv.test_accuracy", text}};
}

template <class Model>
void save_model(Model& model, const std::string& out,
                const std::map<std::string, std::string>& extra) {
  if (out.empty()) return;
  try {
    nb::gil_scoped_release release;
    model.save(out, extra);
  } catch (const Error& e) {
    raise_file_error(e, "save: ");  // the message starts with the path
  }
}

}  // namespace

void bind_train(nb::module_& m) {
  m.def("task_names", &task_names, "The tasks qkv trains on, as `qkv train --help` lists them.");
  m.def(
      "task_description", [](const std::string& name) { return make_task(name).description(); },
      nb::arg("name"));
  m.def("experiment_names", &experiment_names, "The experiments of `qkv experiment`.");

  m.def(
      "train",
      [](const std::string& task_name, const std::string& architecture, int64_t steps,
         int64_t layers, int64_t heads, int64_t d_model, int64_t batch_size, double lr,
         uint64_t seed, double target, int64_t eval_every, int64_t test_examples,
         const nb::bytes& out_path, const nb::object& progress, int64_t memory_limit) {
        const Task task = make_task(task_name);  // an unknown name lists the known ones
        const Seq2SeqConfig config = architecture == "rnnsearch"
                                         ? rnnsearch_config_for(task, d_model)
                                         : config_for(task, layers, heads, d_model);
        config.validate();
        check_memory_limit(seq2seq_train_bytes(config, batch_size), memory_limit,
                           "training this " + std::string(to_string(config.architecture)) + " (" +
                               grouped(config.layers) + " layers, d_model " +
                               grouped(config.d_model) + ", batch " + grouped(batch_size) + ")",
                           "a smaller layers, d_model or batch_size");
        const TrainOptions options{.steps = steps,
                                   .batch_size = batch_size,
                                   .lr = lr,
                                   .seed = seed,
                                   .target_accuracy = target,
                                   .eval_every = eval_every,
                                   .test_examples = test_examples};
        Unlocked unlocked;
        std::unique_ptr<Seq2Seq> model;
        const TrainSummary s = unlocked.run([&] {
          model = make_model(config, seed);
          return train(*model, task, options, [&](const TrainProgress& p) {
            unlocked.call([&] {
              if (!progress.is_none()) progress(progress_of(p));
            });
          });
        });
        save_model(*model, path_of(out_path), saved_metadata(s.steps, seed, s.test_accuracy));
        return summary_of(s, *model);
      },
      nb::arg("task"), nb::arg("model"), nb::arg("steps"), nb::arg("layers"), nb::arg("heads"),
      nb::arg("d_model"), nb::arg("batch_size"), nb::arg("lr"), nb::arg("seed"), nb::arg("target"),
      nb::arg("eval_every"), nb::arg("test_examples"), nb::arg("out"), nb::arg("progress").none(),
      nb::arg("memory_limit"),
      "qkv::train on a fresh model; the summary as a dict. Called by qkv.train.");

  m.def("perceiver_task_names", &perceiver_task_names,
        "The tasks `qkv train --model perceiver` trains on.");
  m.def(
      "perceiver_task_description",
      [](const std::string& name) { return make_perceiver_task(name).description; },
      nb::arg("name"));

  m.def(
      "train_perceiver",
      [](const std::string& task_name, int64_t length, int64_t latents, int64_t blocks,
         int64_t heads, int64_t d_model, int64_t steps, int64_t batch_size, double lr,
         uint64_t seed, double target, int64_t eval_every, int64_t test_examples,
         const nb::bytes& out_path, const nb::object& progress, int64_t memory_limit) {
        const PerceiverTask task = make_perceiver_task(task_name, length);
        const PerceiverConfig config{.length = task.length,
                                     .vocab = static_cast<int64_t>(task.alphabet.size()),
                                     .classes = task.classes,
                                     .latents = latents,
                                     .d_model = d_model,
                                     .heads = heads,
                                     .blocks = blocks,
                                     .task = task.name};
        config.validate();
        check_memory_limit(perceiver_train_bytes(config, batch_size), memory_limit,
                           "training this Perceiver (length " + grouped(config.length) +
                               ", latents " + grouped(config.latents) + ", d_model " +
                               grouped(config.d_model) + ", batch " + grouped(batch_size) + ")",
                           "a smaller length, latents, layers, d_model or batch_size");
        PerceiverTrainOptions options{.steps = steps,
                                      .batch_size = batch_size,
                                      .lr = lr,
                                      .seed = seed,
                                      .target_accuracy = target,
                                      .test_examples = test_examples};
        if (eval_every > 0) options.eval_every = eval_every;
        Unlocked unlocked;
        std::unique_ptr<Perceiver> model;
        const PerceiverTrainSummary s = unlocked.run([&] {
          nn::Rng init(seed);
          model = std::make_unique<Perceiver>(config, init);
          return train_perceiver(*model, task, options, [&](const PerceiverProgress& p) {
            unlocked.call([&] {
              if (progress.is_none()) return;
              nb::dict d;  // TrainProgress's fields; the batch's accuracy as its token_accuracy
              d["step"] = p.step;
              d["steps"] = p.steps;
              d["loss"] = p.loss;
              d["token_accuracy"] = p.accuracy;
              d["eval_accuracy"] = optional_of(p.eval_accuracy);
              d["seconds"] = p.seconds;
              d["evaluated"] = p.evaluated;
              progress(d);
            });
          });
        });
        save_model(*model, path_of(out_path), saved_metadata(s.steps, seed, s.test_accuracy));
        return perceiver_summary_of(s, config, batch_size, target);
      },
      nb::arg("task"), nb::arg("length"), nb::arg("latents"), nb::arg("blocks"), nb::arg("heads"),
      nb::arg("d_model"), nb::arg("steps"), nb::arg("batch_size"), nb::arg("lr"), nb::arg("seed"),
      nb::arg("target"), nb::arg("eval_every"), nb::arg("test_examples"), nb::arg("out"),
      nb::arg("progress").none(), nb::arg("memory_limit"),
      "qkv::train_perceiver on a fresh Perceiver; the summary as a dict. Called by qkv.train.");

  m.def(
      "experiment",
      [](const std::string& name, bool quick, const nb::object& progress) {
        Unlocked unlocked;
        const ExperimentResult r = unlocked.run([&] {
          return run_experiment(name, {.quick = quick, .progress = [&](const std::string& line) {
                                         unlocked.call([&] {
                                           if (!progress.is_none()) progress(line);
                                         });
                                       }});
        });
        nb::dict d;
        d["name"] = r.name;
        d["question"] = r.question;
        d["setup"] = r.setup;
        d["columns"] = r.columns;
        d["rows"] = r.rows;
        d["reading"] = r.reading;
        d["seconds"] = r.seconds;
        return d;
      },
      nb::arg("name"), nb::arg("quick"), nb::arg("progress").none(),
      "qkv::run_experiment; the table as a dict. Called by qkv.experiment.");
}

}  // namespace qkv::python
