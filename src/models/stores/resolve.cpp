// Names to files: where each store lives on this machine, what it holds, and the one file a name
// means (qkv/model_stores.h).
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "core/gguf.h"
#include "models/stores/stores.h"
#include "qkv/files.h"
#include "qkv/model.h"

namespace qkv {

using stores::Candidate;
namespace fs = std::filesystem;

std::string_view to_string(ModelStore store) {
  switch (store) {
    case ModelStore::ollama:
      return "Ollama";
    case ModelStore::lm_studio:
      return "LM Studio";
    case ModelStore::hugging_face:
      return "Hugging Face";
  }
  return "?";
}

namespace {

// An environment variable, "" when unset (an empty one counts as unset, as the stores read it).
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

fs::path home() {
  if (const std::string h = env("HOME"); !h.empty()) return h;
  const passwd* pw = getpwuid(getuid());  // a service without $HOME
  return pw != nullptr && pw->pw_dir != nullptr ? pw->pw_dir : "/";
}

// The Hugging Face cache, as huggingface_hub finds it (constants.py: HF_HUB_CACHE, else
// HF_HOME/hub, HF_HOME defaulting to $XDG_CACHE_HOME/huggingface, then ~/.cache/huggingface).
fs::path hugging_face_cache() {
  if (const std::string c = env("HF_HUB_CACHE"); !c.empty()) return c;
  if (const std::string h = env("HF_HOME"); !h.empty()) return fs::path(h) / "hub";
  if (const std::string x = env("XDG_CACHE_HOME"); !x.empty())
    return fs::path(x) / "huggingface" / "hub";
  return home() / ".cache" / "huggingface" / "hub";
}

// Each store's candidates for `name`, in model_store_dirs()'s order.
std::vector<Candidate> candidates(const std::string& name) {
  std::vector<Candidate> all;
  for (const ModelStoreDir& d : model_store_dirs()) {
    std::vector<Candidate> found =
        d.store == ModelStore::ollama      ? stores::ollama_matches(d.dir, name)
        : d.store == ModelStore::lm_studio ? stores::lm_studio_matches(d.dir, name)
                                           : stores::hugging_face_matches(d.dir, name);
    for (Candidate& c : found) all.push_back(std::move(c));
  }
  // One file reached twice (a folder linked into two stores) is one model.
  std::vector<Candidate> unique;
  for (Candidate& c : all) {
    std::error_code ec;
    const bool seen = std::any_of(unique.begin(), unique.end(), [&](const Candidate& u) {
      return u.path == c.path || fs::equivalent(u.path, c.path, ec);
    });
    if (!seen) unique.push_back(std::move(c));
  }
  return unique;
}

// "Ollama (~/.ollama/models), LM Studio (~/.lmstudio/models, ~/.cache/lm-studio/models), the
// Hugging Face cache (~/.cache/huggingface/hub)".
std::string where_looked() {
  std::string out;
  ModelStore last{};
  bool open = false;
  for (const ModelStoreDir& d : model_store_dirs()) {
    if (open && d.store == last) {
      out += ", " + stores::shown(d.dir);
      continue;
    }
    if (open) out += "), ";
    out += (d.store == ModelStore::hugging_face ? "the Hugging Face cache"
                                                : std::string(to_string(d.store))) +
           " (" + stores::shown(d.dir);
    last = d.store;
    open = true;
  }
  return out + ")";
}

// Whether the argument is written as a path, so that no store is asked for it.
bool written_as_path(const std::string& s) {
  return s.starts_with('/') || s.starts_with("./") || s.starts_with("../") || s == "." ||
         s == ".." || s.starts_with('~');
}

// What a file that is not a GGUF file is, from its status alone (stat: a FIFO is not opened).
std::string what_file_is(const fs::path& path) {
  std::error_code ec;
  switch (fs::status(path, ec).type()) {
    case fs::file_type::fifo:
      return "it is a FIFO (named pipe)";
    case fs::file_type::block:
    case fs::file_type::character:
      return "it is a device";
    case fs::file_type::directory:
      return "it is a directory";
    case fs::file_type::regular:
      return "it does not start with \"GGUF\"";
    default:
      return "it is not a regular file";
  }
}

// "NAME (STORE: PATH)", for a message listing candidates.
std::string described(const Candidate& c) {
  return c.name + " (" + std::string(to_string(c.store)) + ": " + stores::shown(c.path) + ")";
}

}  // namespace

std::vector<ModelStoreDir> model_store_dirs() {
  const std::string ollama = env("OLLAMA_MODELS");
  return {{ModelStore::ollama, ollama.empty() ? home() / ".ollama" / "models" : fs::path(ollama)},
          {ModelStore::lm_studio, home() / ".lmstudio" / "models"},
          {ModelStore::lm_studio, home() / ".cache" / "lm-studio" / "models"},
          {ModelStore::hugging_face, hugging_face_cache()}};
}

std::vector<StoredModel> stored_models() {
  std::vector<StoredModel> out;
  for (const ModelStoreDir& d : model_store_dirs()) {
    std::vector<Candidate> found = d.store == ModelStore::ollama ? stores::ollama_models(d.dir)
                                   : d.store == ModelStore::lm_studio
                                       ? stores::lm_studio_models(d.dir)
                                       : stores::hugging_face_models(d.dir);
    std::stable_sort(found.begin(), found.end(),
                     [](const Candidate& a, const Candidate& b) { return a.name < b.name; });
    for (const Candidate& c : found) {
      std::error_code ec;
      const uint64_t bytes = c.error.empty() && fs::is_regular_file(c.path, ec)
                                 ? static_cast<uint64_t>(fs::file_size(c.path, ec))
                                 : 0;
      out.push_back({.name = c.name,
                     .store = c.store,
                     .path = c.path.string(),
                     .bytes = ec ? 0 : bytes,
                     .error = c.error});
    }
  }
  return out;
}

std::string resolve_model(const std::string& name_or_path) {
  if (is_builtin_model(name_or_path) || written_as_path(name_or_path)) return name_or_path;
  std::error_code ec;
  if (fs::symlink_status(name_or_path, ec).type() != fs::file_type::not_found && !ec)
    return name_or_path;
  const std::vector<Candidate> found = candidates(name_or_path);
  if (found.empty())
    throw Error("no model \"" + name_or_path + "\": not a file, not a built-in name, not in " +
                    where_looked() + "; `qkv models` lists what is here",
                Error::Kind::invalid_argument);
  if (found.size() > 1) {
    std::string list;
    for (const Candidate& c : found) list += (list.empty() ? "" : ", ") + described(c);
    throw Error("\"" + name_or_path + "\" names " + std::to_string(found.size()) +
                    " models: " + list + "; expected one of their names or paths",
                Error::Kind::invalid_argument);
  }
  const Candidate& c = found.front();
  const std::string in = " (" + std::string(to_string(c.store)) + ")";
  if (!c.error.empty())
    throw Error("\"" + name_or_path + "\"" + in + ": " + c.error, Error::Kind::invalid_argument);
  // Four bytes of one file, through InputFile: a FIFO or a device is neither waited on nor read.
  if (!is_gguf_file(c.path.string()))
    throw Error("\"" + name_or_path + "\"" + in + " is " + stores::shown(c.path) +
                    ", which is not a GGUF file (" + what_file_is(c.path) + ")",
                Error::Kind::invalid_argument);
  return c.path.string();
}

}  // namespace qkv
