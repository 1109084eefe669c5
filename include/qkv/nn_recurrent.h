// qkv/nn_recurrent.h — gated recurrent units (Cho et al. 2014): one step, a sequence, both directions.
#pragma once

#include <cstdint>
#include <vector>

#include "qkv/nn_modules.h"
#include "qkv/tensor.h"

namespace qkv::nn {

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

}  // namespace qkv::nn
