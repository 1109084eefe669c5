// libFuzzer target: the safetensors reader (core/safetensors.h) on arbitrary bytes: a checked
// file or a qkv::Error, never a crash, an out-of-bounds read or an allocation the file does not
// back. What it reads must survive encode → parse with the same names, shapes and metadata.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  qkv::SafetensorsFile f;
  try {
    f = qkv::parse_safetensors(bytes, "fuzz.safetensors");
  } catch (const qkv::Error&) {
    return 0;
  }
  std::vector<std::pair<std::string, qkv::Tensor>> tensors;
  for (const auto& [name, t] : f.tensors) tensors.emplace_back(name, t);
  const std::string again = qkv::encode_safetensors(tensors, f.metadata);
  const qkv::SafetensorsFile g = qkv::parse_safetensors(again, "again.safetensors");
  if (g.tensors.size() != f.tensors.size() || g.metadata != f.metadata) __builtin_trap();
  for (const auto& [name, t] : f.tensors)
    if (g.tensors.at(name).shape() != t.shape()) __builtin_trap();
  return 0;
}
