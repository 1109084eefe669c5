// tests/models/fake_stores.h — Ollama's, LM Studio's and the Hugging Face cache's folders, laid out
// as each keeps them, under a scratch $HOME: what the tests of --model's names (stores_test.cpp)
// and of `qkv models` (tests/cli/models_cli_test.cpp) run against. The layouts are written here
// from the stores' own documentation, not from src/models/stores/.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/scratch_files.h"
#include "models/tiny_llama_gguf.h"

namespace qkv::test {

namespace fs = std::filesystem;

// The variables the stores are found by, set for a scope and restored after it.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::string>& values) {
    for (const auto& [name, value] : values) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old == nullptr ? std::nullopt : std::optional<std::string>(old);
      ::setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_)
      value ? ::setenv(name.c_str(), value->c_str(), 1) : ::unsetenv(name.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

class FakeStores {
 public:
  FakeStores() : dir_("qkv-stores") { fs::create_directories(home()); }

  fs::path home() const { return fs::path(dir_.path("home")); }
  fs::path ollama() const { return home() / ".ollama" / "models"; }
  fs::path lm_studio() const { return home() / ".lmstudio" / "models"; }
  fs::path lm_studio_old() const { return home() / ".cache" / "lm-studio" / "models"; }
  fs::path hugging_face() const { return home() / ".cache" / "huggingface" / "hub"; }
  fs::path scratch(const std::string& name) const { return fs::path(dir_.path(name)); }

  // The environment of a run that finds the stores where they are by default under home().
  std::map<std::string, std::string> env() const {
    return {{"HOME", home().string()},
            {"OLLAMA_MODELS", ""},
            {"HF_HUB_CACHE", ""},
            {"HF_HOME", ""},
            {"XDG_CACHE_HOME", ""}};
  }
  std::vector<std::string> env_list() const {
    std::vector<std::string> out;
    for (const auto& [name, value] : env()) out.push_back(name + "=" + value);
    return out;
  }

  // A blob named by a digest (a made-up 64-hex one: nothing checks it against the bytes) and the
  // manifest HOST/NAMESPACE/MODEL/TAG whose model layer names it; returns the blob's path.
  fs::path ollama_model(const std::string& host, const std::string& ns, const std::string& model,
                        const std::string& tag, const std::string& bytes) {
    const std::string hex = next_hex();
    const fs::path blob = ollama() / "blobs" / ("sha256-" + hex);
    write(blob, bytes);
    ollama_manifest(host, ns, model, tag, manifest_json("sha256:" + hex));
    return blob;
  }
  fs::path ollama_manifest(const std::string& host, const std::string& ns, const std::string& model,
                           const std::string& tag, const std::string& json) {
    const fs::path m = ollama() / "manifests" / host / ns / model / tag;
    write(m, json);
    return m;
  }
  static std::string manifest_json(const std::string& model_digest) {
    return R"({"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",)"
           R"("config":{"mediaType":"application/vnd.docker.container.image.v1+json",)"
           R"("digest":"sha256:)" +
           std::string(64, 'c') +
           R"(","size":485},"layers":[)"
           R"({"mediaType":"application/vnd.ollama.image.template","digest":"sha256:)" +
           std::string(64, 'd') +
           R"(","size":1},)"
           R"({"mediaType":"application/vnd.ollama.image.model","digest":")" +
           model_digest + R"(","size":1000}]})";
  }

  fs::path lm_studio_model(const std::string& publisher, const std::string& repo,
                           const std::string& file, const std::string& bytes, bool old = false) {
    const fs::path p = (old ? lm_studio_old() : lm_studio()) / publisher / repo / file;
    write(p, bytes);
    return p;
  }

  // models--ORG--REPO/blobs/HASH and snapshots/REV/FILE, a relative link to the blob, as
  // huggingface_hub makes them; refs/main names REV when `main`.
  fs::path hugging_face_model(const fs::path& hub, const std::string& org, const std::string& repo,
                              const std::string& rev, const std::string& file,
                              const std::string& bytes, bool main = true) {
    const fs::path dir = hub / ("models--" + org + "--" + repo);
    const std::string hash = next_hex();
    write(dir / "blobs" / hash, bytes);
    const fs::path link = dir / "snapshots" / rev / file;
    fs::create_directories(link.parent_path());
    fs::path up = "..";
    const fs::path rel(file);
    for (auto it = rel.begin(); it != rel.end(); ++it) up /= "..";
    fs::create_symlink(up / "blobs" / hash, link);
    if (main) write(dir / "refs" / "main", rev);
    return link;
  }

  static void write(const fs::path& path, const std::string& bytes) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
  }

 private:
  std::string next_hex() {
    char buf[65];
    std::snprintf(buf, sizeof buf, "%064x", ++blobs_);
    return buf;
  }

  ScratchDir dir_;
  unsigned blobs_ = 0;
};

// Tiny GGUF files of several architectures and quantization labels (tiny_llama_gguf's tensors).
inline std::string tiny_gguf(const std::string& architecture = "llama",
                             std::optional<uint32_t> file_type = std::nullopt) {
  TinyLlamaGguf g = tiny_llama_gguf();
  g.set("general.architecture", gguf_str(architecture));
  if (file_type) g.set("general.file_type", gguf_u32(*file_type));
  return g.bytes();
}

}  // namespace qkv::test
