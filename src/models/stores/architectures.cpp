// The GGUF architectures qkv's decoder runs: the one list `qkv models` marks files by. The decoder
// (src/models/llama/) fills it as it learns each family.
#include "qkv/model_stores.h"

namespace qkv {

std::vector<std::string> supported_gguf_architectures() { return {"llama"}; }

}  // namespace qkv
