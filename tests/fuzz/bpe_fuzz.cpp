// libFuzzer target: the byte-level BPE tokenizer (models/text/bpe.h) on arbitrary bytes.
//
// The bytes up to the first 0 byte (all of them when there is none) are a text, encoded by two
// tokenizers built here for each pre-tokenizer (smollm, gpt-2, llama-bpe, qwen2): one whose
// vocabulary has every byte's symbol, one that lacks five (as SmolLM2 lacks 21). Each has merges
// of ASCII, of the bytes of é, 中 and 🙂, merges that compete for the same bytes, tokens that
// no merge makes (llama-bpe takes such a piece whole), and special tokens of which one is a prefix
// of others. Invariants:
//   - encode accepts exactly the valid UTF-8 texts (RFC 3629, checked here independently of
//     utf8.h); any other input is a qkv::Error, never another exception or a crash;
//   - every id lies within the vocabulary;
//   - byte-level BPE loses nothing: decode(encode(text)) == text with the full alphabet, and == the
//     text less the bytes whose symbols are missing with the other; for qwen2, == NFC(text), and
//     NFC is idempotent;
//   - pre_tokenize cuts the text (qwen2: its NFC) into non-empty pieces that concatenate to it; a
//     piece holding an ASCII digit is that digit alone (smollm, qwen2) or at most three code
//     points and no other ASCII (llama-bpe).
// The bytes after the first 0 byte are a vocabulary, one entry a line, added after the 256 byte
// symbols: "l r" is a merge (its token l+r added too), "=l r" a merge as written (it may name
// tokens that do not exist: an error), "!tok" a control token, "#pre NAME" the pre-tokenizer
// (tokenizer.ggml.pre's names; smollm when there is none, an unknown one is skipped), anything else
// a plain token. Such a
// tokenizer either is a qkv::Error or encodes the text with ids in range, and losslessly when every
// special token's text is its own spelling (one spelled with byte-alphabet symbols decodes to their
// bytes, as Hugging Face's decoder does).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/text/bpe.h"
#include "models/text/nfc.h"
#include "models/text/pre_tokenizers.h"
#include "qkv/tensor.h"

namespace {

using qkv::BpeTokenizer;
using qkv::PreTokenizer;
using qkv::TokenType;

constexpr PreTokenizer kPreTokenizers[] = {PreTokenizer::smollm, PreTokenizer::gpt2,
                                           PreTokenizer::llama3, PreTokenizer::qwen2};

// RFC 3629, written here rather than taken from utf8.h: shortest form, no surrogates, ≤ U+10FFFF.
bool valid_utf8(std::string_view s) {
  static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    char32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      const auto t = static_cast<unsigned char>(s[i + k]);
      if ((t & 0xC0) != 0x80) return false;
      cp = cp << 6 | (t & 0x3F);
    }
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

// GPT-2's byte alphabet, written out again: printable bytes stand for themselves, the other 68
// for U+0100, U+0101, ... in byte order.
const std::string& symbol(unsigned char byte) {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t cp = printable ? char32_t(b) : next++;
      if (cp < 0x80) {
        t[b] += char(cp);
      } else {  // below U+0800: two bytes
        t[b] += char(0xC0 | (cp >> 6));
        t[b] += char(0x80 | (cp & 0x3F));
      }
    }
    return t;
  }();
  return table[byte];
}

std::string spelled(std::string_view bytes) {
  std::string s;
  for (const char b : bytes) s += symbol(static_cast<unsigned char>(b));
  return s;
}

// A vocabulary: the byte symbols (less `missing`), then merged tokens, then special tokens.
struct Vocab {
  std::vector<std::string> tokens, merges;
  std::vector<int32_t> types;
  void add(std::string token, TokenType type = TokenType::normal) {
    tokens.push_back(std::move(token));
    types.push_back(int32_t(type));
  }
  void merge(const std::string& left, const std::string& right) {
    merges.push_back(left + " " + right);
    add(left + right);
  }
};

Vocab byte_vocab(std::string_view missing = {}) {
  Vocab v;
  for (int b = 0; b < 256; ++b)
    if (missing.find(char(b)) == std::string_view::npos)
      v.add(symbol(static_cast<unsigned char>(b)));
  return v;
}

