// models/seq2seq/experiments.h — `qkv experiment NAME`: design questions about attention answered
// by training small models side by side (fixed seeds) and measuring.
//
//   tie-qk   W_Q = W_K (symmetric QKᵀ) against separate projections
//   no-wv    identity W_V, no W_O, against learned ones
//   scale    softmax(QKᵀ/√d_k) against softmax(QKᵀ) as d_k grows
//   heads    1, 2, 4, 8 heads at the same d_model
//   scores   scaled-dot, additive, general, laplace, cosine scoring on one task
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace qkv {

struct ExperimentOptions {
  bool quick = false;  // smaller tasks and fewer steps: about a minute, for smoke tests
  std::function<void(const std::string&)> progress;  // hears a line per training run
};

struct ExperimentResult {
  std::string name, question, setup;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;  // formatted cells
  std::string reading;                         // one paragraph: what the table says
  double seconds = 0;
};

std::vector<std::string> experiment_names();
// Throws qkv::Error (usage) for an unknown name, listing the known ones.
ExperimentResult run_experiment(const std::string& name, const ExperimentOptions& options);

}  // namespace qkv
