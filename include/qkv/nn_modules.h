// qkv/nn_modules.h — trainable layers: explicit forward/backward pairs (llm.c style).
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

}  // namespace qkv::nn