BpeTokenizer fixed_tokenizer(std::string_view missing, PreTokenizer pre) {
  Vocab v = byte_vocab(missing);
  // Merges by their bytes, in rank order; "ab"+"c" and "a"+"bc" compete for "abc".
  const std::pair<const char*, const char*> merges[] = {
      {" ", "t"},           {"h", "e"},
      {" t", "he"},         {"i", "n"},
      {" ", "a"},           {" ", " "},
      {"  ", "  "},         {"\n", "\n"},
      {"\r", "\n"},         {"'", "s"},
      {"e", "r"},           {"a", "b"},
      {"b", "c"},           {"ab", "c"},
      {"a", "bc"},          {"1", "2"},
      {"\xC3", "\xA9"},     {"\xE4", "\xB8"},
      {"\xE4\xB8", "\xAD"}, {"\xF0", "\x9F"},
      {"\xF0\x9F", "\x99"}, {"\xF0\x9F\x99", "\x82"},
      {"\t", "\t"},         {" ", "\xC3\xA9"}};
  for (const auto& [l, r] : merges) v.merge(spelled(l), spelled(r));
  for (const char* whole : {" the", "Hello", "123", "\n\n", " \xC3\xA9t\xC3\xA9"})
    v.add(spelled(whole));
  v.add("<|im_start|>", TokenType::control);
  v.add("<|im_end|>", TokenType::control);
  v.add("<|endoftext|>", TokenType::control);
  v.add("<|im", TokenType::user_defined);   // a prefix of two others: the longest must win
  v.add("<|im_end|>", TokenType::control);  // listed twice: keeps its first id
  return BpeTokenizer::from_vocab(v.tokens, v.merges, v.types, pre);
}

// The bytes whose symbols the second tokenizer lacks: four controls, as SmolLM2 lacks them, and a
// continuation byte, so that a character can lose one of its bytes.
constexpr std::string_view kMissing("\x04\x06\x13\x1d\x80", 5);

const BpeTokenizer& full(PreTokenizer pre = PreTokenizer::smollm) {
  static const std::vector<BpeTokenizer> t = [] {
    std::vector<BpeTokenizer> all;
    for (const PreTokenizer p : kPreTokenizers) all.push_back(fixed_tokenizer({}, p));
    return all;
  }();
  return t[std::size_t(pre)];
}
const BpeTokenizer& lacking(PreTokenizer pre) {
  static const std::vector<BpeTokenizer> t = [] {
    std::vector<BpeTokenizer> all;
    for (const PreTokenizer p : kPreTokenizers) all.push_back(fixed_tokenizer(kMissing, p));
    return all;
  }();
  return t[std::size_t(pre)];
}

[[noreturn]] void fail() { __builtin_trap(); }

// encode's contract on `text`; `dropped`: the bytes the tokenizer has no symbol for, or nullptr
// when lossless decoding is not promised.
void check_encode(const BpeTokenizer& t, std::string_view text, const std::string_view* dropped) {
  const bool valid = valid_utf8(text);
  std::vector<int32_t> ids;
  try {
    ids = t.encode(text);
  } catch (const qkv::Error&) {
    if (valid) fail();  // valid UTF-8 must encode
    return;
  }
  if (!valid) fail();  // invalid UTF-8 must be refused, not encoded
  for (const int32_t id : ids)
    if (id < 0 || std::size_t(id) >= t.size()) fail();
  if (dropped == nullptr) return;
  // Where the pre-tokenizer asks for NFC, encode normalizes the text between the special tokens:
  // the ids decode to text canonically equivalent to the input (a byte dropped from it may be one
  // that NFC moved, so only the full alphabet's result is compared).
  if (qkv::normalizes_to_nfc(t.pre_tokenizer())) {
    if (dropped->empty() && qkv::to_nfc(t.decode(ids)) != qkv::to_nfc(text)) fail();
    return;
  }
  std::string kept;
  for (const char c : text)
    if (dropped->find(c) == std::string_view::npos) kept += c;
  if (t.decode(ids) != kept) fail();
}

bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }

