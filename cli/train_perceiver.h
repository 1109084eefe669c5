// `qkv train --model perceiver`: latent queries (Perceiver) trained on a long-input task.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

namespace qkv::cli {

struct TrainArgs;

// The options only the Perceiver reads; unset, their defaults. Given with another model, they are
// refused (refuse_perceiver_options), not ignored.
struct PerceiverTrainArgs {
  std::optional<int64_t> length;   // symbols of each input (default 1024)
  std::optional<int64_t> latents;  // N learned queries (default 16)
};

void add_perceiver_options(CLI::App* cmd, PerceiverTrainArgs& args);
// A usage error when --length or --latents is given to `model` (transformer or rnnsearch), which
// reads neither.
void refuse_perceiver_options(const PerceiverTrainArgs& args, const std::string& model);
int run_train_perceiver(const TrainArgs& args);

}  // namespace qkv::cli
