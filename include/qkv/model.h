// qkv/model.h — every model qkv runs: which one a path holds, and the headers of each family.
//
//   qkv/sentence_model.h   a BERT-family sentence encoder (all-MiniLM-L6-v2), from a directory
//   qkv/causal_lm.h        a decoder LLM from a GGUF file (SmolLM2-135M)
//   qkv/seq2seq.h          the encoder-decoder models `qkv train` makes (qkv/tasks.h: their tasks)
//   qkv/perceiver.h        the Perceiver `qkv train perceiver` makes
#pragma once

#include <string>

#include "qkv/causal_lm.h"
#include "qkv/sentence_model.h"
#include "qkv/seq2seq.h"
#include "qkv/tasks.h"
#include "qkv/text.h"

namespace qkv {

enum class ModelKind {
  sentence_encoder,  // a directory: config.json, model.safetensors, vocab.txt (BERT family)
  seq2seq,           // a file: a model `qkv train` saved
  causal_lm,         // a GGUF file: a decoder-only language model (SmolLM2)
};
// What `path` names: a regular file that starts with GGUF's magic bytes, whatever its name (an
// Ollama blob has none), a file called *.gguf, or the name "smollm2" is a decoder LLM; a file
// called *.safetensors (not a directory) a model `qkv train` saved; anything else is taken for a
// model directory. Only a regular file's first four bytes are read (a FIFO or a device is neither
// waited on nor read; a missing path goes by its name): opening the model says what is wrong.
ModelKind model_kind(const std::string& path);

}  // namespace qkv
