// qkv/perceiver.h — Perceiver-style latent queries (Jaegle et al. 2021, "Perceiver: General
// Perception with Iterative Attention"): N learned latent vectors are the queries; the keys and
// the values come from another source, a long input of L symbols. One cross-attention reads the
// whole input at a cost of O(N·L) instead of self-attention's O(L²); the latents then
// self-attend among themselves (O(N²)), and their mean is classified.
//
//   x  = Embedding(ids) + PE                        [B, L, d]   the input (keys and values)
//   z₀ = latents                                    [B, N, d]   learned, the same for every input
//   z₁ = z₀ + CrossAttention(LN(z₀), LN(x))         queries from the latents, K and V from x
//   z₂ = z₁ + FFN(LN(z₁))
//   z  = EncoderBlock^blocks(z₂)                    latent self-attention (pre-norm)
//   logits = Linear(LN(mean over the N latents of z))   [B, classes]
//
// The task that trains it, `count`: a string of L letters a–z with 0 to classes − 1 '#' symbols
// scattered in it; the class is how many '#' there are. A softmax cannot count by averaging (the
// mean of the '#' values is the same for one '#' or nine), but the share of weight that lands on
// them, c·e^Δ / (c·e^Δ + L − c), grows with the count c: a latent that scores '#' higher by Δ
// carries the count in how much '#' it mixes into its output.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qkv/nn.h"
#include "qkv/tensor.h"

namespace qkv {

// ---- the task ----

struct PerceiverExample {
  std::string input;  // L symbols
  int32_t label = 0;  // the class: the count of the counted symbol
};

struct PerceiverTask {
  std::string name;       // "count"
  int64_t length = 1024;  // L
  int64_t classes = 10;   // counts 0 … classes − 1
  std::string alphabet;   // the symbols, in id order; the last one is the counted symbol
  std::string description;
  char counted() const { return alphabet.back(); }
  // One example: every count equally likely, the counted symbols at distinct uniform positions,
  // the other positions uniform letters a–z.
  PerceiverExample generate(nn::Rng& rng) const;
  // The ids of `input` (its symbols' places in the alphabet); a FieldError (field "input") names
  // the first symbol not in the alphabet, or the length when it is not `length`.
  std::vector<int32_t> encode(const std::string& input) const;
};

// A FieldError for a name other than count (field "task") or a length out of 16…65,536 (field
// "length"). The task registry (qkv/train.h) lists it with its defaults.
PerceiverTask make_perceiver_task(const std::string& name, int64_t length = 1024);

// ---- the model ----

struct PerceiverConfig {
  int64_t length = 1024;  // L: the input length trained on (the position table's length)
  int64_t vocab = 27;     // the alphabet's size
  int64_t classes = 10;
  int64_t latents = 16;  // N
  int64_t d_model = 64;
  int64_t heads = 4;
  int64_t blocks = 1;  // latent self-attention blocks after the cross-attention
  std::string task = "count";
  void validate() const;  // a FieldError naming the first field out of range
};

class Perceiver : public nn::Module {
 public:
  Perceiver(const PerceiverConfig& config, nn::Rng& rng, DType dtype = DType::f32);

  // ids: B inputs of config.length ids each → logits [B, classes]. Saves what backward needs;
  // need_weights keeps the cross-attention weights for cross_weights().
  Tensor forward(const std::vector<std::vector<int32_t>>& ids, bool need_weights = false);
  // dlogits: [B, classes]; accumulates every parameter's gradient.
  void backward(const Tensor& dlogits);
  // [B, H, N, L]: how much each latent's query puts on each input position, per head.
  const Tensor& cross_weights() const { return cross.weights(); }

  // The parameters and the config (metadata, with `extra`) to `path`, atomically.
  void save(const std::string& path, const std::map<std::string, std::string>& extra = {});
  static std::unique_ptr<Perceiver> load(const std::string& path,
                                         std::map<std::string, std::string>* metadata = nullptr);

  void collect(std::vector<nn::Parameter*>& out) override;
  const PerceiverConfig& config() const { return config_; }

  nn::Embedding embedding;  // [vocab, d]
  nn::Parameter latents;    // [N, d], N(0, 1)
  nn::LayerNorm input_norm, latent_norm;
  nn::MultiHeadAttention cross;  // queries: latents; keys and values: the input
  nn::LayerNorm ffn_norm;
  nn::FeedForward ffn;
  std::vector<std::unique_ptr<nn::EncoderBlock>> blocks;
  nn::LayerNorm out_norm;
  nn::Linear head;

 private:
  PerceiverConfig config_;
  Tensor positions_;  // [length, d]
  int64_t batch_ = 0;
};

// ---- its held-out sets (train() in qkv/train.h trains it) ----

// The fixed held-out sets (streams no training seed draws from).
std::vector<PerceiverExample> perceiver_validation_set(const PerceiverTask& task, int64_t n);
std::vector<PerceiverExample> perceiver_test_set(const PerceiverTask& task, int64_t n);
double perceiver_accuracy(Perceiver& model, const PerceiverTask& task,
                          const std::vector<PerceiverExample>& examples, int64_t batch_size = 64);

// ---- what the work needs ----
// Peak bytes of the whole process (qkv/memory.h), float32 parameters, known from the config
// before the model is made. train() with batches of `batch_size`: parameters, gradients,
// AdamW's moments, a batch's activations forward and backward over `length` positions, and the
// evaluation's batches of 64.
int64_t perceiver_train_bytes(const PerceiverConfig& config, int64_t batch_size);
// explain::capture() of a Perceiver on one input: the cross-attention's weights of every head,
// latent and position kept, with the reference path's working set.
int64_t perceiver_explain_bytes(const PerceiverConfig& config);

}  // namespace qkv
