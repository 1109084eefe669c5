// `qkv train --model perceiver`: options, the progress bar, the summary (text or JSON), saving.
#include "train_perceiver.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "memory.h"
#include "options.h"
#include "output.h"
#include "progress.h"
#include "qkv/blas.h"
#include "qkv/files.h"
#include "qkv/perceiver.h"
#include "qkv/threads.h"
#include "text.h"
#include "train.h"

namespace qkv::cli {

namespace {

std::string percent(double x) { return fixed(100 * x, 1) + "%"; }

// As qkv train's: the time to the step limit when the run may stop early at its target.
std::string progress_line(const PerceiverProgress& p, bool with_bar, bool may_stop_early) {
  return step_counter(p.step, p.steps, with_bar) + "  loss " + fixed(p.loss, 3) + "  batch " +
         percent(p.accuracy) + "  held-out " +
         (p.eval_accuracy ? percent(*p.eval_accuracy) : std::string("—")) +
         (may_stop_early ? rate_and_time_to_limit(p.step, p.steps, p.seconds)
                         : rate_and_eta(p.step, p.steps, p.seconds));
}

void in_range(const char* flag, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi)
    throw Error(std::string(flag) + " " + std::to_string(value) + " is out of range; expected " +
                std::to_string(lo) + " to " + std::to_string(hi));
}

}  // namespace

void add_perceiver_options(CLI::App* cmd, PerceiverTrainArgs& args) {
  cmd->add_option("--length", args.length,
                  "perceiver: symbols of each input, 16 to 65536 (default 1024)")
      ->transform(integer({.lo = 16, .hi = 65536}))
      ->option_text("L");
  cmd->add_option("--latents", args.latents,
                  "perceiver: learned latent queries, 1 to 4096 (default 16)")
      ->transform(integer({.lo = 1, .hi = 4096}))
      ->option_text("N");
}

void refuse_perceiver_options(const PerceiverTrainArgs& args, const std::string& model) {
  if (args.length || args.latents)
    throw Error(std::string(args.length ? "--length applies to --model perceiver only (the "
                                          "length of its input); --model " +
                                              model + " takes its lengths from the task"
                                        : "--latents applies to --model perceiver only (its "
                                          "latent queries); --model " +
                                              model + " has none") +
                "; expected no " + (args.length ? "--length" : "--latents"));
}

