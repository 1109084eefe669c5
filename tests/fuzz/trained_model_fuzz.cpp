// libFuzzer target: loading a model saved by `qkv train` (Seq2Seq::load: a safetensors file whose
// metadata holds the config and the vocabulary), then decoding a short input with it. An input
// that starts with '{' is a config — the metadata's qkv.config — put beside the weights of the
// committed tiny model, so mutations explore configs that lie about the weights; any other input
// is the whole file. Either must load and decode, or be a qkv::Error: never a crash, a hang or an
// allocation the file does not back.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/safetensors.h"
#include "qkv/model.h"

namespace {

// The tiny model's tensors and metadata (tests/fuzz/corpus/trained_model/copy_tiny.safetensors).
const qkv::SafetensorsFile& seed() {
  static const qkv::SafetensorsFile file = qkv::read_safetensors(QKV_FUZZ_SEED_MODEL);
  return file;
}

std::string file_bytes(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  if (input.empty() || input[0] != '{') return input;
  std::vector<std::pair<std::string, qkv::Tensor>> tensors;
  for (const std::string& name : seed().names) tensors.emplace_back(name, seed().tensors.at(name));
  std::map<std::string, std::string> metadata = seed().metadata;
  metadata["qkv.config"] = input;
  return qkv::encode_safetensors(tensors, metadata);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes;
  try {
    bytes = file_bytes(data, size);
  } catch (const qkv::Error&) {
    // A config our writer refuses (not UTF-8): no file to load. Files with such metadata are
    // still explored, as whole-file inputs.
    return 0;
  }
  // An in-memory file: the loader reads a path.
  const int fd = ::memfd_create("fuzz.safetensors", MFD_CLOEXEC);
  if (fd < 0) __builtin_trap();
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
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
