// `qkv train`: options → the library's TrainPlan → one progress line → the summary (text or JSON).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace qkv::cli {

// Unset optionals take the task's defaults (qkv::training_tasks()) or the machine's; a value
// given, 0 included, must be in range and apply to the model.
struct TrainArgs {
  std::string task;
  std::string model = "transformer";
  std::optional<int64_t> steps, layers, heads, d_model, length, latents, eval_every, batch,
      test_examples;
  std::optional<double> lr, target;
  std::optional<uint64_t> seed;
  std::string out, memory_limit;  // memory_limit empty: half the machine's memory
  bool json = false;
  std::optional<int> threads;  // $QKV_NUM_THREADS, else all cores
};

// The flag that sets a field of the library's errors and texts (batch_size → --batch, d_model →
// --d-model), with the value of a setting it suggests ("--model perceiver").
std::string flag_of(std::string_view field, std::string_view value = {});

CLI::App* add_train_command(CLI::App& app, TrainArgs& args);
int run_train(const TrainArgs& args);

}  // namespace qkv::cli
