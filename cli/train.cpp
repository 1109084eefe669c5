// `qkv train`: options, thread setup, the progress bar, the summary (text or JSON), saving.
#include "train.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
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
#include "qkv/train.h"
#include "text.h"

namespace qkv::cli {

namespace {

// Defaults that reach the targets on a 2-core machine (measured: see README).
struct TaskDefaults {
  int64_t steps, d_model;
};
TaskDefaults defaults_for(const std::string& task) {
  if (task == "dates") return {6000, 64};
  if (task == "lookup") return {6000, 64};
  return {4000, 64};  // reverse, sort, copy
}

std::string task_list() {
  std::string s;
  for (const std::string& name : task_names())
    s += "  " + wrap(pad_right(name, 9) + make_task(name).description(), 78, 11) + "\n";
  return s;
}

std::string percent(double x, int digits = 1) { return fixed(100 * x, digits) + "%"; }

// With a target of at most 100% the run may stop early, so the time shown is to the step limit,
// said as such (--target above 1: it takes every step, and the time is an ETA).
std::string progress_line(const TrainProgress& p, bool with_bar, bool may_stop_early) {
  return step_counter(p.step, p.steps, with_bar) + "  loss " + fixed(p.loss, 3) + "  tokens " +
         percent(p.token_accuracy) + "  held-out " +
         (p.eval_accuracy ? percent(*p.eval_accuracy) : std::string("—")) +
         (may_stop_early ? rate_and_time_to_limit(p.step, p.steps, p.seconds)
                         : rate_and_eta(p.step, p.steps, p.seconds));
}

}  // namespace

CLI::App* add_train_command(CLI::App& app, TrainArgs& args) {
  CLI::App* cmd = app.add_subcommand("train",
                                     "train a small model (transformer, RNNsearch, Perceiver) on a "
                                     "toy task; watch attention form");
  cmd->add_option("--task", args.task, "the task (see the list below)")
      ->required()
      ->option_text("TASK");
  cmd->add_option("--model", args.model,
                  "transformer (default), rnnsearch (Bahdanau et al. 2014's GRUs + additive "
                  "attention) or perceiver (latent queries; task count)")
      ->option_text("NAME");
  cmd->add_option("--steps", args.steps,
                  "steps at most, 1 to 10^8 (default 4000; dates, lookup 6000)")
      ->transform(integer({.lo = 1, .hi = 100'000'000}))
      ->option_text("N");
  cmd->add_option("--layers", args.layers,
                  "encoder blocks, as many decoder blocks, 1 to 64 (default 2; not rnnsearch; "
                  "perceiver: latent blocks, 0 to 64)")
      ->transform(integer({.lo = 0, .hi = 64}))
      ->option_text("L");
  cmd->add_option("--heads", args.heads, "attention heads, 1 to 256 (default 4; not rnnsearch)")
      ->transform(integer({.lo = 1, .hi = 256}))
      ->option_text("H");
  cmd->add_option("--d-model", args.d_model,
                  "model width, 1 to 4096, a multiple of --heads (default 64)")
      ->transform(integer({.lo = 1, .hi = 4096}))
      ->option_text("D");
  cmd->add_option("--batch", args.batch, "examples a step, 1 to 65536 (default 64)")
      ->transform(integer({.lo = 1, .hi = 65536}))
      ->option_text("B");
  cmd->add_option("--lr", args.lr, "peak AdamW learning rate, 0 < X < 10 (default 1e-3)")
      ->check(finite_number({.lo = 0, .hi = 10, .lo_open = true, .hi_open = true}))
      ->option_text("X");
  cmd->add_option("--seed", args.seed,
                  "seed of the weights and the data, 0 to 2^64 - 1 (default 1)")
      ->transform(seed_integer())
      ->option_text("S");
  cmd->add_option("--target", args.target,
                  "stop once held-out accuracy − 2 std. errors ≥ ACC (default 0.99; > 1: never)")
      ->check(finite_number({.lo = 0, .hi = 10}))
      ->option_text("ACC");
  cmd->add_option("--eval-every", args.eval_every,
                  "steps between evaluations, 1 to 10^8 (default min(100, steps/10))")
      ->transform(integer({.lo = 1, .hi = 100'000'000}))
      ->option_text("N");
  cmd->add_option("--test-examples", args.test_examples,
                  "held-out examples of the final test, 0 to 10^6 (default 1000)")
      ->transform(integer({.lo = 0, .hi = 1'000'000}))
      ->option_text("N");
  cmd->add_option("--out", args.out, "save the model (safetensors) for qkv explain --model")
      ->option_text("FILE");
  cmd->add_flag("--json", args.json, "print the summary as JSON");
  add_perceiver_options(cmd, args.perceiver);
  cmd->add_option("--threads", args.threads, thread_count_help())
      ->transform(thread_count())
      ->option_text("N");
  add_memory_limit_option(*cmd, args.memory_limit,
                          "training (parameters, AdamW's moments, a batch's activations)");
  cmd->footer(
      "\nTasks (character-level; 1 in 10 sources is held out and never trained on):\n" +
      task_list() +
      "\nThe transformer: a pre-norm encoder–decoder transformer, one character embedding,\n"
      "sinusoidal positions; AdamW with warmup, cosine decay to lr/10 at --steps and\n"
      "gradient clipping at 1; label smoothing 0.1. Accuracy is exact-sequence: the\n"
      "whole output must match. Training stops early once a held-out evaluation shows\n"
      "--target beyond doubt, so the progress line's time is to the --steps limit, an\n"
      "upper bound. Same --seed and --threads, same numbers; on a machine shared with\n"
      "other work, --threads 1 is often the fastest.\n\n"
      "RNNsearch (--model rnnsearch, Bahdanau et al. 2014): a bidirectional GRU reads the\n"
      "source into annotations h_j; a GRU decoder's state s_{i-1} is the query of an\n"
      "additive attention, e_ij = v_a·tanh(W_a s_{i-1} + U_a h_j), whose keys and values\n"
      "are both the h_j. --d-model sets the width (annotations and decoder state).\n"
      "(measured: dates, 99.6% held-out after 500 steps, 15 s of CPU on one thread)\n\n"
      "Examples:\n"
      "  qkv train --task reverse\n"
      "  qkv train --task dates --out dates.safetensors\n"
      "  qkv explain --model dates.safetensors --input \"march 3rd 2021\"\n"
      "  qkv train --task dates --model rnnsearch --out rnnsearch.safetensors\n"
      "  qkv train --task copy --steps 300 --layers 1 --d-model 32 --json\n"
      "\n--model perceiver (Jaegle et al. 2021): --latents N learned queries cross-attend\n"
      "to an input of --length symbols (keys and values from the input), then --layers\n"
      "latent self-attention blocks; task count: how many '#' among the letters.\n"
      "Its --steps default to 1500; it stops early at --target (measured: 100%\n"
      "held-out after 900 steps, chance 10%).\n"
      "  qkv train --model perceiver --task count --out count.safetensors\n"
      "  qkv explain --model count.safetensors --html latents.html\n");
  return cmd;
}

int run_train(const TrainArgs& args) {
  if (args.model == "perceiver") return run_train_perceiver(args);
  const auto architecture = parse_architecture(args.model);  // before the task: it names them
  if (!architecture)
    throw Error("--model " + printable(args.model) +
                " is not a model qkv trains; expected transformer, rnnsearch or perceiver");
  const std::vector<std::string> perceiver_tasks = perceiver_task_names();
  if (std::find(perceiver_tasks.begin(), perceiver_tasks.end(), args.task) != perceiver_tasks.end())
    throw Error("--task " + args.task + " is the Perceiver's task, not the " + args.model +
                "'s; expected --model perceiver --task " + args.task);
  refuse_perceiver_options(args.perceiver, args.model);
  const Task task = make_task(args.task);  // an unknown name lists the known ones
  const TaskDefaults d = defaults_for(task.name());
  const bool rnn = *architecture == Seq2SeqArchitecture::rnnsearch;
  if (rnn && (args.layers || args.heads))
    throw Error(std::string(args.layers ? "--layers" : "--heads") +
                " does not apply to --model rnnsearch (one bidirectional GRU encoder, one GRU "
                "decoder, one additive attention); expected only --d-model to size it");
  const Seq2SeqConfig config =
      rnn ? rnnsearch_config_for(task, args.d_model.value_or(d.d_model))
          : config_for(task, args.layers.value_or(2), args.heads.value_or(4),
                       args.d_model.value_or(d.d_model));
  config.validate();
  TrainOptions options;
  options.steps = args.steps.value_or(d.steps);
  options.batch_size = args.batch;
  options.lr = args.lr;
  options.seed = args.seed;
  options.target_accuracy = args.target;
  options.eval_every = args.eval_every.value_or(0);  // 0: the trainer's default
  options.test_examples = args.test_examples;
  // Fails before training, not after minutes of it, when --out cannot be written or the model
  // and a batch's activations would not fit.
  check_outputs({{"--out", args.out}});
  require_memory(seq2seq_train_bytes(config, options.batch_size), args.memory_limit,
                 "training this " + std::string(to_string(config.architecture)) + " (" +
                     grouped(config.layers) + " layers, d_model " + grouped(config.d_model) +
                     ", batch " + grouped(options.batch_size) + ")",
                 "a smaller --layers, --d-model or --batch");

  // All of the work on `threads` threads: the process's pool and OpenBLAS's own (the backward
  // GEMMs), as qkv bench model does.
  const int threads = resolve_num_threads(args.threads.value_or(0));  // 0: the default
  qkv::set_num_threads(threads);
  set_blas_threads(threads);

  std::unique_ptr<Seq2Seq> model = make_model(config, options.seed);
  Progress bar;
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  const int64_t every = std::max<int64_t>(1, options.steps / 10);
  const bool may_stop_early = options.target_accuracy <= 1;
  const TrainSummary s = train(*model, task, options, [&](const TrainProgress& p) {
    if (tty) {
      if (p.step == 1 || p.step % 5 == 0 || p.evaluated)
        bar.show(progress_line(p, true, may_stop_early));
    } else if (p.step % every == 0) {
      std::cerr << progress_line(p, false, may_stop_early) << "\n";
    }
  });
  bar.clear();

  std::map<std::string, std::string> extra = {{"qkv.steps", std::to_string(s.steps)},
                                              {"qkv.seed", std::to_string(options.seed)},
                                              {"qkv.test_accuracy", fixed(s.test_accuracy, 4)}};
  try {
    if (!args.out.empty()) model->save(args.out, extra);
  } catch (const Error& e) {
    throw Error("--out " + std::string(e.what()), e.kind());  // the message starts with the path
  }

  const Seq2SeqConfig& c = model->config();
  if (args.json) {
    nlohmann::json history = nlohmann::json::array();
    for (const EvalPoint& e : s.history)
      history.push_back(
          {{"step", e.step}, {"accuracy", e.accuracy}, {"loss", e.loss}, {"seconds", e.seconds}});
    nlohmann::json j = {
        {"task", s.task},
        {"model",
         {{"architecture", std::string(to_string(c.architecture))},
          {"layers", c.layers},
          {"heads", c.heads},
          {"d_model", c.d_model},
          {"ffn_hidden", c.hidden()},
          {"vocab", model->vocab().size()},
          {"parameters", s.parameters}}},
        {"training",
         {{"steps", s.steps},
          {"max_steps", options.steps},
          {"batch", options.batch_size},
          {"lr", options.lr},
          {"seed", options.seed},
          {"threads", threads},
          {"target", options.target_accuracy},
          {"reached_target_step",
           s.reached_target ? nlohmann::json(*s.reached_target) : nlohmann::json(nullptr)},
          {"stopped_early", s.stopped_early},
          {"final_loss", s.final_loss}}},
        {"test_accuracy", s.test_accuracy},
        {"test_examples", s.test_examples},
        {"wall_seconds", s.wall_seconds},
        {"train_seconds", s.train_seconds},
        {"tokens", s.tokens},
        {"tokens_per_second", s.tokens_per_second},
        {"history", history},
        {"out", args.out.empty() ? nlohmann::json(nullptr) : nlohmann::json(json_path(args.out))}};
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::cout << wrap("qkv train " + task.name() + ": " + task.description(), 80, 2) << "\n\n";
  if (c.architecture == Seq2SeqArchitecture::rnnsearch)
    std::cout << "  model      RNNsearch: bidirectional GRU encoder (" << c.d_model / 2 << " + "
              << c.d_model / 2 << " units),\n             GRU decoder (" << c.d_model
              << "), additive attention, " << grouped(s.parameters) << " parameters\n";
  else
    std::cout << "  model      " << c.layers << " encoder + " << c.layers << " decoder blocks, "
              << c.heads << " heads, d_model " << c.d_model << ", " << grouped(s.parameters)
              << " parameters\n";
  std::cout << "  training   " << grouped(s.steps) << " steps × " << options.batch_size
            << " examples";
  const std::string target = percent(options.target_accuracy, 0);
  if (s.stopped_early)
    std::cout << ", stopped early: held-out ≥ " << target << " beyond doubt\n"
              << "             (accuracy − 2 standard errors; first ≥ " << target << " at step "
              << grouped(*s.reached_target) << ")";
  else if (options.target_accuracy <= 1)
    std::cout << (s.reached_target ? "; reached " + target + " at step " +
                                         grouped(*s.reached_target) + ", not yet beyond doubt"
                                   : "; did not reach " + target + " held-out (more --steps?)");
  std::cout << "\n  loss       " << fixed(s.final_loss, 3)
            << " (cross-entropy, label smoothing 0.1)\n";
  if (s.test_examples > 0)
    std::cout << "  held-out   " << percent(s.test_accuracy) << " exact-sequence accuracy ("
              << grouped(s.test_examples) << " test examples, greedy decoding)\n";
  std::cout << "  time       " << fixed(s.wall_seconds, 1) << " s wall ("
            << fixed(s.train_seconds, 1) << " s in training steps), "
            << grouped(std::llround(s.tokens_per_second)) << " tokens/s, " << threads
            << (threads == 1 ? " thread\n" : " threads\n");
  if (!s.mistakes.empty()) {
    std::cout << "\n  wrong on, e.g.:\n";
    for (const auto& [e, got] : s.mistakes)
      std::cout << "    " << pad_right("\"" + e.source + "\"", 30) << " → \"" << got
                << "\" (expected \"" << e.target << "\")\n";
  }
  if (!args.out.empty())
    std::cout << "\nwrote " << printable(args.out)
              << "; see its attention with\n  qkv explain --model " << printable(args.out)
              << " --input \"" << test_set(task, 1).front().source << "\"\n";
  return 0;
}

}  // namespace qkv::cli
