// models/llama/llama.h — a GGUF decoder (llama, qwen2, qwen3, gemma3: LlamaConfig says what each
// architecture changes) run on its weights, kept as the file's blocks or as float32 (matrix.h):
//
//   h₀ = embedding[id] · s                          (s = √hidden for Gemma, else 1)
//   for each layer:  x = RMSNorm(h)·w₁;  q, k, v = x·W_Qᵀ (+ b_Q), x·W_Kᵀ (+ b_K), x·W_Vᵀ (+ b_V)
//                    q, k ← RMSNorm over each head (qwen3, gemma3);  q, k ← RoPE(q, k, pos)
//                    a = W_O · attention(q, K, V)   (grouped-query heads, causal, with the cache;
//                                                    a sliding window on Gemma's local layers)
//                    h += a  (Gemma: h += RMSNorm(a)·w_post)
//                    x = RMSNorm(h)·w₂;  f = W_down · (act(x·W_gateᵀ) ⊙ x·W_upᵀ)
//                    h += f  (Gemma: h += RMSNorm(f)·w_post);  act = SiLU, or GELU (tanh) for Gemma
//   logits = RMSNorm(h)·w · Eᵀ   (E the output matrix, or the embedding when tied)
//
// RMSNorm(x) = x / √(mean(x²) + ε) (Zhang & Sennrich 2019). RoPE (Su et al. 2021) as llama.cpp
// applies it: the first rope_dims dimensions of each head turn in pairs, (2i, 2i + 1) for llama's
// GGUF (whose converter permuted W_Q and W_K so that this equals Hugging Face's rotate-half) or
// (i, i + r/2) for the others, by pos·scale·base^(−2i/r) / factor_i. Attention runs through
// qkv::attention at the config's scale, causal bottom-right, so new queries see the whole cache.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "models/llama/matrix.h"
#include "nn/dense.h"
#include "qkv/attention.h"
#include "qkv/causal_lm.h"
#include "qkv/residual.h"
#include "qkv/tensor.h"

