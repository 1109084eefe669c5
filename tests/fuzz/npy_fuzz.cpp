// libFuzzer target: the .npy reader (qkv/npy.h) on arbitrary bytes. It must return a tensor whose
// bytes it checked, or throw qkv::Error — never crash, hang, read out of bounds or allocate more
// than the input promises. A tensor it returns must survive encode → parse unchanged.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "qkv/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  qkv::Tensor t;
  try {
    t = qkv::parse_npy(bytes, "fuzz.npy");
  } catch (const qkv::Error&) {
    return 0;
  }
  const std::string again = qkv::encode_npy(t);
  const qkv::Tensor u = qkv::parse_npy(again, "again.npy");  // must not throw
  if (u.shape() != t.shape() || u.dtype() != t.dtype() || qkv::encode_npy(u) != again)
    __builtin_trap();
  return 0;
}
