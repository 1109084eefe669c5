// qkv/nn.h — trainable transformer layers: explicit forward/backward pairs (llm.c style).
//
// Every layer's forward saves what its backward needs (one forward, then at most one backward);
// backward takes ∂loss/∂output, accumulates (+=) into its parameters' gradients and returns
// ∂loss/∂input. Layers run in the dtype they were built with: float32 for training (the fast
// kernels), float64 for the finite-difference gradient checks (the reference kernels).
// Tensors are [B, L, D] (batch, sequence, features) unless a comment says otherwise.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qkv/attention.h"
#include "qkv/tensor.h"

namespace qkv::nn {

// A learnable tensor, its gradient (same shape and dtype, accumulated by backward), and the name
// it is saved under ("encoder.0.attention.q.weight").
struct Parameter {
  std::string name;
  Tensor value;
  Tensor grad;
};

// Deterministic random numbers (SplitMix64): the same seed gives the same initialization, the
// same dropout masks and the same task data on every machine and thread count.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform();                    // [0, 1)
  double normal();                     // N(0, 1)
  int64_t below(int64_t n);            // uniform in [0, n)
  Rng split() { return Rng(next()); }  // an independent stream

 private:
  uint64_t state_;
};

// Something with parameters.
class Module {
 public:
  virtual ~Module() = default;
  // Appends this module's parameters, then its children's, in a fixed order.
  virtual void collect(std::vector<Parameter*>& out) = 0;
  std::vector<Parameter*> parameters();
  void zero_grad();
  int64_t parameter_count();
};

// A parameter of `shape` filled with N(0, std²) (std = 0: zeros), gradient zeroed.
Parameter make_parameter(std::string name, Shape shape, double std, Rng& rng, DType dtype);

// y = x·Wᵀ + b (torch.nn.Linear). Weights N(0, 1/in) (Xavier-like), bias zero.
class Linear : public Module {
 public:
  Linear(std::string name, int64_t in, int64_t out, bool bias, Rng& rng, DType dtype = DType::f32);
  Tensor forward(const Tensor& x);    // x: [..., in] → [..., out]; saves x
  Tensor backward(const Tensor& dy);  // dy: [..., out] → dx; dW += dyᵀ·x, db += Σ dy
  void collect(std::vector<Parameter*>& out) override;
  int64_t in() const { return weight.value.dim(1); }
  int64_t out() const { return weight.value.dim(0); }

  Parameter weight;  // [out, in]
  Parameter bias;    // [out], undefined when built without bias

 private:
  Tensor x_;
};

// Rows of a table looked up by id (torch.nn.Embedding). Weights N(0, 1).
class Embedding : public Module {
 public:
  Embedding(std::string name, int64_t vocab, int64_t dim, Rng& rng, DType dtype = DType::f32);
  // ids: B sequences of equal length L → [B, L, dim]; saves the ids.
  Tensor forward(const std::vector<std::vector<int32_t>>& ids);
  void backward(const Tensor& dy);  // weight.grad[id] += dy rows
  void collect(std::vector<Parameter*>& out) override;

  Parameter weight;  // [vocab, dim]

 private:
  std::vector<std::vector<int32_t>> ids_;
};

// The sinusoidal position table of Vaswani et al. 2017 §3.5: [length, dim],
// PE(p, 2i) = sin(p / 10000^(2i/dim)), PE(p, 2i+1) = cos(p / 10000^(2i/dim)).
Tensor sinusoidal_positions(int64_t length, int64_t dim, DType dtype = DType::f32);

// torch.nn.LayerNorm over the last dimension; weight 1, bias 0.
class LayerNorm : public Module {
 public:
  LayerNorm(std::string name, int64_t dim, double eps = 1e-5, DType dtype = DType::f32);
  Tensor forward(const Tensor& x);  // saves x̂ and 1/σ per row
  Tensor backward(const Tensor& dy);
  void collect(std::vector<Parameter*>& out) override;

  Parameter weight, bias;  // [dim]
  double eps;

 private:
  Tensor xhat_, inv_std_;
};

// Inverted dropout: zero each entry with probability p while training, scale the rest by
// 1/(1 − p) (one rng.uniform() per entry, row-major); the identity otherwise (x itself is
// returned, and nothing is drawn). p must be in [0, 1).
class Dropout {
 public:
  explicit Dropout(double p = 0.0) : p_(p) {}
  Tensor forward(const Tensor& x, bool training, Rng& rng);
  Tensor backward(const Tensor& dy);
  double p() const { return p_; }

