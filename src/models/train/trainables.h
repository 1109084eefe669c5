// What the one training loop (train.cpp) shares with the two families' Trainables
// (seq2seq/trainer.cpp, perceiver/trainer.cpp): the seed streams, and Trainables that own their
// model (TrainPlan::make).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "qkv/train.h"

namespace qkv::train_detail {

// Independent streams of one seed (SplitMix64 of distinct starting points), the same for every
// model: 0 the initialization, 1 the training data, 2 the dropout.
enum Stream : uint64_t { kInit = 0, kData = 1, kNoise = 2 };
nn::Rng seed_stream(uint64_t seed, uint64_t which);

// "0.001", "1e-05", "nan": a double as the user would type it.
std::string number(double x);

std::unique_ptr<Trainable> owning_trainable(std::unique_ptr<Seq2Seq> model, Task task);
std::unique_ptr<Trainable> owning_trainable(std::unique_ptr<Perceiver> model, PerceiverTask task);

}  // namespace qkv::train_detail
