// libFuzzer target: the GGUF reader (core/gguf.h) on arbitrary bytes: a checked file or a
// qkv::Error, never a crash, an out-of-bounds read or an allocation the file does not back.
// Every tensor it accepts must dequantize, to exactly as many values as its shape holds.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  qkv::GgufFile f;
  try {
    f = qkv::GgufFile::parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz.gguf");
  } catch (const qkv::Error&) {
    return 0;
  }
  for (const qkv::GgufTensorInfo& info : f.tensors()) {
    if (info.bytes > (uint64_t{1} << 24)) continue;  // a large all-zero tensor proves nothing more
    const qkv::Tensor t = f.tensor(info.name);
    if (t.shape() != info.shape) __builtin_trap();
  }
  return 0;
}
