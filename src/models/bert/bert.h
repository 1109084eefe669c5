// models/bert/bert.h — a BERT encoder (Devlin et al. 2019), as all-MiniLM-L6-v2 uses it:
//
//   h₀ = LayerNorm(word[id] + position[i] + token_type[type])   (type: 0, or 1 for B of a pair)
//   for each layer:  a = LayerNorm(h + W_O · MultiHeadSelfAttention(h))      (post-norm)
//                    h = LayerNorm(a + W₂ · GELU(W₁ a + b₁) + b₂)
//
// Each head's attention runs through qkv::attention (scaled-dot, key padding as key_lengths).
// Weights come from a Hugging Face checkpoint (config.json + model.safetensors). float32 weights
// run the fast path; the same weights converted to float64 run the float64 reference end to end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/dense.h"
#include "qkv/attention.h"
#include "qkv/files.h"
#include "qkv/model.h"
#include "qkv/tensor.h"

namespace qkv {

// A config.json: a few hundred bytes in practice.
inline constexpr InputSpec kBertConfigInput{
    .expected = "a regular JSON file", .max_bytes = uint64_t{16} << 20, .noun = "the model config"};

// Reads a Hugging Face BERT config.json; errors name the file and the field. A path that is not a
// regular file, or one larger than kBertConfigInput allows, is a qkv::Error
// (Kind::invalid_argument) before it is read.
BertConfig read_bert_config(const std::string& path);

// Checks a Hugging Face tokenizer_config.json beside a BERT model against what qkv's WordPiece
// tokenizer does (lowercase, strip accents, split CJK characters, [CLS]/[SEP]/[UNK]/[PAD]): a
// setting it would not honour (a cased model's "do_lower_case": false) is a qkv::Error naming it,
// not ignored. Missing keys are BERT's defaults.
void check_bert_tokenizer_config(const std::string& path);

struct BertLayer {
  nn::LinearWeights qkv;  // W_Q, W_K and W_V stacked: [3·hidden, hidden], one GEMM for all three
  nn::LinearWeights attention_out;
  nn::NormWeights attention_norm;
  nn::LinearWeights intermediate;  // [intermediate, hidden]
  nn::LinearWeights output;        // [hidden, intermediate]
  nn::NormWeights output_norm;
};

struct BertWeights {
  Tensor word_embeddings;        // [vocab, hidden]
  Tensor position_embeddings;    // [max_positions, hidden]
  Tensor token_type_embeddings;  // [type_vocab, hidden]
  nn::NormWeights embedding_norm;
  std::vector<BertLayer> layers;
  // bf16: the dense layers' weights are already rounded to bfloat16 (round_dense_to_bf16), so
  // that a bf16 bert_encode need not round them on every call.
  Precision dense_precision = Precision::fp32;
};

// Loads and checks a checkpoint: every tensor the config needs, with its shape; a missing,
// extra or wrongly shaped tensor is an error naming it (embeddings.position_ids and pooler.*,
// which the encoder does not use, are allowed; a "bert." prefix is accepted).
BertWeights read_bert_weights(const std::string& safetensors_path, const BertConfig& config);
// The same weights converted (float64 for the reference run).
BertWeights to(const BertWeights& weights, DType dtype);
// The same weights with every dense layer's matrix rounded to bfloat16 (nn::round_to_bf16), the
// embeddings, LayerNorms and biases as they are; dense_precision bf16.
BertWeights round_dense_to_bf16(const BertWeights& weights);

struct BertOptions {
  Path attention_path = Path::automatic;
  BertCapture* capture = nullptr;  // null: nothing kept (the fast path)
  // Per sequence, each token's type (segment), as long as its ids; null: every token of type 0.
  const std::vector<std::vector<int32_t>>* token_types = nullptr;
  // bf16 (qkv/attention_types.h): every dense layer rounds its input rows and weights to bfloat16
  // before its float32 product, and attention runs with precision bf16; embeddings, LayerNorm,
  // GELU, biases and the residual sums stay in the weights' dtype.
  Precision precision = Precision::fp32;
};

// ids: B sequences of token ids (lengths may differ; shorter ones are padded and their padding
// masked). Returns the last hidden states [B, L, hidden], L the longest length, in the
// weights' dtype. Rows past a sequence's length are unspecified.
Tensor bert_encode(const BertWeights& weights, const BertConfig& config,
                   const std::vector<std::vector<int32_t>>& ids, const BertOptions& options = {});

// Sentence embeddings as sentence-transformers makes them: the mean of each sequence's hidden
// states over its tokens, scaled to unit length. hidden: [B, L, hidden] → [B, hidden].
Tensor mean_pool_normalize(const Tensor& hidden, const std::vector<int64_t>& lengths);

}  // namespace qkv
