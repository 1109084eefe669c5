// qkv/residual.h — a model with a residual stream and an unembedding, run one layer at a time with
// hooks: what the causal lens (qkv/explain_lens.h) needs to intervene on a run exactly. A decoder
// (CausalLM::residual) gives one; each layer l maps the stream h [n, hidden] to
//
//   h ← h + W_O · concat_h(o_h),   o_h = Σ_j α^h_ij v^h_j   (the heads' outputs, W_O's input)
//   h ← h + MLP(h)
//
// and the logits are unembed(final_norm(h)). The hooks read or change what passes between those
// steps; a hook left empty costs nothing. An encoder–decoder's decoder (Seq2Seq::residual) gives
// one too, its attentions as layers of their own: layer 2b is block b's causal self-attention (no
// MLP after it), layer 2b + 1 its cross-attention over the encoder's output, then the block's MLP.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qkv/tensor.h"

namespace qkv {

// A pass runs one sequence, the stream [n, hidden], or B sequences side by side, [B, n, hidden]
// (interventions batched: the weights are read once for all of them); B = 1 below for the first.
struct LayerHooks {
  // Layer l's heads' outputs o, [B, H, n, head_dim] float32 (W_O's input, head by head): read or
  // changed in place before W_O applies (a head ablated is its slice set here).
  std::function<void(int64_t layer, Tensor& heads)> heads;
  // Layer l's keep-mask, bool [1 or B, H, n, keys(l, n)]: true where query i may attend to key j
  // (combined with the causal mask by AND); an undefined tensor: none. A blocked edge is −∞ before
  // the softmax.
  std::function<Tensor(int64_t layer)> mask;
  // The stream after layer l's attention and after its MLP: read or changed in place.
  std::function<void(int64_t layer, Tensor&stream)> attended, layer_out;
};

class ResidualModel {
 public:
  virtual ~ResidualModel() = default;
  virtual int64_t layers() const = 0;
  virtual int64_t heads() const = 0;
  virtual int64_t kv_heads() const = 0;
  virtual int64_t head_dim() const = 0;
  virtual int64_t hidden() const = 0;
  virtual int64_t vocab() const = 0;
  virtual int64_t context() const = 0;  // positions read at most
  virtual std::string token_text(int32_t id) const = 0;
  // Layer l as the views name it: "L5" (a decoder), "L0 self", "L0 cross" (an encoder–decoder).
  virtual std::string layer_name(int64_t l) const { return "L" + std::to_string(l); }
  // The keys layer l's queries read at n positions: the positions themselves (self-attention), or
  // the encoder's outputs (cross-attention); and whether query i sees key j ≤ i only.
  virtual int64_t keys(int64_t /*l*/, int64_t n) const { return n; }
  virtual bool causal(int64_t /*l*/) const { return true; }
  virtual std::vector<int32_t> tokenize(const std::string& text) const = 0;
  // A piece of text as the tokens it is inside a text, without the BOS (or EOS) a whole text
  // starts with: a --target or --tokens item.
  virtual std::vector<int32_t> tokenize_piece(const std::string& text) const {
    return tokenize(text);
  }

  // h₀ [n, hidden] float32: the ids' embeddings (ids checked against the vocabulary, n against
  // the context).
  virtual Tensor embed(const std::vector<int32_t>& ids) const = 0;
  // h ← layer l (h) in place, positions 0 … n − 1 (causal), hooks applied; h [n, hidden] or
  // [B, n, hidden].
  virtual void layer(int64_t l, Tensor& h, const LayerHooks& hooks = {}) const = 0;
  // The final norm of each row of h [n, hidden], float32.
  virtual Tensor final_norm(const Tensor& h) const = 0;
  // The final norm as the linear map it is at a frozen scale: x [hidden] float64 (a part of the
  // stream) through the norm whose scale `at` [hidden] (the whole stream, float32) gives it —
  // RMSNorm: x ⊙ g / rms(at). Parts mapped so sum to final_norm(at) (a norm with a bias or a
  // centring adds its constant to none of them).
  virtual std::vector<double> final_norm_frozen(const std::vector<double>& x,
                                                const float* at) const = 0;
  // Logits of each row of normed [n, hidden] (after final_norm), [n, vocab] float32.
  virtual Tensor unembed(const Tensor& normed) const = 0;
  // Row `id` of the unembedding, [hidden] float64: logit(id) = normed · row + logit_bias(id).
  virtual std::vector<double> unembedding_row(int32_t id) const = 0;
  // The part of logit(id) no layer writes: the final norm's bias through the unembedding, and the
  // unembedding's own bias (0 for RMSNorm and an unembedding without bias).
  virtual double logit_bias(int32_t /*id*/) const { return 0; }
  // Layer l's matrices, float32 [out, in] as y = x·Wᵀ: W_Q [H·d, hidden], W_K and W_V
  // [Hkv·d, hidden], W_O [hidden, H·d] (columns h·d … h·d + d − 1 take head h's output).
  virtual const Tensor& query_matrix(int64_t l) const = 0;
  virtual const Tensor& key_matrix(int64_t l) const = 0;
  virtual const Tensor& value_matrix(int64_t l) const = 0;
  virtual const Tensor& output_matrix(int64_t l) const = 0;
  // The norm before layer l's attention, of each row of h [n, hidden]: what W_Q, W_K, W_V read.
  virtual Tensor attention_norm(int64_t l, const Tensor& h) const = 0;
  // Where position enters: x [1, heads, n, head_dim] (queries or keys) as at positions start …
  // start + n − 1, in place (RoPE rotates q and k; v and the stream carry no position; a model
  // that adds its positions to the embedding leaves x as it is).
  virtual void position(int64_t l, Tensor& x, int64_t start) const = 0;
  // What layer l does to one head's projected queries or keys, x [1, T, 1, d] = W_Q·x (or W_K·x)
  // of normed rows, before position: its bias and its per-head norm where it has them (qwen2,
  // qwen3, gemma3); nothing for the others.
  virtual void finish_projection(int64_t /*l*/, Tensor& /*x*/, int64_t /*head*/,
                                 bool /*query*/) const {}
  // The scale of layer l's scores: 1/√head_dim but where the architecture says otherwise.
  virtual double attention_scale(int64_t /*l*/) const {
    return 1.0 / std::sqrt(static_cast<double>(head_dim()));
  }
  // The part of layer l's attention output that one head's W_O-projected output `part` makes,
  // given the whole (every head's sum, and W_O's bias): `part` itself, unless a norm follows
  // (Gemma's post-attention RMSNorm: then part scaled as the whole is, the norm frozen there, so
  // that the parts still sum to what the layer adds).
  virtual std::vector<double> attention_part(int64_t /*l*/, const std::vector<double>& part,
                                             const std::vector<double>& /*whole*/) const {
    return part;
  }
};

}  // namespace qkv
