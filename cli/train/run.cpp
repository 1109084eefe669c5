// `qkv train`: the library plans, trains and saves; this file maps the fields of its errors to
// flags, throttles one progress line and writes the summary as text or JSON.

#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "memory.h"
#include "output.h"
#include "progress.h"
#include "qkv/blas.h"
#include "qkv/files.h"
#include "qkv/json.h"
#include "qkv/threads.h"
#include "qkv/train.h"
#include "text.h"
#include "train/train.h"

namespace qkv::cli {

namespace {

std::string percent(double x, int digits = 1) { return fixed(100 * x, digits) + "%"; }

// On a terminal, one line rewritten (Progress::report's throttle, and at each evaluation); else
// (a log, a pipe) a line at each tenth of the run. The time shown is to the step limit when the
// run may stop early at its target.
ProgressFn progress_line(Progress& bar, const std::string& accuracy, const TrainOptions& o) {
  const bool tty = bar.terminal(), may_stop = o.target_accuracy <= 1;
  return [&bar, accuracy, tty, may_stop,
          every = std::max<int64_t>(1, o.steps / 10)](const TrainProgress& p) {
    const bool milestone = tty ? p.step == 1 || p.evaluated : p.step % every == 0;
    bar.report(step_counter(p.step, p.steps, tty) + "  loss " + fixed(p.loss, 3) + "  " + accuracy +
                   " " + percent(p.token_accuracy) + "  held-out " +
                   (p.eval_accuracy ? percent(*p.eval_accuracy) : std::string("—")) +
                   (may_stop ? rate_and_time_to_limit(p.step, p.steps, p.seconds)
                             : rate_and_eta(p.step, p.steps, p.seconds)),
               milestone);
  };
}

nlohmann::json summary_json(const TrainArgs& a, const TrainOptions& o, const TrainSummary& s,
                            const Trainable& model, int threads) {
  nlohmann::json history = nlohmann::json::array(), sizes = nlohmann::json::object();
  for (const EvalPoint& e : s.history)
    history.push_back({{"step", e.step},
                       {"accuracy", number_json(e.accuracy)},
                       {"loss", number_json(e.loss)},
                       {"seconds", number_json(e.seconds)}});
  for (const auto& [name, value] : model.sizes()) sizes[name] = value;
  sizes["parameters"] = s.parameters;
  nlohmann::json j = {{"task", s.task}};
  if (model.architecture() == "perceiver")
    j["model"] = "perceiver", j["config"] = sizes;
  else
    j["model"] = nlohmann::json{{"architecture", model.architecture()}}, j["model"].update(sizes);
  j["training"] = {{"steps", s.steps},
                   {"max_steps", o.steps},
                   {"batch", o.batch_size},
                   {"lr", number_json(o.lr)},
                   {"seed", o.seed},
                   {"threads", threads},
                   {"target", number_json(o.target_accuracy)},
                   {"reached_target_step",
                    s.reached_target ? nlohmann::json(*s.reached_target) : nlohmann::json()},
                   {"stopped_early", s.stopped_early},
                   {"final_loss", number_json(s.final_loss)}};
  j["test_accuracy"] = number_json(s.test_accuracy);
  j["test_examples"] = s.test_examples;
  if (s.chance) j["chance"] = number_json(*s.chance);
  j["wall_seconds"] = number_json(s.wall_seconds);
  j["train_seconds"] = number_json(s.train_seconds);
  j["tokens"] = s.tokens;
  j["tokens_per_second"] = number_json(s.tokens_per_second);
  j["history"] = history;
  j["out"] = a.out.empty() ? nlohmann::json() : nlohmann::json(json_path(a.out));
  return j;
}

void summary_text(const TrainArgs& a, const TrainOptions& o, const TrainSummary& s,
                  Trainable& model, int threads) {
  std::cout << wrap("qkv train " + s.task + ": " + model.task_description(), 80, 2) << "\n\n"
            << "  model      " << model.description() << "\n  training   " << grouped(s.steps)
            << " steps × " << o.batch_size << " examples";
  const std::string target = percent(o.target_accuracy, 0);
  if (s.stopped_early)
    std::cout << ", stopped early: held-out ≥ " << target << " beyond doubt\n"
              << "             (accuracy − 2 standard errors; first ≥ " << target << " at step "
              << grouped(*s.reached_target) << ")";
  else if (o.target_accuracy <= 1)
    std::cout << (s.reached_target ? "; reached " + target + " at step " +
                                         grouped(*s.reached_target) + ", not yet beyond doubt"
                                   : "; did not reach " + target + " held-out (more --steps?)");
  std::cout << "\n  loss       " << fixed(s.final_loss, 3) << " (cross-entropy"
            << (o.label_smoothing > 0 ? ", label smoothing " + fixed(o.label_smoothing, 1) : "")
            << (s.chance ? "; chance " + fixed(std::log(1 / *s.chance), 3) : "") << ")\n";
  if (s.test_examples > 0)
    std::cout << "  held-out   " << percent(s.test_accuracy)
              << (s.chance ? " accuracy on " + grouped(s.test_examples) +
                                 " test examples (chance " + percent(*s.chance) + ")\n"
                           : " exact-sequence accuracy (" + grouped(s.test_examples) +
                                 " test examples, greedy decoding)\n");
  std::cout << "  time       " << fixed(s.wall_seconds, 1) << " s wall ("
            << fixed(s.train_seconds, 1) << " s in training steps), "
            << grouped(std::llround(s.tokens_per_second)) << " tokens/s, " << threads
            << (threads == 1 ? " thread\n" : " threads\n");
  if (!s.mistakes.empty()) std::cout << "\n  wrong on, e.g.:\n";
  for (const auto& [e, got] : s.mistakes)
    std::cout << "    " << pad_right("\"" + e.source + "\"", 30) << " → \"" << got
              << "\" (expected \"" << e.target << "\")\n";
  if (a.out.empty()) return;
  const std::optional<std::string> input = model.sample_input();
  std::cout << "\nwrote " << printable(a.out) << "; see its attention with\n  qkv explain --model "
            << printable(a.out) << (input ? " --input \"" + *input + "\"" : "") << "\n";
}

int train_planned(const TrainArgs& a) {
  const TrainPlan plan = plan_training({.task = a.task,
                                        .model = a.model,
                                        .layers = a.layers,
                                        .heads = a.heads,
                                        .d_model = a.d_model,
                                        .length = a.length,
                                        .latents = a.latents,
                                        .steps = a.steps,
                                        .batch_size = a.batch,
                                        .eval_every = a.eval_every,
                                        .test_examples = a.test_examples,
                                        .lr = a.lr,
                                        .target_accuracy = a.target,
                                        .seed = a.seed});
  const TrainOptions& o = plan.options;
  // Fails before training, not after minutes of it, when --out cannot be written or the model
  // and a batch's activations would not fit.
  check_outputs({{"--out", a.out}});
  require_memory(plan.bytes(), a.memory_limit, plan.what(), plan.smaller(flag_of));
  // All of the work on `threads` threads: the process's pool and OpenBLAS's own.
  const int threads = resolve_num_threads(a.threads.value_or(0));
  qkv::set_num_threads(threads);
  set_blas_threads(threads);
  const std::unique_ptr<Trainable> model = plan.make(o.seed);
  Progress bar;
  const TrainSummary s =
      train(*model, o, progress_line(bar, plan.model == "perceiver" ? "batch" : "tokens", o));
  bar.clear();
  try {
    if (!a.out.empty()) save_trained(*model, a.out, s);
  } catch (const Error& e) {
    throw Error("--out " + std::string(e.what()), e.kind());  // the message starts with the path
  }
  if (a.json)
    std::cout << summary_json(a, o, s, *model, threads).dump() << "\n";
  else
    summary_text(a, o, s, *model, threads);
  return 0;
}

}  // namespace

int run_train(const TrainArgs& args) {
  try {
    return train_planned(args);
  } catch (const FieldError& e) {
    throw Error(e.message(flag_of), e.kind());  // the library names fields, the command its flags
  }
}

}  // namespace qkv::cli
