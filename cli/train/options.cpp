// `qkv train`'s options and help; the tasks and their defaults come from qkv::training_tasks().
#include "options.h"

#include "memory.h"
#include "qkv/train.h"
#include "text.h"
#include "train/train.h"

namespace qkv::cli {

namespace {

std::string task_list() {
  std::string s;
  for (const TaskInfo& t : training_tasks()) {
    const std::string model =
        t.models.front() == "transformer" ? "" : "--model " + t.models.front() + ", ";
    s += "  " +
         wrap(pad_right(t.name, 9) + t.description + " — " + model + grouped(t.options.steps) +
                  " steps",
              78, 11) +
         "\n";
  }
  return s;
}

std::string of(int64_t n) { return " (default " + std::to_string(n); }

}  // namespace

CLI::App* add_train_command(CLI::App& app, TrainArgs& args) {
  const TaskInfo& seq = training_tasks().front();
  const TaskInfo& count = training_task("count");
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
  cmd->add_option("--steps", args.steps, "steps at most, 1 to 10^8 (default: the task's, below)")
      ->transform(integer({.lo = 1, .hi = 100'000'000}))
      ->option_text("N");
  cmd->add_option("--layers", args.layers,
                  "encoder blocks, as many decoder blocks, 1 to 64" + of(seq.layers) +
                      "; not rnnsearch; perceiver: latent blocks, 0 to 64)")
      ->transform(integer({.lo = 0, .hi = 64}))
      ->option_text("L");
  cmd->add_option("--heads", args.heads,
                  "attention heads, 1 to 256" + of(seq.heads) + "; not rnnsearch)")
      ->transform(integer({.lo = 1, .hi = 256}))
      ->option_text("H");
  cmd->add_option("--d-model", args.d_model,
                  "model width, 1 to 4096, a multiple of --heads" + of(seq.d_model) + ")")
      ->transform(integer({.lo = 1, .hi = 4096}))
      ->option_text("D");
  cmd->add_option("--batch", args.batch,
                  "examples a step, 1 to 65536" + of(seq.options.batch_size) + ")")
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
  cmd->add_option(
         "--test-examples", args.test_examples,
         "held-out examples of the final test, 0 to 10^6" + of(seq.options.test_examples) + ")")
      ->transform(integer({.lo = 0, .hi = 1'000'000}))
      ->option_text("N");
  cmd->add_option("--out", args.out, "save the model (safetensors) for qkv explain --model")
      ->option_text("FILE");
  cmd->add_flag("--json", args.json, "print the summary as JSON");
  cmd->add_option("--length", args.length,
                  "perceiver: symbols of each input, 16 to 65536" + of(count.length) + ")")
      ->transform(integer({.lo = 16, .hi = 65536}))
      ->option_text("L");
  cmd->add_option("--latents", args.latents,
                  "perceiver: learned latent queries, 1 to 4096" + of(count.latents) + ")")
      ->transform(integer({.lo = 1, .hi = 4096}))
      ->option_text("N");
  cmd->add_option("--threads", args.threads, thread_count_help())
      ->transform(thread_count())
      ->option_text("N");
  add_memory_limit_option(*cmd, args.memory_limit,
                          "training (parameters, AdamW's moments, a batch's activations)");
  cmd->footer(
      "\nTasks (the sequence tasks are character-level; 1 in 10 sources is held out and never\n"
      "trained on), each with its default steps:\n" +
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
      "--model perceiver (Jaegle et al. 2021): --latents N learned queries cross-attend\n"
      "to an input of --length symbols (keys and values from the input), then --layers\n"
      "latent self-attention blocks; task count: how many '#' among the letters.\n\n"
      "Examples:\n"
      "  qkv train --task reverse\n"
      "  qkv train --task dates --out dates.safetensors\n"
      "  qkv explain --model dates.safetensors --input \"march 3rd 2021\"\n"
      "  qkv train --task dates --model rnnsearch --out rnnsearch.safetensors\n"
      "  qkv train --task copy --steps 300 --layers 1 --d-model 32 --json\n"
      "  qkv train --model perceiver --task count --out count.safetensors\n"
      "  qkv explain --model count.safetensors --html latents.html\n");
  return cmd;
}

}  // namespace qkv::cli
