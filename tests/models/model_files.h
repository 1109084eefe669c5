// Where the model tests find their files: the pretrained all-MiniLM-L6-v2 that scripts/bootstrap
// installs, and the committed goldens of tests/golden/minilm (tests/golden/make_minilm_goldens.py).
// A missing file is an exception with a message that says how to get it, so the test fails.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace qkv::test {

// $QKV_HOME/models, QKV_HOME defaulting to ~/.cache/qkv (as scripts/fetch_model).
inline std::string models_dir() {
  const char* qkv_home = std::getenv("QKV_HOME");
  if (qkv_home != nullptr && *qkv_home != '\0') return std::string(qkv_home) + "/models";
  const char* user_home = std::getenv("HOME");
  return std::string(user_home != nullptr ? user_home : "") + "/.cache/qkv/models";
}

// SmolLM2-135M-Instruct's GGUF file; missing → an exception saying how to fetch it.
inline std::string smollm2_gguf() {
  const std::string path = models_dir() + "/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::is_regular_file(path)) {
    throw std::runtime_error(path + " is missing: run scripts/fetch_model smollm2 (or " +
                             "scripts/bootstrap, which fetches every model the tests use)");
  }
  return path;
}

// $QKV_HOME/models/all-MiniLM-L6-v2.
inline std::string minilm_dir() {
  const std::string dir = models_dir() + "/all-MiniLM-L6-v2";
  if (!std::filesystem::is_directory(dir)) {
    throw std::runtime_error(dir + " is missing: run scripts/bootstrap (it fetches the model)");
  }
  return dir;
}

// A file of the model; missing → an exception saying to run scripts/bootstrap.
inline std::string minilm_file(const std::string& name) {
  const std::string path = minilm_dir() + "/" + name;
  if (!std::filesystem::is_regular_file(path)) {
    throw std::runtime_error(path + " is missing: run scripts/bootstrap (it fetches the model)");
  }
  return path;
}

inline std::string golden_dir(const std::string& model = "minilm") {
  return std::string(QKV_SOURCE_DIR) + "/tests/golden/" + model;
}

// A JSON golden of tests/golden/minilm; missing or unreadable → an exception naming it.
inline nlohmann::json read_golden_json(const std::string& name,
                                       const std::string& model = "minilm") {
  const std::string path = golden_dir(model) + "/" + name;
  std::ifstream in(path);
  if (!in) {
    throw std::runtime_error(path + " is missing: it is committed with the tests; regenerate it " +
                             "with its script in tests/golden/");
  }
  return nlohmann::json::parse(in);
}

}  // namespace qkv::test
