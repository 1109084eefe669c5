// The model registry (qkv/model.h): the families in the order model_kind tries them, and the one
// door, open_model.
#include <filesystem>

#include "models/families.h"
#include "qkv/model.h"
#include "qkv/model_stores.h"

namespace qkv {

std::string_view to_string(ModelKind kind) {
  switch (kind) {
    case ModelKind::sentence_encoder:
      return "sentence-encoder";
    case ModelKind::causal_lm:
      return "causal-lm";
    case ModelKind::seq2seq:
      return "seq2seq";
    case ModelKind::perceiver:
      return "perceiver";
  }
  return "?";
}

std::string_view to_string(Capability capability) {
  switch (capability) {
    case Capability::encode:
      return "encode";
    case Capability::generate:
      return "generate";
    case Capability::translate:
      return "translate";
    case Capability::classify:
      return "classify";
    case Capability::train:
      return "train";
  }
  return "?";
}

bool ModelInfo::can(Capability capability) const {
  for (const Capability c : capabilities)
    if (c == capability) return true;
  return false;
}

Model::Model(ModelInfo info, std::shared_ptr<void> model,
             std::map<std::string, std::string> metadata)
    : info_(std::move(info)), model_(std::move(model)), metadata_(std::move(metadata)) {}

namespace {

template <class T>
T& as(const Model& m, ModelKind kind, const std::shared_ptr<void>& p, const char* what) {
  if (m.kind() != kind)
    throw Error(
        m.info().path + " is a " + std::string(to_string(m.kind())) + " model, not a " + what,
        Error::Kind::invalid_argument);
  return *static_cast<T*>(p.get());
}

}  // namespace

const SentenceModel& Model::sentence_model() const {
  return as<SentenceModel>(*this, ModelKind::sentence_encoder, model_, "sentence encoder");
}
CausalLM& Model::causal_lm() const {
  return as<CausalLM>(*this, ModelKind::causal_lm, model_, "causal LM");
}
Seq2Seq& Model::seq2seq() const {
  return as<Seq2Seq>(*this, ModelKind::seq2seq, model_, "seq2seq model");
}
Perceiver& Model::perceiver() const {
  return as<Perceiver>(*this, ModelKind::perceiver, model_, "Perceiver");
}

std::string display_name(const std::string& path) {
  std::filesystem::path p(path);
  if (p.filename().empty()) p = p.parent_path();  // "dir/"
  return p.filename().string();
}

bool named(const std::string& path, const std::string& ext) {
  std::error_code ec;
  return path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0 &&
         !std::filesystem::is_directory(path, ec);
}

const std::vector<ModelFamily>& model_families() {
  // The order is the test order: built-in names and GGUF's magic bytes first, then a Perceiver's
  // metadata before any other .safetensors file, and a directory last (bert claims the rest).
  static const std::vector<ModelFamily> families = {llama_family(), perceiver_family(),
                                                    seq2seq_family(), bert_family()};
  return families;
}

namespace {

// The family that claims an existing path, or a name's file.
const ModelFamily& claiming(const std::string& path) {
  const std::vector<ModelFamily>& families = model_families();
  for (const ModelFamily& f : families)
    if (f.claims(path)) return f;
  return families.back();
}

const ModelFamily* builtin_family(const std::string& name) {
  for (const ModelFamily& f : model_families())
    for (const std::string& n : f.names)
      if (n == name) return &f;
  return nullptr;
}

}  // namespace

const ModelFamily& model_family(const std::string& name_or_path) {
  if (const ModelFamily* f = builtin_family(name_or_path)) return *f;
  // Neither a built-in name nor a path: a name a store (Ollama, LM Studio, ...) keeps a file by.
  // A name no store knows is claimed as written (model_kind classifies, it does not open:
  // "model.safetensors.bak" is still a directory's name); open_model says it is unknown.
  std::string path = name_or_path;
  try {
    path = resolve_model(name_or_path);
  } catch (const Error&) {
  }
  return claiming(path);
}

bool is_builtin_model(const std::string& name) { return builtin_family(name) != nullptr; }

ModelKind model_kind(const std::string& name_or_path) { return model_family(name_or_path).kind; }

Model open_model(const std::string& name_or_path, const OpenOptions& options) {
  if (const ModelFamily* f = builtin_family(name_or_path)) return f->open(name_or_path, options);
  const std::string path = resolve_model(name_or_path);
  return claiming(path).open(path, options);
}

}  // namespace qkv
