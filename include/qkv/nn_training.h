// qkv/nn_training.h — what trains the layers: the loss, gradient clipping, AdamW, and parameter files.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "qkv/nn_modules.h"
#include "qkv/tensor.h"

namespace qkv::nn {

// Mean cross-entropy of softmax(logits) against targets, with label smoothing ε (Szegedy et al.
// 2016: the target distribution is (1 − ε)·one-hot + ε/V). logits: [N, V]; targets: N ids, −1 to
// ignore. Returns the loss, ∂loss/∂logits, and how many targets counted (and were argmax-right).
struct CrossEntropy {
  double loss = 0;
  Tensor dlogits;
  int64_t count = 0, correct = 0;
};
CrossEntropy cross_entropy(const Tensor& logits, const std::vector<int32_t>& targets,
                           double label_smoothing = 0.0);

// Scales every gradient by max_norm / ‖g‖ when the global L2 norm ‖g‖ exceeds it; returns ‖g‖.
double clip_grad_norm(const std::vector<Parameter*>& params, double max_norm);

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.98, eps = 1e-9;
  double weight_decay = 0.01;  // decoupled (Loshchilov & Hutter 2019); not on biases or norms
  int64_t warmup_steps = 0;    // step s (1-based) uses lr·min(1, s/warmup_steps), then lr
  // 0: constant after warmup. Else a cosine decay (Loshchilov & Hutter 2017) from lr at the end
  // of warmup to min_lr_ratio·lr at step decay_steps, constant after.
  int64_t decay_steps = 0;
  double min_lr_ratio = 0.1;
  double clip_norm = 0.0;  // 0: no clipping
};

class AdamW {
 public:
  AdamW(std::vector<Parameter*> params, const AdamWOptions& options);
  // One update from the accumulated gradients (clipped first); returns the gradient norm before
  // clipping. Does not zero the gradients.
  double step();
  int64_t steps() const { return steps_; }
  double learning_rate() const;  // the rate the next step uses

 private:
  std::vector<Parameter*> params_;
  AdamWOptions options_;
  std::vector<Tensor> m_, v_;
  int64_t steps_ = 0;
};

// Parameters to and from safetensors (names as keys, float32 or float64 as stored); loading
// checks that every parameter is present with its shape and finite values (no NaN or ∞), and
// nothing else is; errors name the parameter (qkv::Error, Kind::runtime) and leave every
// parameter as it was (src/nn/parameters_io.cpp, on core's safetensors reader and writer).
void save_parameters(const std::string& path, const std::vector<Parameter*>& params,
                     const std::map<std::string, std::string>& metadata = {});
std::map<std::string, std::string> load_parameters(const std::string& path,
                                                   const std::vector<Parameter*>& params);

}  // namespace qkv::nn
