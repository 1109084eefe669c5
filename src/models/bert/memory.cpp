// What the sentence encoder's work needs in memory (SentenceModel::embed_bytes, capture_bytes):
// peak resident bytes of the process, counted from the config and the lengths as bert_encode
// allocates them (models/bert/bert.cpp), rounded up where the count is loose.
#include "qkv/memory.h"

#include <algorithm>

#include "models/bert/bert.h"
#include "models/text/tokenizer.h"
#include "qkv/model.h"

namespace qkv {
namespace {

// A vocabulary entry: the string and its hash-map node, about 80 bytes on 64-bit libstdc++.
constexpr double kVocabEntryBytes = 96;

}  // namespace

int64_t SentenceModel::resident_bytes() const {
  const BertWeights& w = *weights_;
  double bytes = 0;
  for (const Tensor* t : {&w.word_embeddings, &w.position_embeddings, &w.token_type_embeddings,
                          &w.embedding_norm.weight, &w.embedding_norm.bias})
    bytes += static_cast<double>(tensor_bytes(*t));
  for (const BertLayer& l : w.layers) {
    for (const nn::LinearWeights* linear : {&l.qkv, &l.attention_out, &l.intermediate, &l.output})
      bytes += static_cast<double>(nn::resident_bytes(*linear));
    for (const nn::NormWeights* norm : {&l.attention_norm, &l.output_norm})
      bytes += static_cast<double>(tensor_bytes(norm->weight) + tensor_bytes(norm->bias));
  }
  // bf16: the dense layers' rounded copy (and its packing) beside the weights as loaded.
  if (embed_weights_ != weights_)
    for (const BertLayer& l : embed_weights_->layers)
      for (const nn::LinearWeights* linear : {&l.qkv, &l.attention_out, &l.intermediate, &l.output})
        bytes += static_cast<double>(nn::resident_bytes(*linear));
  bytes += kVocabEntryBytes * static_cast<double>(tokenizer_->size());
  return saturated_bytes(bytes);
}

int64_t SentenceModel::embed_bytes(int64_t texts, int64_t text_bytes, int64_t longest_text,
                                   int64_t batch_size) const {
  const BertConfig& c = config_;
  const double s = options_.reference ? 8.0 : 4.0;  // the weights' dtype, float32 unless reference
  const double n = static_cast<double>(texts), hid = static_cast<double>(c.hidden_size);
  // Every text's ids (a token is at least one byte, plus [CLS] and [SEP]), its vector and its
  // place in the length order; the embeddings [N, hidden].
  const double ids = 4.0 * (static_cast<double>(text_bytes) + 2 * n) + 40.0 * n;
  const double out = n * hid * s;
  // One batch at the longest length: h, the [q | k | v] projection, the merged heads, the
  // attention output, h again (hidden each), the FFN's intermediate; mean pooling's float64 copy.
  const int64_t batch = batch_size > 0 ? batch_size : options_.batch_size;
  const double b = static_cast<double>(std::min<int64_t>(batch, std::max<int64_t>(texts, 1)));
  const double l = static_cast<double>(std::min<int64_t>(static_cast<int64_t>(options_.max_length),
                                                         std::max<int64_t>(longest_text, 0) + 2));
  double activations = b * l * ((8 * hid + static_cast<double>(c.intermediate_size)) * s + 8 * hid);
  // The reference path keeps a layer's scores, logits and weights in float64.
  if (options_.reference) activations += 3.0 * b * static_cast<double>(c.num_heads) * l * l * 8;
  return saturated_bytes(static_cast<double>(kProcessBytes + resident_bytes()) + ids + out +
                         activations);
}

int64_t SentenceModel::capture_bytes(int64_t tokens) const {
  const BertConfig& c = config_;
  const double s = options_.reference ? 8.0 : 4.0;
  const double n = static_cast<double>(tokens), hid = static_cast<double>(c.hidden_size);
  const double heads = static_cast<double>(c.num_heads), layers = static_cast<double>(c.num_layers);
  // Kept per layer: scores, logits and weights (n² a head) and one more matrix's worth for the
  // allocator's slack, q, k, v, the heads' outputs and the layer's output (n·hidden each).
  const double kept = layers * (4 * heads * n * n * s + 5 * n * hid * s);
  // While a layer runs: the reference's float64 scores, logits and weights before they are cast
  // to the layer's dtype, and the layer's activations.
  const double working =
      3 * heads * n * n * 8 + n * ((8 * hid + static_cast<double>(c.intermediate_size)) * s);
  return saturated_bytes(static_cast<double>(kProcessBytes + resident_bytes()) + kept + working);
}

}  // namespace qkv