namespace qkv {

// From a GGUF file's llama.* metadata, checked against its table of tensors: every tensor the
// config needs is there, of the shape the config gives it, and there is no other (no tensor's
// bytes are read). Errors name the file and the key or the tensor.
LlamaConfig read_llama_config(const GgufFile& file);
// The bytes read_llama_weights' result holds in `format` (models/llama/matrix.h) — the file's
// blocks, or every weight dequantized to float32 and the matrices packed besides — from the header
// alone, so that a caller can size a model before reading it.
int64_t llama_weight_bytes(const GgufFile& file, const LlamaConfig& config, WeightFormat format);

// Calls fn(name, shape) for every tensor a model of the config holds, in the order read.
void for_each_llama_tensor(const LlamaConfig& config,
                           const std::function<void(const std::string&, const Shape&)>& fn);

struct LlamaLayer {
  Tensor attn_norm, ffn_norm;                    // [hidden]
  LlamaMatrix q, k, v, o, gate, up, down;       // q, k, v with biases where the config has them
  Tensor q_norm, k_norm;                         // [head_dim], where config.qk_norm
  Tensor post_attn_norm, post_ffn_norm;          // [hidden], where config.post_norms
};
struct LlamaWeights {
  LlamaMatrix embedding;  // [vocab, hidden]
  std::vector<LlamaLayer> layers;
  Tensor output_norm;  // [hidden]
  LlamaMatrix output;  // [vocab, hidden]: the embedding itself when tied
  std::vector<double> rope_factors;  // [rope_dims / 2] where config.rope_factors
};
// Every tensor the config needs, read and checked for its shape and finite values; the matrices
// kept as `format` says, the rest (norms, biases) as float32.
LlamaWeights read_llama_weights(const GgufFile& file, const LlamaConfig& config,
                                WeightFormat format = WeightFormat::file);

// The keys and values of every layer so far: [1, kv_heads, capacity, head_dim] each, of which
// the first `length` positions are filled. The capacity doubles as it fills, so a token appended
// costs its own keys and values, not a copy of the whole cache.
struct KvCache {
  std::vector<Tensor> k, v;
  int64_t length = 0;
  // The positions the caller will fill at most (0: not known): the first allocation takes them
  // all, so that a generation of known length never doubles its cache (nor holds two copies while
  // it grows).
  int64_t reserve = 0;
};

struct LlamaOptions {
  // Non-null: each layer's attention (q and k after RoPE, the cache's k and v, scores, logits,
  // weights, head outputs) is kept here, one per layer, through the float64 reference.
  std::vector<AttentionCapture>* capture = nullptr;
  // With capture: each layer's attention on the fused path instead, its rows' softmax kept
  // (AttentionCapture::saved_max, saved_sum) beside q, k, v and the head outputs, no L×S matrix:
  // O(n·d) a layer, any weight recomputed exactly (qkv/attention_weights.h).
  bool capture_rows = false;
  // Only the last position's logits, [1, vocab]: all that choosing the next token needs. The
  // output matrix is the largest (vocab × hidden), so on a long prompt this saves about a fifth
  // of the work.
  bool last_logits_only = false;
  // How matrices kept as blocks multiply a pass of at most kInt8Rows rows (matrix.h): float32
  // gives the float32 path's bits.
  cpu::QuantProduct product = cpu::QuantProduct::float32;
};

// Runs `ids` at positions cache.length … cache.length + n − 1, appends their keys and values to
// the cache, and returns the logits of every new position, [n, vocab] (float32), or of the last
// alone with options.last_logits_only.
Tensor llama_forward(const LlamaWeights& weights, const LlamaConfig& config,
                     const std::vector<int32_t>& ids, KvCache& cache,
                     const LlamaOptions& options = {});

// The rotations of RoPE for positions start … start + n − 1 of layer l (the sliding layers have
// their own base): cos and sin of each position's angle for each of the rope_dims / 2 pairs,
// [n, rope_dims / 2], computed once and applied to every head of the layer.
struct RopeTable {
  int64_t n = 0, d = 0, dims = 0;  // positions, head dimension, dimensions turned
  RopePairing pairing = RopePairing::adjacent;
  std::vector<double> cos, sin;
};
RopeTable rope_table(const LlamaConfig& config, const LlamaWeights& weights, int64_t layer,
                     int64_t start, int64_t n);
// RoPE in place on x [1, heads, n, head_dim] (contiguous), with the table of its positions.
void rope(Tensor& x, const RopeTable& table);

// The pieces of llama_forward, for the lens (qkv/residual.h): h₀ of ids at positions start …;
// one layer l over h [n, hidden] at positions cache.length … cache.length + n − 1 (rotations
// theirs), its keys and values appended to the cache (whose length the caller advances), its
// attention captured when `capture` is non-null (as rows with `capture_rows`: LlamaOptions), hooks
// applied.
Tensor llama_embed(const LlamaWeights& weights, const LlamaConfig& config,
                   const std::vector<int32_t>& ids, int64_t start);
void llama_layer(const LlamaWeights& weights, const LlamaConfig& config, int64_t layer, Tensor& h,
                 KvCache& cache, std::vector<AttentionCapture>* capture, const LayerHooks& hooks,
                 bool capture_rows = false,
                 cpu::QuantProduct product = cpu::QuantProduct::float32);
// The logits of normed rows [n, hidden]: the output matrix, then Gemma's soft cap where it has
// one.
Tensor llama_unembed(const LlamaWeights& weights, const LlamaConfig& config, const Tensor& normed,
                     cpu::QuantProduct product = cpu::QuantProduct::float32);
// x ← x / √(mean(x²) + ε) · gain over the rows of x [n, d] (contiguous float32): RMSNorm.
void llama_rms_norm(Tensor& x, const Tensor& gain, double eps);

}  // namespace qkv
