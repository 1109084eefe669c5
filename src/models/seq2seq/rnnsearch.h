// RNNsearch (Bahdanau, Cho and Bengio 2014): a bidirectional GRU encoder, a GRU decoder, and the
// additive attention between them (see qkv/model.h for the equations).
#pragma once

#include <string>
#include <vector>

#include "qkv/model.h"

namespace qkv {

class RnnSearch final : public Seq2Seq {
 public:
  RnnSearch(const Seq2SeqConfig& config, nn::Rng& rng, DType dtype);

  Tensor forward(const Batch& batch, bool training, nn::Rng& rng) override;
  void backward(const Tensor& dlogits) override;
  Seq2SeqCapture capture(const std::string& source) override;
  void collect(std::vector<nn::Parameter*>& out) override;

 private:
  void decode_batch(Batch batch, int alignment_layer, Decoded& result) override;
  // The annotations h [B, S, d] and the first decoder state s_0 [B, d] of a batch's sources.
  struct Encoded {
    Tensor annotations, state;
  };
  Encoded encode(const Batch& batch);
  // attention_ as qkv::attention's options (the capture's reference run).
  AttentionOptions attention_options(const std::vector<int64_t>& source_lengths) const;

  DType dtype_;
  int64_t d_;  // d_model: the annotations' and the decoder state's width
  nn::Embedding source_embedding_, target_embedding_;
  nn::BidirectionalGRU encoder_;
  nn::Linear init_;  // W_s: ←h_1 → s_0 (then tanh)
  // e_ij = v_aᵀ tanh(W_a s_{i−1} + U_a h_j), W_a and U_a [d, d], v_a [d]: as qkv::attention's
  // additive params w_q, w_k, v (the capture runs qkv::attention itself).
  nn::AdditiveAttention attention_;
  nn::GRUCell decoder_;  // input [E_y y_{i−1}; c_i] (2d), state s (d)
  nn::Linear readout_;   // O: [s_i; E_y y_{i−1}; c_i] (3d) → d, then tanh
  nn::Linear output_;    // W_o: d → vocabulary

  // Saved by forward for backward.
  std::vector<int64_t> source_lengths_;
  Tensor annotations_;         // [B, S, d]
  Tensor state0_;              // s_0 [B, d] (after tanh)
  std::vector<Tensor> query_;  // s_{t−1} [B, d] for every step t
  Tensor readout_tanh_;        // tanh(O [s; e; c]) [B, T, d]
};

}  // namespace qkv
