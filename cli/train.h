// `qkv train`: train a small encoder–decoder transformer on a synthetic task, with a progress bar
// and a summary; optionally save it for `qkv explain --model`.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace qkv::cli {

struct TrainArgs {
  std::string task;
  int64_t steps = 0;                           // 0: the task's default
  int64_t layers = 2, heads = 4, d_model = 0;  // d_model 0: the task's default
  int64_t batch = 64;
  double lr = 1e-3;
  uint64_t seed = 1;
  double target = 0.99;
  int64_t eval_every = 0;
  int64_t test_examples = 1000;
  std::string out;
  bool json = false;
  int threads = 0;
};

CLI::App* add_train_command(CLI::App& app, TrainArgs& args);
int run_train(const TrainArgs& args);

}  // namespace qkv::cli
