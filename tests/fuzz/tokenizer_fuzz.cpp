// libFuzzer target: the WordPiece tokenizer (models/text/tokenizer.h) on arbitrary bytes — as text
// to encode (alone and as a pair split at the first 0 byte), and as a vocabulary file's lines.
// Valid UTF-8 must tokenize; anything else must be a qkv::Error naming the byte. Every token's byte
// span lies within its text; ids lie within the vocabulary.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/text/tokenizer.h"
#include "qkv/tensor.h"

namespace {

const qkv::WordPieceTokenizer& tokenizer() {
  static const qkv::WordPieceTokenizer t(std::vector<std::string>{
      "[PAD]", "[UNK]", "[CLS]", "[SEP]",  "[MASK]", "the", "cat",   "sat",  "on",  "mat", "##s",
      "##ing", "un",    "##aff", "##able", "a",      "b",   "c",     "##a",  "##b", "##c", ",",
      ".",     "!",     "'",     "é",      "中",     "##é", "river", "bank", "he",  "hans"});
  return t;
}

void check(const qkv::Encoding& e, std::string_view a, std::string_view b, std::size_t size) {
  for (const qkv::Token& t : e.tokens) {
    if (t.id < 0 || static_cast<std::size_t>(t.id) >= size) __builtin_trap();
    const std::string_view text = t.segment == 0 ? a : b;
    if (t.begin > t.end || t.end > text.size()) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const qkv::WordPieceTokenizer& t = tokenizer();
  try {
    check(t.encode(bytes, 64), bytes, {}, t.size());
  } catch (const qkv::Error&) {
  }
  const std::size_t zero = bytes.find('\0');
  if (zero != std::string_view::npos) {
    const std::string_view a = bytes.substr(0, zero), b = bytes.substr(zero + 1);
    try {
      check(t.encode_pair(a, b, 48), a, b, t.size());
    } catch (const qkv::Error&) {
    }
  }
  // The bytes as a vocabulary, one token a line, then a fixed text through it.
  std::vector<std::string> vocab;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= bytes.size() && vocab.size() < 4096; ++i)
    if (i == bytes.size() || bytes[i] == '\n') {
      vocab.emplace_back(bytes.substr(start, i - start));
      start = i + 1;
    }
  try {
    const qkv::WordPieceTokenizer v(vocab);
    check(v.encode("The river bank, unaffable! 中文 é", 32), "The river bank, unaffable! 中文 é",
          {}, v.size());
  } catch (const qkv::Error&) {
  }
  return 0;
}
