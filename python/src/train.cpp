// Training and the experiments for Python, as `qkv train` and `qkv experiment` run them
// (cli/train.cpp, cli/experiment.cpp), returning their summaries as dicts that
// python/qkv/_train.py turns into dataclasses. The arguments arrive checked by _train.py, which
// names them as Python spells them (qkv's own checks name the command's flags). Training runs
// without the GIL; the progress callable and Ctrl-C are heard after every step.
#include "qkv/train.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "bindings.h"
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

nb::dict summary_of(const TrainSummary& s, const Seq2Seq& model) {
  nb::list history, mistakes;
  for (const EvalPoint& e : s.history) {
    nb::dict point;
    point["step"] = e.step;
    point["accuracy"] = e.accuracy;
    point["loss"] = e.loss;
    point["seconds"] = e.seconds;
    history.append(point);
  }
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
  nb::dict d;
  d["task"] = s.task;
  d["steps"] = s.steps;
  d["reached_target"] = s.reached_target ? nb::cast(*s.reached_target) : nb::none();
  d["stopped_early"] = s.stopped_early;
  d["final_loss"] = s.final_loss;
  d["test_accuracy"] = s.test_accuracy;
  d["test_examples"] = s.test_examples;
  d["train_seconds"] = s.train_seconds;
  d["wall_seconds"] = s.wall_seconds;
  d["tokens"] = s.tokens;
  d["tokens_per_second"] = s.tokens_per_second;
  d["parameters"] = s.parameters;
  d["history"] = history;
  d["mistakes"] = mistakes;
  d["config"] = config;
  return d;
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
        const std::string out = path_of(out_path);  // empty: not saved
        if (!out.empty()) {
          // The metadata `qkv train --out` writes, so `qkv explain --model` reads either alike.
          char accuracy[32];
          std::snprintf(accuracy, sizeof accuracy, "%.4f", s.test_accuracy);
          const std::map<std::string, std::string> extra = {{"qkv.steps", std::to_string(s.steps)},
                                                            {"qkv.seed", std::to_string(seed)},
                                                            {"qkv.test_accuracy", accuracy}};
          try {
            nb::gil_scoped_release release;
            model->save(out, extra);
          } catch (const Error& e) {
            raise_file_error(e, "save: ");  // the message starts with the path
          }
        }
        return summary_of(s, *model);
      },
      nb::arg("task"), nb::arg("model"), nb::arg("steps"), nb::arg("layers"), nb::arg("heads"),
      nb::arg("d_model"), nb::arg("batch_size"), nb::arg("lr"), nb::arg("seed"), nb::arg("target"),
      nb::arg("eval_every"), nb::arg("test_examples"), nb::arg("out"), nb::arg("progress").none(),
      nb::arg("memory_limit"),
      "qkv::train on a fresh model; the summary as a dict. Called by qkv.train.");

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
