// qkv/sentence_model.h — the pretrained sentence encoder: a BERT-family model directory
// (config.json, model.safetensors, vocab.txt), run as sentence-transformers runs all-MiniLM-L6-v2:
// WordPiece tokens → BERT encoder → mean over the tokens → unit length. Every layer's attention can
// be captured (qkv::AttentionCapture).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qkv/attention.h"
#include "qkv/tensor.h"
#include "qkv/text.h"

namespace qkv {

struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 384;
  int64_t num_layers = 6;
  int64_t num_heads = 12;
  int64_t intermediate_size = 1536;
  int64_t max_positions = 512;
  int64_t type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  int64_t head_dim() const { return hidden_size / num_heads; }
};

// What the encoder computed, for every sequence, layer and head: each layer's attention
// (scaled-dot, scale 1/√D, logits −∞ at padding keys) and its output.
struct BertCapture {
  Tensor embeddings;                     // [B, L, hidden] h₀
  std::vector<AttentionCapture> layers;  // one per layer, [B, H, L, ·]
  std::vector<Tensor> hidden;            // one per layer, [B, L, hidden]: the layer's output
};

struct BertWeights;        // models/bert/bert.h
class WordPieceTokenizer;  // models/text/tokenizer.h

// Where scripts/fetch_model puts all-MiniLM-L6-v2: $QKV_HOME/models/all-MiniLM-L6-v2, QKV_HOME
// defaulting to ~/.cache/qkv.
std::string default_model_dir();

struct SentenceModelOptions {
  // Tokens per text, [CLS] and [SEP] included (sentence-transformers); cut to the model's
  // max_position_embeddings when that is smaller.
  std::size_t max_length = 256;
  int batch_size = 32;
  bool reference = false;  // run the whole encoder in float64 (the reference twin)
  // bf16 (opt-in, qkv/attention_types.h): embed() rounds each dense layer's input rows and weights
  // to bfloat16 before its float32 product and runs attention with precision bf16 (the weights'
  // rounded copy is made once, at load). encode_captured() stays float32/float64: its captures
  // explain the model as it is.
  Precision precision = Precision::fp32;
};

class SentenceModel {
 public:
  // Errors (Kind::runtime) name the missing or bad file; a missing default model says how to
  // install it.
  static SentenceModel load(const std::string& dir, const SentenceModelOptions& options = {});

  Encoding tokenize(std::string_view text) const;
  // [CLS] A [SEP] B [SEP], cut to max_length as BertTokenizer's 'longest_first' does.
  Encoding tokenize_pair(std::string_view a, std::string_view b) const;
  // Unit-length sentence embeddings [N, hidden] (float32; float64 when `reference`). Texts are
  // sorted by length and run `batch_size` at a time, so padding stays small; `progress` (if set)
  // hears (texts done, texts in all) after each batch.
  Tensor embed(const std::vector<std::string>& texts,
               const std::function<void(std::size_t, std::size_t)>& progress = {}) const;
  // One encoding (a text or a pair, its segments as token types) through the encoder with
  // everything captured (float64 attention); returns its mean-pooled, unit-length embedding.
  Tensor encode_captured(const Encoding& encoding, BertCapture& capture) const;

  // Throws a usage error when `text` has no tokens of its own ([CLS] and [SEP] only): characters
  // the tokenizer drops (U+200B, controls) read as a text but embed as if blank. `what` names it
  // ("text 2", "the query"); the message lists its first code points.
  void require_tokens(std::string_view text, const std::string& what) const;
  // "" when no text of `texts` is longer than max_length tokens; else the note to give before the
  // work: "line 17 is longer than the model's 256 tokens and was cut to them; ...", or "2 of
  // 1,000 lines are longer than ... (the first: line 17); ...". `label(i)` names text i, `kind`
  // names them all ("lines").
  std::string cut_note(std::span<const std::string> texts,
                       const std::function<std::string(std::size_t)>& label,
                       const std::string& kind) const;

  // What the work needs at its peak, in bytes: the whole process, this model as loaded included
  // (qkv/memory.h says what an estimate covers). embed() of `texts` texts of `text_bytes` bytes in
  // all, the longest `longest_text` bytes (a text has at most as many tokens as bytes, plus [CLS]
  // and [SEP]): their ids, the embeddings and one batch's activations at the longest length, in
  // batches of `batch_size` (0: the model's own, options().batch_size).
  int64_t embed_bytes(int64_t texts, int64_t text_bytes, int64_t longest_text,
                      int64_t batch_size = 0) const;
  // encode_captured() of `tokens` tokens: every layer's q, k, v, scores, logits, weights and
  // outputs kept (L² a head and layer), and the float64 reference's working set of one layer.
  int64_t capture_bytes(int64_t tokens) const;
  // The weights as they sit in memory (packed copies included) and the vocabulary.
  int64_t resident_bytes() const;

  const std::string& dir() const { return dir_; }
  const BertConfig& config() const { return config_; }
  // Whether `id` is the vocabulary's [CLS] or [SEP], the two tokens every encoding adds.
  bool is_cls_or_sep(int32_t id) const;
  // The weights as loaded (models/bert/bert.h): what explain reads W_O and the LayerNorms from.
  const BertWeights& weights() const { return *weights_; }
  const SentenceModelOptions& options() const { return options_; }
  // The same model, its weights and vocabulary shared, embedding in another precision (for
  // comparing the two: `qkv embed --precision bf16 --compare-fp32`).
  SentenceModel with_precision(Precision precision) const;

 private:
  SentenceModel(std::string dir, BertConfig config, std::shared_ptr<const BertWeights> weights,
                std::shared_ptr<const WordPieceTokenizer> tokenizer, SentenceModelOptions options);

  std::string dir_;
  BertConfig config_;
  std::shared_ptr<const BertWeights> weights_;           // models/bert/bert.h
  std::shared_ptr<const BertWeights> embed_weights_;     // weights_, or its bf16-rounded copy
  std::shared_ptr<const WordPieceTokenizer> tokenizer_;  // models/text/tokenizer.h
  SentenceModelOptions options_;
};

// cos(a, b) of two embedding rows: 0 when a row is all zeros, NaN when either holds NaN or ∞.
double cosine(const Tensor& a, int64_t row_a, const Tensor& b, int64_t row_b);

// A query over lines as attention reads it (qkv search): row 0 of `embeddings` [1 + N, d] the
// query, rows 1..N the keys. cosine[i] = cos(q, k_i); weight = softmax(cosine / temperature),
// computed stably (the query's attention weights if the lines were its keys); order: the lines
// by cosine, highest first, ties in line order. A cosine or weight that is not finite is a
// runtime error naming the line (qkv/finite.h).
struct Ranking {
  std::vector<double> cosine, weight;
  std::vector<std::size_t> order;
};
Ranking rank_by_cosine(const Tensor& embeddings, double temperature);

}  // namespace qkv
