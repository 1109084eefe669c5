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

// $QKV_HOME/models/all-MiniLM-L6-v2, QKV_HOME defaulting to ~/.cache/qkv (as scripts/fetch_model).
inline std::string minilm_dir() {
  const char* qkv_home = std::getenv("QKV_HOME");
  std::string home;
  if (qkv_home != nullptr && *qkv_home != '\0') {
    home = qkv_home;
  } else {
    const char* user_home = std::getenv("HOME");
    home = std::string(user_home != nullptr ? user_home : "") + "/.cache/qkv";
  }
  const std::string dir = home + "/models/all-MiniLM-L6-v2";
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

inline std::string golden_dir() { return std::string(QKV_SOURCE_DIR) + "/tests/golden/minilm"; }

// A JSON golden of tests/golden/minilm; missing or unreadable → an exception naming it.
inline nlohmann::json read_golden_json(const std::string& name) {
  const std::string path = golden_dir() + "/" + name;
  std::ifstream in(path);
  if (!in) {
    throw std::runtime_error(path + " is missing: it is committed with the tests; regenerate it " +
                             "with tests/golden/make_minilm_goldens.py");
  }
  return nlohmann::json::parse(in);
}

}  // namespace qkv::test
