// qkv/model.h — the model registry: one door to every model qkv runs. open_model takes a name or a
// path and returns what it holds (its kind, family, name and sizes), what it can do, and the
// family's own interface:
//
//   qkv/sentence_model.h   a BERT-family sentence encoder (all-MiniLM-L6-v2), from a directory
//   qkv/causal_lm.h        a decoder LLM from a GGUF file (SmolLM2-135M)
//   qkv/seq2seq.h          the encoder-decoder models `qkv train` makes (qkv/tasks.h: their tasks)
//   qkv/perceiver.h        the Perceiver `qkv train` makes for the count task
//
// Each family registers once, in src/models/registry.cpp (its entry, `<family>_family()`, lives in
// its own folder); model_kind, open_model and model_families read only that table.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qkv/causal_lm.h"
#include "qkv/perceiver.h"
#include "qkv/sentence_model.h"
#include "qkv/seq2seq.h"
#include "qkv/tasks.h"
#include "qkv/text.h"

namespace qkv {

enum class ModelKind {
  sentence_encoder,  // a directory: config.json, model.safetensors, vocab.txt (BERT family)
  causal_lm,         // a GGUF file: a decoder-only language model (SmolLM2)
  seq2seq,           // a .safetensors file `qkv train` saved: transformer or RNNsearch
  perceiver,         // a .safetensors file `qkv train` saved for the Perceiver's count task
};
// "sentence-encoder", "causal-lm", "seq2seq", "perceiver".
std::string_view to_string(ModelKind kind);

// What a model can be asked to do (besides being explained, which every model can).
enum class Capability {
  encode,     // sentence embeddings (qkv embed, similarity, search)
  generate,   // continue a text (qkv generate)
  translate,  // map a source sequence to a target (a trained seq2seq task)
  classify,   // one class for an input (the Perceiver's count)
  train,      // the family trains from scratch (qkv train)
};
std::string_view to_string(Capability capability);  // "encode", ...

struct ModelInfo {
  ModelKind kind = ModelKind::sentence_encoder;
  std::string family;  // "bert", "llama", "transformer", "rnnsearch", "perceiver"
  std::string
      name;  // as views title it: "all-MiniLM-L6-v2", "SmolLM2-135M-Instruct", "dates.safetensors"
  std::string path;  // the directory or file opened (a built-in name resolved)
  int64_t layers = 0, heads = 0, kv_heads = 0;  // kv_heads: the key/value heads (GQA), else heads
  int64_t d_model = 0, vocab = 0;
  std::vector<Capability> capabilities;
  bool can(Capability capability) const;
};

struct OpenOptions {
  SentenceModelOptions sentence;  // a sentence encoder's
  // A causal LM: read its weights (CausalLM::load), or only its header, config and tokenizer
  // (CausalLM::open) so that its memory can be sized first; causal_lm().load_weights() reads them.
  bool load_weights = true;
};

// An opened model of any kind: its info, and its family's interface (an accessor of another
// family is a qkv::Error, Kind::invalid_argument, naming the kind it holds).
class Model {
 public:
  const ModelInfo& info() const { return info_; }
  ModelKind kind() const { return info_.kind; }
  bool can(Capability capability) const { return info_.can(capability); }

  const SentenceModel& sentence_model() const;
  CausalLM& causal_lm() const;
  Seq2Seq& seq2seq() const;
  Perceiver& perceiver() const;
  // A trained model's file metadata ("qkv.config", "qkv.steps", ...); empty for pretrained ones.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // For the families' entries (src/models/*/family.cpp).
  Model(ModelInfo info, std::shared_ptr<void> model,
        std::map<std::string, std::string> metadata = {});

 private:
  ModelInfo info_;
  std::shared_ptr<void> model_;  // the family's object: SentenceModel, CausalLM, Seq2Seq, Perceiver
  std::map<std::string, std::string> metadata_;
};

// One family's entry in the registry.
struct ModelFamily {
  ModelKind kind;
  std::string name;                // "bert"
  std::string description;         // one line, for help texts
  std::vector<std::string> names;  // built-in names it opens ("smollm2"); "" for the default model
  // Whether `path` (an existing path, or a built-in name) is this family's: by its name, its
  // first bytes or its header — never by reading weights, never waiting on a FIFO.
  std::function<bool(const std::string& path)> claims;
  std::function<Model(const std::string& path, const OpenOptions& options)> open;
};
// The registered families, in the order model_kind tries them.
const std::vector<ModelFamily>& model_families();
// The family that claims `name_or_path`: a built-in name ("smollm2" or "SmolLM2-135M-Instruct";
// "", "minilm", "all-MiniLM-L6-v2" or "sentence-transformers/all-MiniLM-L6-v2"), a regular file
// that starts with GGUF's magic bytes, whatever its name (an Ollama blob has none), or called
// *.gguf; a *.safetensors file saved for a Perceiver, any other
// *.safetensors file; anything else is taken for a model directory. Only a regular file's first
// bytes or header are read (a FIFO or a device is neither waited on nor read; a missing path goes
// by its name): opening the model says what is wrong. An argument that is neither a built-in name
// nor an existing path, nor written as one ("/x", "./x", "~/x"), is a name a store keeps a GGUF
// file by ("llama3.2:1b": qkv/model_stores.h, resolve_model), and that file's family answers; a
// name no store holds, or two files answer to, is a qkv::Error (Kind::invalid_argument).
const ModelFamily& model_family(const std::string& name_or_path);
ModelKind model_kind(const std::string& name_or_path);
// Whether `name` is a built-in name of an installed model ("", "minilm", "all-MiniLM-L6-v2",
// "smollm2", ...: some family's `names`), rather than a path.
bool is_builtin_model(const std::string& name);
// Opens any model: model_family(name_or_path).open, a store's name opening its file. Errors
// (qkv::Error) as the family's loader gives them: they name the file and what is wrong.
Model open_model(const std::string& name_or_path, const OpenOptions& options = {});

}  // namespace qkv
