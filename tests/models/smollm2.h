// SmolLM2-135M-Instruct's tokenizer, read once per test program from the GGUF's metadata
// (model_files.h says where the file is; a missing model fails the test with how to get it).
#pragma once

#include "core/gguf.h"
#include "models/model_files.h"
#include "models/text/bpe.h"

namespace qkv::test {

inline const BpeTokenizer& smollm2_tokenizer() {
  static const BpeTokenizer tokenizer =
      BpeTokenizer::from_gguf(GgufFile::open(test::smollm2_gguf()));
  return tokenizer;
}

}  // namespace qkv::test