 private:
  double p_;
  Tensor mask_;  // the scale applied to each entry (0 or 1/(1 − p)); undefined: identity
};

enum class Activation { relu, gelu };

// Linear → activation → dropout → Linear (the transformer's position-wise FFN).
class FeedForward : public Module {
 public:
  FeedForward(std::string name, int64_t dim, int64_t hidden, Activation activation, double dropout,
              Rng& rng, DType dtype = DType::f32);
  Tensor forward(const Tensor& x, bool training, Rng& rng);
  Tensor backward(const Tensor& dy);
  void collect(std::vector<Parameter*>& out) override;

  Linear in, out;
  Activation activation;

 private:
  Dropout dropout_;
  Tensor pre_activation_;
};

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

// One GRU step at a time, for a decoder whose next input depends on the last output (RNNsearch's
// s_i from s_{i−1}, y_{i−1} and c_i: pass x = [e(y_{i−1}); c_i], as W·[e; c] = W_e e + C c).
// Each forward saves its step on a stack; each backward takes back the latest (BPTT's order).
class GRUCell : public Module {
 public:
  GRUCell(std::string name, int64_t in, int64_t hidden, Rng& rng, DType dtype = DType::f32);
  Tensor forward(const Tensor& x, const Tensor& h);  // x: [B, in], h: [B, H] → h': [B, H]
  struct Grads {
    Tensor dx, dh;  // [B, in], [B, H]
  };
  Grads backward(const Tensor& dh_next);  // ∂loss/∂h' of the latest forward not yet taken back
  void clear();                           // forgets the saved steps
  int64_t saved_steps() const { return static_cast<int64_t>(saved_.size()); }
  void collect(std::vector<Parameter*>& out) override;
  int64_t in() const { return weight_ih.value.dim(1); }
  int64_t hidden() const { return weight_hh.value.dim(1); }

  Parameter weight_ih;  // W: [3H, in], rows z, r, n; N(0, 1/in)
  Parameter weight_hh;  // U: [3H, H], rows z, r, n; N(0, 1/H)
  Parameter bias;       // b: [3H], zero

 private:
  struct Step;
  std::vector<std::shared_ptr<Step>> saved_;
};

// A GRU over a sequence: x [B, T, in] → the states h_1..h_T as [B, T, H], from h0 [B, H]
// (undefined: zeros). lengths (empty: all T) gives each sequence's length; from there on the
// state is left as it is and the output is 0, and those steps get no gradient. reverse runs each
// sequence from its last real step back to its first (Bahdanau's backward RNN).
class GRU : public Module {
 public:
  GRU(std::string name, int64_t in, int64_t hidden, bool reverse, Rng& rng,
      DType dtype = DType::f32);
  Tensor forward(const Tensor& x, const Tensor& h0 = {}, const std::vector<int64_t>& lengths = {});
  struct Grads {
    Tensor dx, dh0;  // [B, T, in] (0 at padding), [B, H]
  };
  Grads backward(const Tensor& dy);  // dy: [B, T, H]; entries at padding are ignored
  void collect(std::vector<Parameter*>& out) override { cell.collect(out); }
  bool reverse() const { return reverse_; }

  GRUCell cell;  // the parameters (name.weight_ih, ...); the sequence runs its own loop

 private:
  bool reverse_;
  struct Saved;
  std::shared_ptr<Saved> saved_;
};

// Bahdanau's annotations: a forward and a reverse GRU over the same x, concatenated,
// h_j = [→h_j; ←h_j]: [B, T, in] → [B, T, 2H] (the forward's H features first).
class BidirectionalGRU : public Module {
 public:
  BidirectionalGRU(std::string name, int64_t in, int64_t hidden, Rng& rng,
                   DType dtype = DType::f32);
  Tensor forward(const Tensor& x, const Tensor& h0_forward = {}, const Tensor& h0_backward = {},
                 const std::vector<int64_t>& lengths = {});
  struct Grads {
    Tensor dx, dh0_forward, dh0_backward;
  };
  Grads backward(const Tensor& dy);  // dy: [B, T, 2H]
  void collect(std::vector<Parameter*>& out) override;

  GRU forward_gru, backward_gru;  // name.forward.*, name.backward.*
};

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
