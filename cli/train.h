// `qkv train`: train a small encoder–decoder transformer on a synthetic task, with a progress bar
// and a summary; optionally save it for `qkv explain --model`.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "train_perceiver.h"

namespace qkv::cli {

// Unset optionals take their defaults (the task's, the machine's); a value given, 0 included, must
// be in range: no value of an option means "the default".
struct TrainArgs {
  std::string task;
  std::string model = "transformer";     // rnnsearch; perceiver (cli/train_perceiver.cpp)
  std::optional<int64_t> steps;          // the task's default
  std::optional<int64_t> layers, heads;  // transformer: 2, 4
  std::optional<int64_t> d_model;        // the task's default
  int64_t batch = 64;
  double lr = 1e-3;
  uint64_t seed = 1;
  double target = 0.99;
  std::optional<int64_t> eval_every;  // min(100, max(10, steps / 10))
  int64_t test_examples = 1000;
  std::string out;
  bool json = false;
  std::optional<int> threads;  // $QKV_NUM_THREADS, else all cores
  std::string memory_limit;    // --memory-limit SIZE; empty: half the machine's memory
  PerceiverTrainArgs perceiver;
};

CLI::App* add_train_command(CLI::App& app, TrainArgs& args);
int run_train(const TrainArgs& args);

}  // namespace qkv::cli