// How the pre-tokenizer cuts digits, seen on the ASCII ones.
void check_digits(PreTokenizer pre, const std::string& piece) {
  if (std::none_of(piece.begin(), piece.end(), is_ascii_digit) || pre == PreTokenizer::gpt2) return;
  if (pre != PreTokenizer::llama3) {
    if (piece.size() != 1) fail();  // the digit alone
    return;
  }
  std::size_t code_points = 0;
  for (const char c : piece) {
    code_points += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    if (static_cast<unsigned char>(c) < 0x80 && !is_ascii_digit(c)) fail();
  }
  if (code_points > 3) fail();
}

void check_pre_tokenize(const BpeTokenizer& t, std::string_view text) {
  std::vector<std::string> pieces;
  try {
    pieces = t.pre_tokenize(text);
  } catch (const qkv::Error&) {
    if (valid_utf8(text)) fail();
    return;
  }
  if (!valid_utf8(text)) fail();
  std::string joined;
  for (const std::string& p : pieces) {
    if (p.empty()) fail();
    check_digits(t.pre_tokenizer(), p);
    joined += p;
  }
  if (!qkv::normalizes_to_nfc(t.pre_tokenizer())) {
    if (joined != text) fail();
    return;
  }
  const std::string nfc = qkv::to_nfc(text);
  if (joined != nfc || qkv::to_nfc(nfc) != nfc) fail();
}

// The vocabulary lines after the 0 byte, as the header says.
void check_fuzzed_vocab(std::string_view spec, std::string_view text) {
  Vocab v = byte_vocab();
  PreTokenizer pre = PreTokenizer::smollm;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= spec.size() && v.tokens.size() < 1024; ++i) {
    if (i < spec.size() && spec[i] != '\n') continue;
    const std::string line(spec.substr(start, i - start));
    start = i + 1;
    const std::size_t space = line.find(' ');
    if (line.rfind("#pre ", 0) == 0) {
      pre = qkv::pre_tokenizer_named(line.substr(5)).value_or(pre);
    } else if (!line.empty() && line[0] == '=') {
      v.merges.push_back(line.substr(1));
    } else if (!line.empty() && line[0] == '!') {
      v.add(line.substr(1), TokenType::control);
    } else if (space != std::string::npos && space > 0 && space + 1 < line.size() &&
               line.find(' ', space + 1) == std::string::npos) {
      v.merge(line.substr(0, space), line.substr(space + 1));
    } else {
      v.add(line);
    }
  }
  std::optional<BpeTokenizer> built;
  try {
    built = BpeTokenizer::from_vocab(v.tokens, v.merges, v.types, pre);
  } catch (const qkv::Error&) {
    return;  // a refused vocabulary (a merge of tokens it lacks, a token not UTF-8): nothing more
  }
  const BpeTokenizer& t = *built;
  bool as_written = true;
  for (std::size_t id = 0; id < t.size(); ++id) {
    const auto type = t.type(int32_t(id));
    if (type == TokenType::control || type == TokenType::user_defined)
      as_written = as_written && t.token_text(int32_t(id)) == t.token(int32_t(id));
  }
  static constexpr std::string_view kNone;
  check_encode(t, text, as_written ? &kNone : nullptr);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::size_t zero = bytes.find('\0');
  const std::string_view text = bytes.substr(0, zero);
  static constexpr std::string_view kNothing;
  for (const PreTokenizer pre : kPreTokenizers) {
    check_encode(full(pre), text, &kNothing);
    check_encode(lacking(pre), text, &kMissing);
    check_pre_tokenize(full(pre), text);
  }
  // An id from the first four bytes: decoded, or a qkv::Error when out of range.
  if (size >= 4) {
    int32_t id = 0;
    std::memcpy(&id, data, 4);
    try {
      const std::string s = full().decode({id});
      if (id < 0 || std::size_t(id) >= full().size() || s.empty()) fail();
    } catch (const qkv::Error&) {
      if (id >= 0 && std::size_t(id) < full().size()) fail();
    }
  }
  if (zero != std::string_view::npos) check_fuzzed_vocab(bytes.substr(zero + 1), text);
  return 0;
}
