// libFuzzer target: loading a model saved by `qkv train` (Seq2Seq::load: a safetensors file whose
// metadata holds the config and the vocabulary) from arbitrary bytes, then decoding a short input
// with it. A config that lies — sizes that do not match the tensors, absurd sizes, a vocabulary
// the task cannot use — must be a qkv::Error, never a crash, a hang or a huge allocation.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "models/seq2seq.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An in-memory file: the loader reads a path.
  const int fd = ::memfd_create("fuzz.safetensors", MFD_CLOEXEC);
  if (fd < 0) __builtin_trap();
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) __builtin_trap();
    done += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    auto model = qkv::Seq2Seq::load(path);
    (void)model->greedy_decode({"ab12"}, 0, 1);
  } catch (const qkv::Error&) {
  }
  ::close(fd);
  return 0;
}
