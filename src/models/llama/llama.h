// models/llama/llama.h — a Llama-architecture decoder (SmolLM2) from a GGUF file, run on its
// weights dequantized to float32:
//
//   h₀ = embedding[id]
//   for each layer:  x = RMSNorm(h)·w₁;  q, k, v = x·W_Qᵀ, x·W_Kᵀ, x·W_Vᵀ;  q, k ← RoPE(q, k, pos)
//                    h += W_O · attention(q, K, V)   (grouped-query heads, causal, with the cache)
//                    x = RMSNorm(h)·w₂;  h += W_down · (SiLU(x·W_gateᵀ) ⊙ x·W_upᵀ)
//   logits = RMSNorm(h)·w · Eᵀ   (E the output matrix, or the embedding when tied)
//
// RMSNorm(x) = x / √(mean(x²) + ε) (Zhang & Sennrich 2019). RoPE (Su et al. 2021) as llama.cpp
// applies it to GGUF llama weights: dimensions (2i, 2i + 1) of each head rotate together by
// pos·base^(−2i/d). (The GGUF converter permutes W_Q and W_K so this pairing equals Hugging
// Face's rotate-half on the original weights: the scores are the same.) Attention runs through
// qkv::attention: scaled dot, 1/√d, causal bottom-right, so new queries see the whole cache.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/gguf.h"
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
// The bytes read_llama_weights' result holds — every weight dequantized to float32, the matrices
// packed besides (nn::pack) — from the config alone, so that a caller can size a model before
// reading it.
int64_t llama_weight_bytes(const LlamaConfig& config);

struct LlamaLayer {
  Tensor attn_norm, ffn_norm;                    // [hidden]
  nn::LinearWeights q, k, v, o, gate, up, down;  // no biases
};
struct LlamaWeights {
  Tensor embedding;  // [vocab, hidden]
  std::vector<LlamaLayer> layers;
  Tensor output_norm;        // [hidden]
  nn::LinearWeights output;  // [vocab, hidden]: the embedding itself when tied
};
// Every tensor the config needs, read, dequantized and checked for its shape and finite values.
LlamaWeights read_llama_weights(const GgufFile& file, const LlamaConfig& config);

// The keys and values of every layer so far: [1, kv_heads, capacity, head_dim] each, of which
// the first `length` positions are filled. The capacity doubles as it fills, so a token appended
// costs its own keys and values, not a copy of the whole cache.
struct KvCache {
  std::vector<Tensor> k, v;
  int64_t length = 0;
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
};

// Runs `ids` at positions cache.length … cache.length + n − 1, appends their keys and values to
// the cache, and returns the logits of every new position, [n, vocab] (float32), or of the last
// alone with options.last_logits_only.
Tensor llama_forward(const LlamaWeights& weights, const LlamaConfig& config,
                     const std::vector<int32_t>& ids, KvCache& cache,
                     const LlamaOptions& options = {});

// The rotations of RoPE for positions start … start + n − 1 of heads of dimension d: cos and sin
// of pos·base^(−2i/d), [n, d/2] each, computed once and applied to every head of every layer.
struct RopeTable {
  int64_t n = 0, d = 0;
  std::vector<double> cos, sin;
};
RopeTable rope_table(int64_t start, int64_t n, int64_t d, double base);
// RoPE in place on x [1, heads, n, head_dim] (contiguous), with the table of its positions.
void rope(Tensor& x, const RopeTable& table);
// The same, the table made for this call.
void rope(Tensor& x, int64_t start, double base);

// The pieces of llama_forward, for the lens (qkv/residual.h): h₀ of ids at positions start …;
// one layer l over h [n, hidden] at positions cache.length … cache.length + n − 1 (rotations
// theirs), its keys and values appended to the cache (whose length the caller advances), its
// attention captured when `capture` is non-null (as rows with `capture_rows`: LlamaOptions), hooks
// applied.
Tensor llama_embed(const LlamaWeights& weights, const LlamaConfig& config,
                   const std::vector<int32_t>& ids, int64_t start);
void llama_layer(const LlamaWeights& weights, const LlamaConfig& config, int64_t layer, Tensor& h,
                 const RopeTable& rotations, KvCache& cache, std::vector<AttentionCapture>* capture,
                 const LayerHooks& hooks, bool capture_rows = false);
// x ← x / √(mean(x²) + ε) · gain over the rows of x [n, d] (contiguous float32): RMSNorm.
void llama_rms_norm(Tensor& x, const Tensor& gain, double eps);

}  // namespace qkv
