// qkv/model_stores.h — the GGUF models people already keep on their machines, found by the names
// they know them by: Ollama's, LM Studio's and the Hugging Face cache's. open_model (qkv/model.h)
// asks resolve_model for any argument that is neither a built-in name nor an existing path, so
// `--model llama3.2:1b` and qkv.CausalLM("llama3.2:1b") open the file Ollama keeps.
//
// The stores' layouts:
//   Ollama        $OLLAMA_MODELS, else ~/.ollama/models:
//                   manifests/HOST/NAMESPACE/MODEL/TAG (JSON; the layer of mediaType
//                   "application/vnd.ollama.image.model" names its blob "sha256:HEX"),
//                   blobs/sha256-HEX (the GGUF file).
//                 Names: "llama3.2:1b", "llama3.2" (tag "latest"), "user/model:tag",
//                 "hf.co/bartowski/X:Q4_K_M" (host registry.ollama.ai, namespace library unless
//                 given).
//   LM Studio     ~/.lmstudio/models and ~/.cache/lm-studio/models: PUBLISHER/REPO/FILE.gguf.
//                 Names: "PUBLISHER/REPO" (its one GGUF file), "PUBLISHER/REPO/FILE.gguf", or
//                 the file's stem "FILE".
//   Hugging Face  $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
//                 ~/.cache/huggingface/hub: models--ORG--REPO/snapshots/REV/FILE.gguf (links into
//                 blobs/; the revision refs/main names, else every one). Names: "ORG/REPO" (its
//                 one GGUF file), "ORG/REPO/FILE.gguf".
//
// Resolution by name reads directory entries and at most one manifest and a blob's first four
// bytes — never a header — so a store of thousands of models answers at once. It never leaves a
// store: a manifest's digest must be 64 hex digits, a name may not hold "." or ".." segments, and
// a file whose real path lies outside its store's folder is ignored. A FIFO or a device is never
// opened (is_gguf_file).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qkv/causal_lm.h"  // supported_gguf_architectures()

namespace qkv {

enum class ModelStore { ollama, lm_studio, hugging_face };
// "Ollama", "LM Studio", "Hugging Face".
std::string_view to_string(ModelStore store);

// A folder a store keeps its models in, as this process's environment places it (it may not
// exist).
struct ModelStoreDir {
  ModelStore store;
  std::string dir;
};
// Every folder looked in, in the order names are looked up: Ollama, LM Studio (both folders),
// the Hugging Face cache.
std::vector<ModelStoreDir> model_store_dirs();

// A GGUF file found in a store.
struct StoredModel {
  std::string name;  // what --model takes: "llama3.2:1b", "lmstudio-community/X", "org/repo/f.gguf"
  ModelStore store;
  std::string path;    // the file to open (an Ollama blob, a snapshot's link)
  uint64_t bytes = 0;  // its size on disk
  // Why it cannot be opened, when the store says so before its file is read: a manifest that
  // names no model or a blob outside the store (`path` is then the manifest's).
  std::string error;
};
// Every GGUF file in the stores, by store then name; read from directory entries and Ollama's
// manifests only (no header is read). A store's folder that is missing or unreadable is skipped.
std::vector<StoredModel> stored_models();

// What open_model opens for `name_or_path`: the argument itself when it is a built-in name
// (is_builtin_model), an existing path, or written as a path ("/x", "./x", "../x", "~/x"); else
// the GGUF file a store keeps under that name. A name no store holds is a qkv::Error
// (Kind::invalid_argument) saying where it looked; a name two files answer to, one listing them.
std::string resolve_model(const std::string& name_or_path);

// What `qkv models` shows of a GGUF file, from its header alone (GgufFile::open).
struct GgufSummary {
  std::string architecture;  // general.architecture: "llama", "qwen2", ...
  // general.file_type as llama.cpp names it ("Q4_K_M", "F16"), else the tensor type holding the
  // most parameters ("Q8_0").
  std::string quantization;
  int64_t parameters = 0;  // the tensors' elements, summed
  bool runs = false;       // the architecture is one supported_gguf_architectures() lists
  std::string error;       // one line, when the header could not be read (the rest is empty)
};
GgufSummary summarize_gguf(const std::string& path);

// llama.cpp's name of a general.file_type (llama.h's llama_ftype): 15 → "Q4_K_M"; "" if unknown.
std::string gguf_file_type_name(int64_t file_type);

}  // namespace qkv
