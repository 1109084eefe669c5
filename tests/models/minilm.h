// all-MiniLM-L6-v2's tokenizer, configuration and weights, each read once per test program
// (model_files.h says where they are; a missing model fails the test with how to get it).
#pragma once

#include <string>

#include "models/bert/bert.h"
#include "models/model_files.h"
#include "models/text/tokenizer.h"

namespace qkv::test {

struct Minilm {
  BertConfig config;
  BertWeights weights;
};

inline const Minilm& minilm() {
  static const Minilm model = [] {
    const std::string dir = minilm_dir();
    Minilm m;
    m.config = read_bert_config(dir + "/config.json");
    m.weights = read_bert_weights(dir + "/model.safetensors", m.config);
    return m;
  }();
  return model;
}

inline const WordPieceTokenizer& minilm_tokenizer() {
  static const WordPieceTokenizer tokenizer =
      WordPieceTokenizer::from_vocab_file(minilm_file("vocab.txt"));
  return tokenizer;
}

}  // namespace qkv::test
