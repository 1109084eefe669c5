// libFuzzer target: the GGUF reader (core/gguf.h) on arbitrary bytes: a checked file or a
// qkv::Error, never a crash, an out-of-bounds read or an allocation the file does not back.
// Every tensor it accepts must dequantize, to exactly as many values as its shape holds. A file
// that parses goes on to the decoder's loader (models/llama/llama.h, models/text/bpe.h): its
// config, checked against the tensors, its weights and its tokenizer, each a result or a
// qkv::Error. The corpus holds a tiny Llama model and lying copies of it
// (tests/models/tiny_llama_gguf.h), and the tiny qwen2 and qwen3 models of
// tests/golden/gguf_families (biases, q/k norms, wider heads), so that the fuzzer starts from
// files that reach the loader of more than one architecture,
// and a file with a tensor of every type qkv reads, F32 to Q6_K, and one of Q2_K, which it refuses
// (quant_types.gguf, unread_q2_k.gguf: tests/golden/make_ggml_quant_goldens.py), so that it
// mutates every dequantizer's blocks and the K-quants' 256-value rows.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/gguf.h"
#include "models/llama/llama.h"
#include "models/text/gguf_tokenizer.h"

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
  try {
    const qkv::LlamaConfig c = qkv::read_llama_config(f);
    // The config is believed only as far as the tensors back it: the weights it names exist.
    // Both ways of keeping the matrices: as the file's blocks, and dequantized.
    for (const qkv::WeightFormat format : {qkv::WeightFormat::file, qkv::WeightFormat::float32}) {
      const qkv::LlamaWeights w = qkv::read_llama_weights(f, c, format);
      if (static_cast<int64_t>(w.layers.size()) != c.layers) __builtin_trap();
      if (w.embedding.out() != c.vocab || w.embedding.in() != c.hidden) __builtin_trap();
    }
  } catch (const qkv::Error&) {
  }
  try {
    const qkv::GgufTokenizer t = qkv::GgufTokenizer::from_gguf(f);  // BPE or SentencePiece
    if (t.size() == 0) __builtin_trap();
  } catch (const qkv::Error&) {
  }
  return 0;
}
