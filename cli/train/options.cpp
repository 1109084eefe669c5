// `qkv train`'s options and help; the tasks and their defaults are qkv::training_tasks()'.
#include "options.h"

#include "memory.h"
#include "qkv/terminal.h"
#include "qkv/train.h"
#include "train/train.h"

namespace qkv::cli {

// The flag that sets a field of the library's errors (batch_size → --batch, d_model → --d-model),
// with the value of a setting it suggests ("--model perceiver").
std::string flag_of(std::string_view field, std::string_view value) {
  return option_of(field == "batch_size"        ? "batch"
                   : field == "target_accuracy" ? "target"
                   : field == "blocks"          ? "layers"
                                                : field,
                   value);
}

namespace {

std::string footer() {
  std::string tasks;
  for (const TaskInfo& t : training_tasks()) {
    const std::string model = t.models[0] == "transformer" ? "" : "--model " + t.models[0] + ", ";
    tasks += "  " +
             wrap(pad_right(t.name, 9) + t.description + " — " + model + grouped(t.options.steps) +
                      " steps",
                  78, 11) +
             "\n";
  }
  std::string models;
  for (const TrainableModel& m : training_models())
    models += FieldError::render(m.description, flag_of) + "\n\n";
  return "\nTasks (the sequence tasks are character-level; 1 in 10 sources is held out and never\n"
         "trained on), each with its default steps:\n" +
         tasks + "\n" + models +
         "Examples:\n"
         "  qkv train --task reverse\n"
         "  qkv train --task dates --out dates.safetensors\n"
         "  qkv explain --model dates.safetensors --input \"march 3rd 2021\"\n"
         "  qkv train --task dates --model rnnsearch --out rnnsearch.safetensors\n"
         "  qkv train --task copy --steps 300 --layers 1 --d-model 32 --json\n"
         "  qkv train --model perceiver --task count --out count.safetensors\n"
         "  qkv explain --model count.safetensors --html latents.html\n";
}

}  // namespace

CLI::App* add_train_command(CLI::App& app, TrainArgs& a) {
  const TaskInfo &seq = training_tasks().front(), &count = training_task("count");
  CLI::App* cmd = app.add_subcommand("train",
                                     "train a small model (transformer, RNNsearch, Perceiver) on a "
                                     "toy task; watch attention form");
  const auto n = [&](const char* flag, std::optional<int64_t>& value, const std::string& help,
                     int64_t lo, int64_t hi, const char* text) {
    cmd->add_option(flag, value, help)
        ->transform(integer({.lo = lo, .hi = static_cast<uint64_t>(hi)}))
        ->option_text(text);
  };
  const auto d = [](int64_t v, const char* more = "") {
    return " (default " + std::to_string(v) + more + ")";
  };
  cmd->add_option("--task", a.task, "the task (see the list below)")
      ->required()
      ->option_text("TASK");
  cmd->add_option("--model", a.model,
                  "transformer (default), rnnsearch (Bahdanau et al. 2014's GRUs + additive "
                  "attention) or perceiver (latent queries; task count)")
      ->option_text("NAME");
  n("--steps", a.steps, "steps at most, 1 to 10^8 (default: the task's, below)", 1, 100'000'000,
    "N");
  n("--layers", a.layers,
    "encoder blocks, as many decoder blocks, 1 to 64" +
        d(seq.layers, "; not rnnsearch; perceiver: latent blocks, 0 to 64"),
    0, 64, "L");
  n("--heads", a.heads, "attention heads, 1 to 256" + d(seq.heads, "; not rnnsearch"), 1, 256, "H");
  n("--d-model", a.d_model, "model width, 1 to 4096, a multiple of --heads" + d(seq.d_model), 1,
    4096, "D");
  n("--batch", a.batch, "examples a step, 1 to 65536" + d(seq.options.batch_size), 1, 65536, "B");
  cmd->add_option("--lr", a.lr, "peak AdamW learning rate, 0 < X < 10 (default 1e-3)")
      ->check(finite_number({.lo = 0, .hi = 10, .lo_open = true, .hi_open = true}))
      ->option_text("X");
  cmd->add_option("--seed", a.seed, "seed of the weights and the data, 0 to 2^64 - 1 (default 1)")
      ->transform(seed_integer())
      ->option_text("S");
  cmd->add_option("--target", a.target,
                  "stop once held-out accuracy − 2 std. errors ≥ ACC (default 0.99; > 1: never)")
      ->check(finite_number({.lo = 0, .hi = 10}))
      ->option_text("ACC");
  n("--eval-every", a.eval_every,
    "steps between evaluations, 1 to 10^8 (default min(100, steps/10))", 1, 100'000'000, "N");
  n("--test-examples", a.test_examples,
    "held-out examples of the final test, 0 to 10^6" + d(seq.options.test_examples), 0, 1'000'000,
    "N");
  cmd->add_option("--out", a.out, "save the model (safetensors) for qkv explain --model")
      ->option_text("FILE");
  cmd->add_flag("--json", a.json, "print the summary as JSON");
  n("--length", a.length, "perceiver: symbols of each input, 16 to 65536" + d(count.length), 16,
    65536, "L");
  n("--latents", a.latents, "perceiver: learned latent queries, 1 to 4096" + d(count.latents), 1,
    4096, "N");
  cmd->add_option("--threads", a.threads, thread_count_help())
      ->transform(thread_count())
      ->option_text("N");
  add_memory_limit_option(*cmd, a.memory_limit,
                          "training (parameters, AdamW's moments, a batch's activations)");
  cmd->footer(footer());
  return cmd;
}

}  // namespace qkv::cli