int run_train_perceiver(const TrainArgs& args) {
  // The flags checked here, each by its own name; the library's checks below (which name the
  // config's fields) then hold by construction.
  const std::vector<std::string> tasks = perceiver_task_names();
  if (std::find(tasks.begin(), tasks.end(), args.task) == tasks.end())
    throw Error("--task " + args.task + " is not a Perceiver task; expected count" +
                (args.task.empty() ? ""
                                   : " (the other tasks train --model transformer or "
                                     "rnnsearch)"));
  const int64_t length = args.perceiver.length.value_or(1024);
  const int64_t d_model = args.d_model.value_or(64), heads = args.heads.value_or(4);
  // The other counts are in range by their options' checks (integer()); a head needs a width.
  in_range("--heads", heads, 1, d_model);
  if (d_model % heads != 0)
    throw Error("--d-model " + std::to_string(d_model) + " is not a multiple of --heads " +
                std::to_string(heads));
  const PerceiverTask task = make_perceiver_task(args.task, length);
  const PerceiverConfig config{.length = task.length,
                               .vocab = static_cast<int64_t>(task.alphabet.size()),
                               .classes = task.classes,
                               .latents = args.perceiver.latents.value_or(16),
                               .d_model = d_model,
                               .heads = heads,
                               .blocks = args.layers.value_or(2),
                               .task = task.name};
  config.validate();
  PerceiverTrainOptions options;
  options.steps = args.steps.value_or(options.steps);
  options.batch_size = args.batch;
  options.lr = args.lr;
  options.seed = args.seed;
  options.target_accuracy = args.target;
  options.eval_every = args.eval_every.value_or(options.eval_every);
  options.test_examples = args.test_examples;
  check_outputs({{"--out", args.out}});
  require_memory(perceiver_train_bytes(config, options.batch_size), args.memory_limit,
                 "training this Perceiver (length " + grouped(config.length) + ", latents " +
                     grouped(config.latents) + ", d_model " + grouped(config.d_model) +
                     ", batch " + grouped(options.batch_size) + ")",
                 "a smaller --length, --latents, --layers, --d-model or --batch");

  const int threads = resolve_num_threads(args.threads.value_or(0));
  qkv::set_num_threads(threads);
  set_blas_threads(threads);

  nn::Rng init(options.seed);
  Perceiver model(config, init);
  Progress bar;
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  const int64_t every = std::max<int64_t>(1, options.steps / 10);
  const bool may_stop_early = options.target_accuracy <= 1;
  const PerceiverTrainSummary s =
      train_perceiver(model, task, options, [&](const PerceiverProgress& p) {
        if (tty) {
          if (p.step == 1 || p.step % 5 == 0 || p.evaluated)
            bar.show(progress_line(p, true, may_stop_early));
        } else if (p.step % every == 0) {
          std::cerr << progress_line(p, false, may_stop_early) << "\n";
        }
      });
  bar.clear();
  try {
    if (!args.out.empty())
      model.save(args.out, {{"qkv.steps", std::to_string(s.steps)},
                            {"qkv.seed", std::to_string(options.seed)},
                            {"qkv.test_accuracy", fixed(s.test_accuracy, 4)}});
  } catch (const Error& e) {
    throw Error("--out " + std::string(e.what()), e.kind());
  }

  if (args.json) {
    nlohmann::json history = nlohmann::json::array();
    for (const PerceiverEvalPoint& e : s.history)
      history.push_back(
          {{"step", e.step}, {"accuracy", e.accuracy}, {"loss", e.loss}, {"seconds", e.seconds}});
    const nlohmann::json j = {
        {"model", "perceiver"},
        {"task", s.task},
        {"config",
         {{"length", config.length},
          {"latents", config.latents},
          {"d_model", config.d_model},
          {"heads", config.heads},
          {"blocks", config.blocks},
          {"classes", config.classes},
          {"parameters", s.parameters}}},
        {"training",
         {{"steps", s.steps},
          {"max_steps", options.steps},
          {"batch", options.batch_size},
          {"lr", options.lr},
          {"seed", options.seed},
          {"threads", threads},
          {"target", options.target_accuracy},
          {"stopped_early", s.stopped_early},
          {"final_loss", s.final_loss}}},
        {"test_accuracy", s.test_accuracy},
        {"test_examples", s.test_examples},
        {"chance", s.chance},
        {"wall_seconds", s.wall_seconds},
        {"train_seconds", s.train_seconds},
        {"history", history},
        {"out", args.out.empty() ? nlohmann::json(nullptr) : nlohmann::json(json_path(args.out))}};
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::cout << wrap("qkv train --model perceiver " + task.name + ": " + task.description, 80, 2)
            << "\n\n";
  std::cout << "  model      " << config.latents << " latent queries (d " << config.d_model << ", "
            << config.heads << " heads) cross-attend to " << grouped(config.length)
            << " symbols,\n             then " << config.blocks << " latent self-attention block"
            << (config.blocks == 1 ? "" : "s") << "; " << grouped(s.parameters) << " parameters\n";
  std::cout << "  training   " << grouped(s.steps) << " steps × " << options.batch_size
            << " examples" << (s.stopped_early ? ", stopped early: held-out ≥ target" : "") << "\n";
  std::cout << "  loss       " << fixed(s.final_loss, 3) << " (cross-entropy; chance "
            << fixed(std::log(1 / s.chance), 3) << ")\n";
  if (s.test_examples > 0)
    std::cout << "  held-out   " << percent(s.test_accuracy) << " accuracy on "
              << grouped(s.test_examples) << " test examples (chance " << percent(s.chance)
              << ")\n";
  std::cout << "  time       " << fixed(s.wall_seconds, 1) << " s wall ("
            << fixed(s.train_seconds, 1) << " s in training steps), " << threads
            << (threads == 1 ? " thread\n" : " threads\n");
  if (!args.out.empty())
    std::cout << "\nwrote " << printable(args.out) << "; see what each latent gathers with\n"
              << "  qkv explain --model " << printable(args.out) << "\n";
  return 0;
}

}  // namespace qkv::cli
