// A copy of SmolLM2-135M-Instruct's GGUF file in a temporary folder with its chat template edited:
// the metadata entry tokenizer.chat_template (its key and its string value) rewritten in place,
// each keeping its length, so every offset and the tensors stay as they are. For the tests of a
// model whose template is another family, or that has none.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/model_files.h"

namespace qkv::test {

// The copies (98 MB each) are removed when the test program exits.
struct Smollm2Copies {
  std::vector<std::string> files;
  ~Smollm2Copies() {
    std::error_code ec;
    for (const std::string& file : files) std::filesystem::remove(file, ec);
  }
};
inline Smollm2Copies& smollm2_copies() {
  static Smollm2Copies copies;
  return copies;
}

// `text` with every `from` replaced by `to` (of the same length).
inline std::string replaced(std::string text, const std::string& from, const std::string& to) {
  if (from.size() != to.size()) throw std::logic_error("replaced: lengths differ");
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
    text.replace(at, from.size(), to);
    at += to.size();
  }
  return text;
}

// Writes $TMPDIR/qkv-smollm2-<name>-<pid>.gguf (ctest runs test programs side by side, and each
// removes its copies at exit), where `edit(key, value)` has rewritten the chat
// template's entry (key "tokenizer.chat_template"; value the Jinja text), and returns its path.
// Either must keep its length.
inline std::string smollm2_copy(const std::string& name,
                                const std::function<void(std::string&, std::string&)>& edit) {
  std::ifstream in(smollm2_gguf(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // GGUF metadata entry: key length u64 | key | type u32 (8: string) | value length u64 | value.
  const std::string key_name = "tokenizer.chat_template";
  const std::size_t key_at = bytes.find(key_name);
  uint64_t key_size = 0, value_size = 0;
  uint32_t type = 0;
  if (key_at != std::string::npos && key_at >= 8) {  // little-endian fields, as x86 and ARM
    std::memcpy(&key_size, bytes.data() + key_at - 8, 8);
    std::memcpy(&type, bytes.data() + key_at + key_name.size(), 4);
  }
  if (key_size != key_name.size() || type != 8)
    throw std::runtime_error(smollm2_gguf() + ": no string entry tokenizer.chat_template found");
  const std::size_t value_at = key_at + key_name.size() + 4 + 8;
  std::memcpy(&value_size, bytes.data() + value_at - 8, 8);
  std::string key = key_name, value = bytes.substr(value_at, value_size);
  edit(key, value);
  if (key.size() != key_name.size() || value.size() != value_size)
    throw std::logic_error("smollm2_copy: the edit changed a length");
  bytes.replace(key_at, key.size(), key);
  bytes.replace(value_at, value.size(), value);

  const std::string path = (std::filesystem::temp_directory_path() /
                            ("qkv-smollm2-" + name + "-" + std::to_string(getpid()) + ".gguf"))
                               .string();
  smollm2_copies().files.push_back(path);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// The template made another family's: ChatML's markers respelled, lengths kept.
inline std::string smollm2_with_other_template() {
  static const std::string path = smollm2_copy("other-template", [](std::string&, std::string& v) {
    v = replaced(replaced(v, "<|im_start|>", "<start_turn>"), "<|im_end|>", "<end_turn>");
  });
  return path;
}

// The template's key renamed: the model has no tokenizer.chat_template.
inline std::string smollm2_without_template() {
  static const std::string path = smollm2_copy(
      "no-template", [](std::string& k, std::string&) { k = "tokenizer.chat_templatX"; });
  return path;
}

}  // namespace qkv::test
