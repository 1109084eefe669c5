// Training and the experiments for Python, over the library's one loop (qkv/train.h), as `qkv
// train` and `qkv experiment` run them: the task registry gives the defaults, TrainPlan checks
// every argument (its FieldErrors name the fields as Python spells them), save_trained writes the
// metadata. Summaries return as dicts that python/qkv/_train.py turns into dataclasses. Training
// runs without the GIL; the progress callable and Ctrl-C are heard after every step.
#include "qkv/train.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bindings.h"
#include "qkv/experiment.h"
#include "unlocked.h"

namespace qkv::python {

namespace nb = nanobind;

namespace {

nb::object optional_of(const std::optional<double>& x) { return x ? nb::cast(*x) : nb::none(); }

// The argument of qkv.train that sets a field of the library's errors, with the value of a
// setting it suggests as Python writes it ("model='perceiver'").
std::string argument(std::string_view field, std::string_view value = {}) {
  std::string a = field == "target_accuracy" ? "target"
                  : field == "blocks"        ? "layers"
                                             : std::string(field);
  if (value.empty()) return a;
  const bool number = value.find_first_not_of("0123456789.-e") == std::string_view::npos;
  return a + "=" + (number ? std::string(value) : "'" + std::string(value) + "'");
}

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

nb::dict summary_of(const TrainSummary& s, const Trainable& model) {
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
  nb::dict config;
  config["architecture"] = model.architecture();
  for (const auto& [name, value] : model.sizes()) config[name.c_str()] = value;
  nb::dict d;
  d["task"] = s.task;
  d["steps"] = s.steps;
  d["stopped_early"] = s.stopped_early;
  d["final_loss"] = s.final_loss;
  d["test_accuracy"] = s.test_accuracy;
  d["test_examples"] = s.test_examples;
  d["train_seconds"] = s.train_seconds;
  d["wall_seconds"] = s.wall_seconds;
  d["reached_target"] = s.reached_target ? nb::cast(*s.reached_target) : nb::none();
  d["tokens"] = s.tokens;
  d["tokens_per_second"] = s.tokens_per_second;
  d["parameters"] = s.parameters;
  d["history"] = history;
  d["mistakes"] = mistakes;
  d["config"] = config;
  d["chance"] = optional_of(s.chance);
  return d;
}

using Size = std::optional<int64_t>;

nb::dict train_task(const std::string& task, const std::string& model, Size steps, Size layers,
                    Size heads, Size d_model, Size length, Size latents, int64_t batch_size,
                    double lr, uint64_t seed, double target, Size eval_every, int64_t test_examples,
                    const nb::bytes& out_path, const nb::object& progress, int64_t memory_limit) {
  const TrainPlan plan = plan_training({.task = task,
                                        .model = model,
                                        .layers = layers,
                                        .heads = heads,
                                        .d_model = d_model,
                                        .length = length,
                                        .latents = latents,
                                        .steps = steps,
                                        .batch_size = batch_size,
                                        .eval_every = eval_every,
                                        .test_examples = test_examples,
                                        .lr = lr,
                                        .target_accuracy = target,
                                        .seed = seed});
  check_memory_limit(plan.bytes(), memory_limit, plan.what(), plan.smaller(argument));
  Unlocked unlocked;
  std::unique_ptr<Trainable> trained;
  const TrainSummary s = unlocked.run([&] {
    trained = plan.make(seed);
    return train(*trained, plan.options, [&](const TrainProgress& p) {
      unlocked.call([&] {
        if (!progress.is_none()) progress(progress_of(p));
      });
    });
  });
  const std::string out = path_of(out_path);
  if (!out.empty()) try {
      nb::gil_scoped_release release;
      save_trained(*trained, out, s);
    } catch (const Error& e) {
      raise_file_error(e, "save: ");  // the message starts with the path
    }
  return summary_of(s, *trained);
}

}  // namespace

void bind_train(nb::module_& m) {
  m.def(
      "tasks",
      [] {
        nb::list tasks;
        for (const TaskInfo& t : training_tasks()) {
          nb::dict d;
          d["name"] = t.name;
          d["description"] = t.description;
          d["models"] = t.models;
          d["steps"] = t.options.steps;
          tasks.append(d);
        }
        return tasks;
      },
      "The tasks qkv trains (qkv::training_tasks()): name, description, models, default steps.");
  m.def("experiment_names", &experiment_names, "The experiments of `qkv experiment`.");
  m.def(
      "train",
      [](const std::string& task, const std::string& model, Size steps, Size layers, Size heads,
         Size d_model, Size length, Size latents, int64_t batch_size, double lr, uint64_t seed,
         double target, Size eval_every, int64_t test_examples, const nb::bytes& out_path,
         const nb::object& progress, int64_t memory_limit) {
        try {
          return train_task(task, model, steps, layers, heads, d_model, length, latents, batch_size,
                            lr, seed, target, eval_every, test_examples, out_path, progress,
                            memory_limit);
        } catch (const FieldError& e) {
          throw Error(e.message(argument), e.kind());  // named as qkv.train's arguments
        }
      },
      nb::arg("task"), nb::arg("model"), nb::arg("steps").none(), nb::arg("layers").none(),
      nb::arg("heads").none(), nb::arg("d_model").none(), nb::arg("length").none(),
      nb::arg("latents").none(), nb::arg("batch_size"), nb::arg("lr"), nb::arg("seed"),
      nb::arg("target"), nb::arg("eval_every").none(), nb::arg("test_examples"), nb::arg("out"),
      nb::arg("progress").none(), nb::arg("memory_limit"),
      "qkv::train on a fresh model of the plan; the summary as a dict. Called by qkv.train.");

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
        d["text"] = experiment_text(r);  // as `qkv experiment` prints it
        return d;
      },
      nb::arg("name"), nb::arg("quick"), nb::arg("progress").none(),
      "qkv::run_experiment; the table as a dict. Called by qkv.experiment.");
}

}  // namespace qkv::python
