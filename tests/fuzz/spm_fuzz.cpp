// libFuzzer target: the SentencePiece-style tokenizer (models/text/spm.h) on arbitrary bytes.
//
// The bytes up to the first 0 byte (all of them when there is none) are a text, encoded by two
// tokenizers built here: one with the 256 byte tokens (byte fallback), the "▁" prefix, merges of
// competing scores over ASCII and the bytes of é and 中, and special tokens of which one is a
// prefix of another; one without byte tokens and without the prefix, whose unknown token stands for
// what it cannot spell. Invariants:
//   - encode accepts exactly the valid UTF-8 texts (RFC 3629, checked here independently of
//     utf8.h); any other input is a qkv::Error, never another exception or a crash;
//   - every id lies within the vocabulary;
//   - with byte fallback nothing is lost: decode(encode(text)) == text, for texts without "▁"
//     (U+2581, which reads as a space);
//   - refuse is a qkv::Error exactly when drop writes an unknown token for a character (never
//     with byte fallback), and otherwise gives drop's ids.
// The bytes after the first 0 byte are a vocabulary, one entry a line, added after the first
// tokenizer's: "!tok" a control token, "~tok" a user-defined one, anything else a normal token
// whose score is its line number's negative (so that later lines merge later). Such a tokenizer
// either is a qkv::Error or encodes the text with ids in range, and losslessly as above.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/text/spm.h"
#include "qkv/tensor.h"

namespace {

using qkv::SpmTokenizer;
using qkv::TokenType;

// RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF.
bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || (n == 2 && b < 0xC2) || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    const auto c1 = static_cast<unsigned char>(n > 1 ? s[i + 1] : 0);
    if ((b == 0xE0 && c1 < 0xA0) || (b == 0xED && c1 >= 0xA0) || (b == 0xF0 && c1 < 0x90) ||
        (b == 0xF4 && c1 >= 0x90) || b > 0xF4)
      return false;
    i += n;
  }
  return true;
}

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  void add(const std::string& token, float score, TokenType type = TokenType::normal) {
    tokens.push_back(token);
    scores.push_back(score);
    types.push_back(int32_t(type));
  }
};

const std::string kMeta = "\xE2\x96\x81";

Vocab fixed_vocab(bool bytes) {
  Vocab v;
  v.add("<unk>", 0, TokenType::unknown);
  v.add("<s>", 0, TokenType::control);
  v.add("<start_of_turn>", 0, TokenType::control);
  v.add("<start", 0, TokenType::user_defined);  // a prefix of the one above
  if (bytes) {
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b)
      v.add(std::string("<0x") + hex[b / 16] + hex[b % 16] + ">", 0, TokenType::byte);
  }
  v.add(kMeta, -1);
  for (char c = ' ' + 1; c < 127; ++c) v.add(std::string(1, c), -2);
  float score = -3;
  for (const char* merge : {"th", "he", "the", "in", "ing", "aa", "aaa", "12", "23", "123",
                            "\xC3\xA9", "\xE4\xB8\xAD", "<s", "s>"})
    v.add(merge, score--);
  for (const char* merge : {"the", "a", "in", "aa", "1"}) v.add(kMeta + merge, score--);
  v.add(kMeta + kMeta, -3.5f);  // a score between others': merges compete
  return v;
}

const SpmTokenizer& with_bytes() {
  static const SpmTokenizer t = [] {
    const Vocab v = fixed_vocab(true);
    return SpmTokenizer::from_vocab(v.tokens, v.scores, v.types, true, 0);
  }();
  return t;
}

const SpmTokenizer& without_bytes() {
  static const SpmTokenizer t = [] {
    const Vocab v = fixed_vocab(false);
    return SpmTokenizer::from_vocab(v.tokens, v.scores, v.types, false, 0);
  }();
  return t;
}

[[noreturn]] void fail() { __builtin_trap(); }

// encode's contract on `text`; `lossless`: whether decode must give the text back.
void check_encode(const SpmTokenizer& t, std::string_view text, bool lossless) {
  const bool valid = valid_utf8(text);
  std::vector<int32_t> ids;
  try {
    ids = t.encode(text);
  } catch (const qkv::Error&) {
    if (valid) fail();
    return;
  }
  if (!valid) fail();
  for (const int32_t id : ids)
    if (id < 0 || std::size_t(id) >= t.size()) fail();
  // The unknown tokens written for characters, not for "<unk>" written in the text.
  std::size_t unknowns = 0, written = 0;
  for (const int32_t id : ids) unknowns += id == t.unknown_id();
  for (std::size_t at = text.find("<unk>"); at != std::string_view::npos;
       at = text.find("<unk>", at + 5))
    ++written;
  bool refused = false;
  try {
    if (t.encode(text, SpmTokenizer::Unspelled::refuse) != ids) fail();
  } catch (const qkv::Error&) {
    refused = true;
  }
  if (refused != (unknowns > written)) fail();
  if (lossless && text.find(kMeta) == std::string_view::npos && t.decode(ids) != text) fail();
}

void check_fuzzed_vocab(std::string_view spec, std::string_view text) {
  Vocab v = fixed_vocab(true);
  std::size_t start = 0;
  float score = -100;
  for (std::size_t i = 0; i <= spec.size() && v.tokens.size() < 1024; ++i) {
    if (i < spec.size() && spec[i] != '\n') continue;
    const std::string line(spec.substr(start, i - start));
    start = i + 1;
    if (!line.empty() && line[0] == '!')
      v.add(line.substr(1), 0, TokenType::control);
    else if (!line.empty() && line[0] == '~')
      v.add(line.substr(1), 0, TokenType::user_defined);
    else
      v.add(line, score--);
  }
  std::optional<SpmTokenizer> built;
  try {
    built = SpmTokenizer::from_vocab(v.tokens, v.scores, v.types, true, 0);
  } catch (const qkv::Error&) {
    return;  // a token that is not UTF-8
  }
  check_encode(*built, text, true);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::size_t zero = bytes.find('\0');
  const std::string_view text = bytes.substr(0, zero);
  check_encode(with_bytes(), text, true);
  check_encode(without_bytes(), text, false);
  if (zero != std::string_view::npos) check_fuzzed_vocab(bytes.substr(zero + 1), text);
  return 0;
}
