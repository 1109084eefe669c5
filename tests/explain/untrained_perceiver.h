// An untrained Perceiver's captured run, for the tests of what reads a run (readings, report): 3
// latents, 2 heads, d_model 8, initialized from seed 2, on a count-task input of 32 symbols whose
// counted '#' stands at 3, 23 and 30.
#pragma once

#include <string>

#include "qkv/explain.h"
#include "qkv/perceiver.h"

namespace qkv::explain {

inline constexpr const char* kUntrainedPerceiverInput = "abc#efghijklmnopqrstuvw#yzabcd#f";

inline Run untrained_perceiver_run(const std::string& name = "perceiver") {
  const PerceiverTask task = make_perceiver_task("count", 32);
  nn::Rng init(2);
  Perceiver model({.length = task.length,
                   .vocab = static_cast<int64_t>(task.alphabet.size()),
                   .classes = task.classes,
                   .latents = 3,
                   .d_model = 8,
                   .heads = 2,
                   .blocks = 1},
                  init);
  return capture(model, task, kUntrainedPerceiverInput, name);
}

}  // namespace qkv::explain
