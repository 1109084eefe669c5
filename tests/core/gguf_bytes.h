// GGUF files as bytes, for the reader's tests: the format's layout (ggml's docs/gguf.md, version
// 3, little-endian, 32-byte alignment) written here, independently of src/core/gguf.cpp.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace qkv::test {

// Little-endian fields, appended one after the other.
struct Bytes {
  std::string s;
  template <class T>
  Bytes& put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    s.append(b, sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& text) {
    put<uint64_t>(text.size());
    s += text;
    return *this;
  }
};

struct TensorSpec {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type;
  std::string data;
  uint64_t offset = UINT64_MAX;  // default: the next aligned place after the previous tensor
};

// A GGUF file as the format lays it out: header, `kv` (kv_count encoded entries), tensor infos,
// padding, each tensor's data at its aligned offset.
inline std::string gguf_file(uint64_t kv_count, const std::string& kv,
                             std::vector<TensorSpec> tensors, uint32_t version = 3) {
  constexpr uint64_t kAlign = 32;
  Bytes out;
  out.put<uint32_t>(0x46554747).put<uint32_t>(version).put<uint64_t>(tensors.size());
  out.put<uint64_t>(kv_count);
  out.s += kv;
  std::string data;
  for (TensorSpec& t : tensors) {
    if (t.offset == UINT64_MAX) {
      t.offset = (data.size() + kAlign - 1) / kAlign * kAlign;
      data.resize(t.offset);
      data += t.data;
    }
    out.str(t.name).put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t n : t.ne) out.put<uint64_t>(n);
    out.put<uint32_t>(t.type).put<uint64_t>(t.offset);
  }
  out.s.resize((out.s.size() + kAlign - 1) / kAlign * kAlign, '\0');
  return out.s + data;
}

inline std::string kv_string(const std::string& key, const std::string& value) {
  return Bytes().str(key).put<uint32_t>(8).str(value).s;
}

inline std::string bytes_of(const std::vector<uint8_t>& b) {
  return std::string(b.begin(), b.end());
}

template <class T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// A file with one tensor of `type`, `ne`, `data` and one string entry.
inline std::string one_tensor(uint32_t type, std::vector<uint64_t> ne, const std::string& data) {
  return gguf_file(1, kv_string("general.architecture", "llama"),
                   {{.name = "w", .ne = std::move(ne), .type = type, .data = data}});
}

}  // namespace qkv::test
