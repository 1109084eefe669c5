// `qkv train --model perceiver`: latent queries (Perceiver) trained on a long-input task.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

namespace qkv::cli {

struct TrainArgs;

// The options only the Perceiver reads.
struct PerceiverTrainArgs {
  int64_t length = 1024;  // symbols of each input
  int64_t latents = 16;   // N learned queries
};

void add_perceiver_options(CLI::App* cmd, PerceiverTrainArgs& args);
int run_train_perceiver(const TrainArgs& args);

}  // namespace qkv::cli
