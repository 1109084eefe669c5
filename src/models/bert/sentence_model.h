// models/bert/sentence_model.h — a sentence encoder as sentence-transformers runs all-MiniLM-L6-v2:
// WordPiece tokens → BERT encoder → mean over the tokens → unit length. The model directory holds
// config.json, model.safetensors and vocab.txt of any BERT-family encoder.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "models/bert/bert.h"
#include "models/text/tokenizer.h"

namespace qkv {

// Where scripts/fetch_model puts all-MiniLM-L6-v2: $QKV_HOME/models/all-MiniLM-L6-v2, QKV_HOME
// defaulting to ~/.cache/qkv.
std::string default_model_dir();

struct SentenceModelOptions {
  // Tokens per text, [CLS] and [SEP] included (sentence-transformers); cut to the model's
  // max_position_embeddings when that is smaller.
  std::size_t max_length = 256;
  int batch_size = 32;
  bool reference = false;  // run the whole encoder in float64 (the reference twin)
};

class SentenceModel {
 public:
  // Errors (Kind::runtime) name the missing or bad file; a missing default model says how to
  // install it.
  static SentenceModel load(const std::string& dir, const SentenceModelOptions& options = {});

  Encoding tokenize(std::string_view text) const {
    return tokenizer_.encode(text, options_.max_length);
  }
  // [CLS] A [SEP] B [SEP], cut to max_length as BertTokenizer's 'longest_first' does.
  Encoding tokenize_pair(std::string_view a, std::string_view b) const {
    return tokenizer_.encode_pair(a, b, options_.max_length);
  }
  // Unit-length sentence embeddings [N, hidden] (float32; float64 when `reference`). Texts are
  // sorted by length and run `batch_size` at a time, so padding stays small; `progress` (if set)
  // hears (texts done, texts in all) after each batch.
  Tensor embed(const std::vector<std::string>& texts,
               const std::function<void(std::size_t, std::size_t)>& progress = {}) const;
  // One encoding (a text or a pair, its segments as token types) through the encoder with
  // everything captured (float64 attention); returns its mean-pooled, unit-length embedding.
  Tensor encode_captured(const Encoding& encoding, BertCapture& capture) const;

  const std::string& dir() const { return dir_; }
  const BertConfig& config() const { return config_; }
  const BertWeights& weights() const { return weights_; }
  const WordPieceTokenizer& tokenizer() const { return tokenizer_; }
  const SentenceModelOptions& options() const { return options_; }

 private:
  SentenceModel(std::string dir, BertConfig config, BertWeights weights,
                WordPieceTokenizer tokenizer, SentenceModelOptions options)
      : dir_(std::move(dir)),
        config_(config),
        weights_(std::move(weights)),
        tokenizer_(std::move(tokenizer)),
        options_(options) {}

  std::string dir_;
  BertConfig config_;
  BertWeights weights_;
  WordPieceTokenizer tokenizer_;
  SentenceModelOptions options_;
};

// cos(a, b) of two embedding rows: 0 when a row is all zeros, NaN when either holds NaN or ∞.
double cosine(const Tensor& a, int64_t row_a, const Tensor& b, int64_t row_b);

}  // namespace qkv
