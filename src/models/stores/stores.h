// models/stores/stores.h — what the stores' readers (ollama.cpp; folders.cpp: LM Studio, the
// Hugging Face cache) share with the resolution of names (resolve.cpp). The public face:
// qkv/model_stores.h.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "qkv/model_stores.h"

namespace qkv::stores {

namespace fs = std::filesystem;

// A file a store answers to a name with. `error`, when set, says why it cannot be opened (a
// manifest that names no model, a blob outside the store); the name is then still the store's.
struct Candidate {
  std::string name;  // the name that picks this file alone: "llama3.2:1b", "org/repo/f.gguf"
  // In a repository of one model, named by the repository ("org/repo"), its file's own name
  // ("org/repo/f.gguf") picks it too.
  std::string alias;
  ModelStore store;
  fs::path path;
  std::string error;
};

// The files `name` may mean in one store's folder; none when it holds nothing by that name.
std::vector<Candidate> ollama_matches(const fs::path& root, const std::string& name);
std::vector<Candidate> lm_studio_matches(const fs::path& root, const std::string& name);
std::vector<Candidate> hugging_face_matches(const fs::path& root, const std::string& name);

// Every GGUF file in one store's folder (directory entries and manifests only).
std::vector<Candidate> ollama_models(const fs::path& root);
std::vector<Candidate> lm_studio_models(const fs::path& root);
std::vector<Candidate> hugging_face_models(const fs::path& root);

// "~/.ollama/models": a path as messages show it, $HOME written "~".
std::string shown(const fs::path& path);

// "a/b/c" → {"a", "b", "c"}; empty when any segment is empty, "." or "..", or holds a backslash
// or NUL: such a name could step out of a store's folder, and no store names a model so.
std::vector<std::string> safe_segments(const std::string& name);
// Whether `file`'s real path (links followed) lies inside `dir`'s: a store's entry is never
// followed out of its store. False when either is missing.
bool inside(const fs::path& file, const fs::path& dir);
// Whether a file is named *.gguf (any case).
bool named_gguf(const fs::path& file);
// A vision model's projector ("mmproj-*.gguf"), which LM Studio and Hugging Face repositories
// keep beside the model: not the model a repository's name means.
bool is_projector(const fs::path& file);
// The *.gguf files under `dir`, as paths relative to it, sorted; `depth` 0 for its own entries
// only. Links to files count (a Hugging Face snapshot holds only links); links to folders are not
// followed.
std::vector<fs::path> gguf_files_under(const fs::path& dir, int depth);

}  // namespace qkv::stores
