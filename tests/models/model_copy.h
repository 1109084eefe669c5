// A copy of all-MiniLM-L6-v2 in a temporary folder with something wrong with it: config.json
// edited, or tensors of model.safetensors overwritten in place (the bytes patched, so the file
// stays valid safetensors). For the tests of what qkv says about a broken model.
#pragma once

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/model_files.h"

namespace qkv::test {

struct TensorPatch {
  std::string name;  // e.g. "encoder.layer.0.attention.self.query.weight"
  float value = 0;
  int64_t count = 1;  // elements overwritten from the first; -1: all
};

// The copies (90 MB each with patched weights) are removed when the test program exits.
struct ModelCopies {
  std::vector<std::string> dirs;
  ~ModelCopies() {
    std::error_code ec;
    for (const std::string& dir : dirs) std::filesystem::remove_all(dir, ec);
  }
};
inline ModelCopies& model_copies() {
  static ModelCopies copies;
  return copies;
}

// Writes the copy to $TMPDIR/qkv-model-copy-<name> and returns its path. vocab.txt is linked.
inline std::string minilm_copy(const std::string& name,
                               const std::function<void(nlohmann::json&)>& edit_config = {},
                               const std::vector<TensorPatch>& patches = {}) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("qkv-model-copy-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  model_copies().dirs.push_back(dir.string());
  fs::create_symlink(minilm_file("vocab.txt"), dir / "vocab.txt");

  std::ifstream config_in(minilm_file("config.json"));
  nlohmann::json config = nlohmann::json::parse(config_in);
  if (edit_config) edit_config(config);
  std::ofstream(dir / "config.json") << config.dump(2);

  if (patches.empty()) {
    fs::create_symlink(minilm_file("model.safetensors"), dir / "model.safetensors");
    return dir.string();
  }
  std::ifstream in(minilm_file("model.safetensors"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), 8);
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, header_length));
  for (const TensorPatch& p : patches) {
    if (!header.contains(p.name) || header[p.name]["dtype"] != "F32")
      throw std::runtime_error("minilm_copy: no F32 tensor " + p.name);
    const uint64_t begin = header[p.name]["data_offsets"][0],
                   end = header[p.name]["data_offsets"][1];
    const int64_t n = p.count < 0 ? static_cast<int64_t>((end - begin) / 4) : p.count;
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(bytes.data() + 8 + header_length + begin + 4 * i, &p.value, 4);
  }
  std::ofstream(dir / "model.safetensors", std::ios::binary) << bytes;
  return dir.string();
}

}  // namespace qkv::test
