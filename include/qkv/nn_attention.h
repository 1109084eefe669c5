// qkv/nn_attention.h — multi-head attention, Bahdanau's additive attention and the transformer's encoder and
// decoder blocks, as trainable layers (qkv/nn.h says how every layer's forward and backward pair).
#pragma once

#include <cstdint>
#include <vector>

#include "qkv/attention.h"
#include "qkv/nn_modules.h"
#include "qkv/tensor.h"

namespace qkv::nn {

struct MultiHeadAttentionOptions {
  int64_t d_model = 64;  // = heads · d_k
  int64_t heads = 4;
  int64_t kv_heads = 0;  // grouped-query attention; 0: heads
  int64_t kdim = 0;      // width of the memory keys and values are projected from; 0: d_model
  bool bias = true;
  Score score = Score::scaled_dot;  // general/additive get their ScoreParams as parameters too
  bool tie_qk = false;              // W_K = W_Q (and b_K = b_Q): QKᵀ becomes symmetric
  bool identity_v = false;          // no W_V and no W_O: values are the memory itself
  double dropout = 0.0;             // on the attention weights while training
};

// Multi-head attention with learned projections (Vaswani et al. 2017 §3.2.2):
//   Q = x·W_Qᵀ, K = memory·W_Kᵀ, V = memory·W_Vᵀ, split into heads, attention per head through
//   qkv::attention, heads concatenated, then ·W_Oᵀ.
// Self-attention: memory = x. Cross-attention: memory = the encoder's output.
class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(std::string name, const MultiHeadAttentionOptions& options, Rng& rng,
                     DType dtype = DType::f32);
  // x: [B, L, d_model], memory: [B, S, kdim]; key_lengths: one per batch (empty: all S keys);
  // need_weights keeps [B, H, L, S] weights for weights().
  Tensor forward(const Tensor& x, const Tensor& memory, const std::vector<int64_t>& key_lengths,
                 Causal causal, bool training, Rng& rng, bool need_weights = false);
  struct Grads {
    Tensor dx, dmemory;  // self-attention: the caller adds them
  };
  Grads backward(const Tensor& dout);
  const Tensor& weights() const { return weights_; }
  void collect(std::vector<Parameter*>& out) override;
  const MultiHeadAttentionOptions& options() const { return options_; }

  std::unique_ptr<Linear> q, k, v, o;  // k is null when tie_qk; v and o are null when identity_v
  ScoreParams score_params;            // general / additive, as parameters below
  std::vector<Parameter> extra;        // the score's own parameters (W, or W_q, W_k, v)
  // Non-null: every forward overwrites *capture (attention then runs the float64 reference path,
  // cast back to the layer's dtype). Null (the default): nothing is kept, the fast path runs.
  AttentionCapture* capture = nullptr;

 private:
  MultiHeadAttentionOptions options_;
  Tensor weights_;
  struct Saved;
  std::shared_ptr<Saved> saved_;
};

// Gated recurrent units (Cho et al. 2014), in the form of Bahdanau et al. 2014, Appendix A.1.1
// (RNNsearch's encoder and decoder), with biases added:
//   z  = σ(W_z x + U_z h + b_z)             update gate
//   r  = σ(W_r x + U_r h + b_r)             reset gate
//   h̃  = tanh(W_n x + U_n (r ⊙ h) + b_n)    candidate: r resets h *before* U_n
//   h' = (1 − z) ⊙ h + z ⊙ h̃
// src/nn/gru_step.h says why this form and not PyTorch's. W = [W_z; W_r; W_n] is weight_ih
// [3H, in], U = [U_z; U_r; U_n] is weight_hh [3H, H], b = [b_z; b_r; b_n] is bias [3H].

// Bahdanau et al. 2014's attention for a decoder that asks one query at a time, over memory h
// [B, S, Dk] (the keys and also the values):
//   e_j = v_aᵀ tanh(W_a s + U_a h_j),  α = softmax over the real keys j < length,  c = Σ_j α_j h_j
// It equals qkv::attention with the additive score (params w_q = W_a, w_k = U_a, v = v_a; keys =
// values = h; tested), but U_a h_j is computed once per source, not once per step (App. A.1.2:
// "U_a h_j … can be pre-computed"). Each forward saves its step; each backward takes back the
// latest, as GRUCell's; memory_backward then returns ∂h from every step.
class AdditiveAttention : public Module {
 public:
  AdditiveAttention(std::string name, int64_t query_dim, int64_t memory_dim, int64_t hidden,
                    Rng& rng, DType dtype = DType::f32);
  // memory: [B, S, Dk]; lengths: one per batch entry (empty: all S). Forgets saved steps.
  void set_memory(const Tensor& memory, const std::vector<int64_t>& lengths = {});
  // s: [B, Dq] → the context c [B, Dk]; weights (optional) receives α [B, S] (0 at padding).
  Tensor forward(const Tensor& s, Tensor* weights = nullptr);
  Tensor backward(const Tensor& dcontext);  // → ∂s [B, Dq] of the latest step not taken back
  Tensor memory_backward();                 // → ∂h [B, S, Dk] from every step taken back
  void collect(std::vector<Parameter*>& out) override;

  Parameter w_a;  // [A, Dq], N(0, 1/Dq)
  Linear u_a;     // [A, Dk], no bias
  Parameter v_a;  // [A], N(0, 1/A)

 private:
  struct Step;
  Tensor memory_, projected_, dmemory_, dprojected_;  // h, U_a h, and their gradients
  std::vector<int64_t> lengths_;
  std::vector<std::shared_ptr<Step>> saved_;
};

enum class NormPosition { pre, post };  // LayerNorm before each sublayer (pre) or after (post)

struct BlockOptions {
  int64_t d_model = 64;
  int64_t heads = 4;
  int64_t ffn_hidden = 256;
  Activation activation = Activation::relu;
  NormPosition norm = NormPosition::pre;
  double dropout = 0.0;
  MultiHeadAttentionOptions attention;  // d_model and heads are taken from above
};

// Self-attention + FFN, each with a residual connection and a LayerNorm.
class EncoderBlock : public Module {
 public:
  EncoderBlock(std::string name, const BlockOptions& options, Rng& rng, DType dtype = DType::f32);
  Tensor forward(const Tensor& x, const std::vector<int64_t>& lengths, bool training, Rng& rng,
                 bool need_weights = false);
  Tensor backward(const Tensor& dy);
  void collect(std::vector<Parameter*>& out) override;

  MultiHeadAttention attention;
  FeedForward ffn;
  LayerNorm norm1, norm2;

 private:
  BlockOptions options_;
  Dropout drop1_, drop2_;
};

// Masked (causal) self-attention + cross-attention to the encoder's memory + FFN.
class DecoderBlock : public Module {
 public:
  DecoderBlock(std::string name, const BlockOptions& options, Rng& rng, DType dtype = DType::f32);
  Tensor forward(const Tensor& x, const Tensor& memory, const std::vector<int64_t>& lengths,
                 const std::vector<int64_t>& memory_lengths, bool training, Rng& rng,
                 bool need_weights = false);
  struct Grads {
    Tensor dx, dmemory;
  };
  Grads backward(const Tensor& dy);
  void collect(std::vector<Parameter*>& out) override;

  MultiHeadAttention self_attention, cross_attention;
  FeedForward ffn;
  LayerNorm norm1, norm2, norm3;

 private:
  BlockOptions options_;
  Dropout drop1_, drop2_, drop3_;
};

}  // namespace qkv::nn
