// Byte-level BPE; see bpe.h. Written from the behaviour of Hugging Face's tokenizers
// (AddedVocabulary, Split, Digits, ByteLevel, BPE with ignore_merges) and checked against it on the
// goldens of tests/golden/smollm2 and tests/golden/bpe; the pre-tokenizers are pre_tokenizers.cpp.
#include "models/text/bpe.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <optional>
#include <queue>
#include <utility>

#include "core/gguf.h"
#include "core/text/utf8.h"
#include "models/text/gguf_tokenizer.h"
#include "models/text/nfc.h"
#include "models/text/specials.h"
#include "qkv/tensor.h"

namespace qkv {
namespace {

// GPT-2's byte alphabet: the printable bytes ! to ~, ¡ to ¬ and ® to ÿ stand for themselves; the
// other 68 (controls, space, DEL, U+0080..U+00A0, the soft hyphen) take U+0100 onwards in order.
struct ByteAlphabet {
  std::array<char32_t, 256> symbol{};
  static constexpr char32_t kEnd = 256 + 68;  // symbols are below this
  std::array<int16_t, kEnd> byte{};           // -1: not a symbol

  ByteAlphabet() {
    byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      symbol[b] = printable ? char32_t(b) : next++;
      byte[symbol[b]] = int16_t(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

uint64_t pair_key(int32_t left, int32_t right) {
  return uint64_t(uint32_t(left)) << 32 | uint32_t(right);
}

// Why the character of `piece` holding byte `at` cannot be encoded: the vocabulary has no symbol
// for one of its bytes. A pre-tokenizer piece holds whole characters.
std::string unspelled_character(std::string_view piece, std::size_t at, const int32_t* byte_ids) {
  std::size_t begin = at;
  while (begin > 0 && (static_cast<unsigned char>(piece[begin]) & 0xC0) == 0x80) --begin;
  std::size_t end = begin;
  const char32_t cp = utf8::next(piece, end);
  char hex[16];
  std::string shown;
  if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) {  // a control character: its code point
    std::snprintf(hex, sizeof hex, "U+%04X", static_cast<unsigned>(cp));
    shown = hex;
  } else {
    shown = "'" + std::string(piece.substr(begin, end - begin)) + "'";
  }
  std::string bytes;
  for (std::size_t k = begin; k < end; ++k) {
    std::snprintf(hex, sizeof hex, " 0x%02x",
                  static_cast<unsigned>(static_cast<unsigned char>(piece[k])));
    bytes += hex;
  }
  const auto lacking = std::count(byte_ids, byte_ids + 256, -1);
  return "the text's character " + shown + " (" + (end - begin == 1 ? "byte" : "bytes") + bytes +
         ") has no token in this model's vocabulary (it lacks " + std::to_string(lacking) +
         " of the 256 byte tokens); expected only characters the vocabulary can spell";
}

std::string token_bytes(const std::string& token) {
  const ByteAlphabet& a = alphabet();
  std::string out;
  out.reserve(token.size());
  for (std::size_t i = 0; i < token.size();) {
    const char32_t cp = utf8::next(token, i);
    if (cp < ByteAlphabet::kEnd && a.byte[cp] >= 0) {
      out += char(a.byte[cp]);
    } else {
      utf8::append(out, cp);  // not of the alphabet: as it is written
    }
  }
  return out;
}

}  // namespace

BpeTokenizer BpeTokenizer::from_vocab(std::vector<std::string> tokens,
                                      const std::vector<std::string>& merges,
                                      std::vector<int32_t> token_types, PreTokenizer pre) {
  if (tokens.empty()) throw Error("BPE vocabulary: no tokens");
  if (tokens.size() > std::size_t(INT32_MAX)) throw Error("BPE vocabulary: too many tokens");
  if (token_types.empty()) token_types.assign(tokens.size(), int32_t(TokenType::normal));
  if (token_types.size() != tokens.size()) {
    throw Error("BPE vocabulary: " + std::to_string(token_types.size()) + " token types for " +
                std::to_string(tokens.size()) + " tokens; expected one type per token");
  }
  BpeTokenizer t;
  t.pre_ = pre;
  t.tokens_ = std::move(tokens);
  t.types_ = std::move(token_types);
  t.ids_.reserve(t.tokens_.size());
  for (std::size_t id = 0; id < t.tokens_.size(); ++id) {
    utf8::validate(t.tokens_[id], "BPE vocabulary: token " + std::to_string(id));
    t.ids_.emplace(t.tokens_[id], int32_t(id));
  }
  const ByteAlphabet& a = alphabet();
  for (int b = 0; b < 256; ++b) {
    std::string symbol;
    utf8::append(symbol, a.symbol[b]);
    t.byte_ids_[b] = t.id_of(symbol);  // -1: the byte is dropped
  }
  t.merges_.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& m = merges[rank];
    const std::size_t space = m.find(' ');
    auto fail = [&](const std::string& why) {
      throw Error("BPE merges: merge " + std::to_string(rank) + " \"" + m + "\" " + why);
    };
    if (space == std::string::npos || space == 0 || space + 1 == m.size() ||
        m.find(' ', space + 1) != std::string::npos) {
      fail("is not two tokens separated by one space");
    }
    const std::string_view left(m.data(), space), right(m.data() + space + 1, m.size() - space - 1);
    const int32_t l = t.id_of(left), r = t.id_of(right);
    const int32_t merged = t.id_of(std::string(left) + std::string(right));
    if (l < 0 || r < 0) fail("names a token not in the vocabulary");
    if (merged < 0) fail("makes a token not in the vocabulary");
    t.merges_.emplace(pair_key(l, r), Merge{int32_t(rank), merged});
  }
  for (std::size_t id = 0; id < t.tokens_.size(); ++id) {
    const auto type = TokenType(t.types_[id]);
    if ((type == TokenType::control || type == TokenType::user_defined) && !t.tokens_[id].empty() &&
        t.ids_.at(t.tokens_[id]) == int32_t(id)) {
      t.specials_.push_back(int32_t(id));
    }
  }
  std::stable_sort(t.specials_.begin(), t.specials_.end(),
                   [&](int32_t x, int32_t y) { return t.tokens_[x].size() > t.tokens_[y].size(); });
  for (const int32_t id : t.specials_)
    t.special_first_[static_cast<unsigned char>(t.tokens_[id][0])] = true;
  return t;
}

BpeTokenizer BpeTokenizer::from_gguf(const GgufFile& file) {
  const auto text = [&](const char* key) {
    const nlohmann::json& v = file.meta(key);
    if (!v.is_string()) throw Error(file.name() + ": " + key + " is not a string");
    return v.get<std::string>();
  };
  const std::string model = text("tokenizer.ggml.model");
  const std::string pre = file.has("tokenizer.ggml.pre") ? text("tokenizer.ggml.pre") : "";
  // The pre-tokenizer is named, not written, in the file: one qkv does not know would give ids
  // that silently differ from the model's (llama.cpp falls back to a default regex and warns).
  const std::optional<PreTokenizer> pre_tokenizer = pre_tokenizer_named(pre);
  if (model != "gpt2" || !pre_tokenizer) {
    throw Error(file.name() + ": tokenizer.ggml.model \"" + model +
                "\" with tokenizer.ggml.pre \"" + pre +
                "\"; qkv's byte-level BPE tokenizer reads \"gpt2\" with the pre-tokenizers " +
                known_pre_tokenizer_names());
  }
  // A BPE vocabulary is its tokens and the merges that build them: a file without merges would
  // encode "19" as "1", "9" and every word as its bytes, a different model from the one trained.
  if (!file.has("tokenizer.ggml.merges") || !file.meta("tokenizer.ggml.merges").is_array() ||
      file.meta("tokenizer.ggml.merges").empty())
    throw Error(file.name() + ": " +
                (file.has("tokenizer.ggml.merges")
                     ? "metadata \"tokenizer.ggml.merges\" is " +
                           gguf_value_str(file.meta("tokenizer.ggml.merges"))
                     : std::string("no metadata \"tokenizer.ggml.merges\"")) +
                "; a BPE vocabulary (tokenizer.ggml.model \"gpt2\") needs its merges");
  // Each array of the type it must be, checked where its key is known (models/text/
  // gguf_tokenizer.h): the JSON library's "type must be string, but is number" named neither.
  std::vector<std::string> tokens =
      gguf_strings(file, "tokenizer.ggml.tokens", "the vocabulary, an array of strings");
  std::vector<std::string> merges = gguf_strings(
      file, "tokenizer.ggml.merges", "the merges, an array of strings (\"left right\")");
  std::vector<int32_t> types = gguf_token_types(file, tokens);
  BpeTokenizer t;
  try {
    t = from_vocab(std::move(tokens), merges, std::move(types), *pre_tokenizer);
  } catch (const Error& e) {
    throw Error(file.name() + ": " + e.what());
  }
  // An end-of-text id outside the vocabulary never matches a generated token: generation would
  // not stop and would write the end-of-turn markers as text.
  const std::string prefix = "tokenizer.ggml.", suffix = "_token_id";
  for (const auto& [key, value] : file.metadata().items()) {
    if (key.size() <= prefix.size() + suffix.size() || key.rfind(prefix, 0) != 0 ||
        key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const bool inside = value.is_number_integer() &&
                        (value.is_number_unsigned() ? value.get<uint64_t>() < t.size()
                                                    : value.get<int64_t>() >= 0 &&
                                                          value.get<int64_t>() < int64_t(t.size()));
    if (!inside)
      throw Error(file.name() + ": metadata \"" + key + "\" is " + gguf_value_str(value) +
                  "; expected a token id from 0 to " + std::to_string(t.size() - 1) +
                  " (the vocabulary holds " + std::to_string(t.size()) + " tokens)");
  }
  return t;
}

int32_t BpeTokenizer::id_of(std::string_view token) const {
  const auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

const std::string& BpeTokenizer::token(int32_t id) const {
  if (id < 0 || std::size_t(id) >= tokens_.size()) {
    throw Error("token id " + std::to_string(id) + " is out of range; expected 0 to " +
                std::to_string(tokens_.size() - 1));
  }
  return tokens_[id];
}

TokenType BpeTokenizer::type(int32_t id) const {
  token(id);  // checks the range
  return TokenType(types_[id]);
}

std::string BpeTokenizer::token_text(int32_t id) const { return token_bytes(token(id)); }

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (const int32_t id : ids) out += token_text(id);
  return out;
}

std::vector<std::string> BpeTokenizer::pre_tokenize(std::string_view raw) const {
  utf8::validate(raw);
  const std::string normalized = normalizes_to_nfc(pre_) ? to_nfc(raw) : std::string();
  const std::string_view text = normalizes_to_nfc(pre_) ? normalized : raw;
  std::vector<std::string> pieces;
  std::size_t begin = 0;
  for (const std::size_t end : pre_tokenizer_cuts(pre_, text)) {
    pieces.emplace_back(text.substr(begin, end - begin));
    begin = end;
  }
  return pieces;
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, Unspelled unspelled) const {
  utf8::validate(text);
  std::vector<int32_t> out;
  // Step 1: the special tokens stay whole (models/text/specials.h).
  split_at_specials(
      text, tokens_, specials_, special_first_,
      [&](std::string_view stretch) { encode_plain(stretch, unspelled, out); },
      [&](int32_t id) { out.push_back(id); });
  return out;
}

void BpeTokenizer::encode_plain(std::string_view raw, Unspelled unspelled,
                                std::vector<int32_t>& out) const {
  // Step 2 on the text between special tokens: HF's added tokens are cut out before normalizing.
  const std::string normalized = normalizes_to_nfc(pre_) ? to_nfc(raw) : std::string();
  const std::string_view text = normalizes_to_nfc(pre_) ? normalized : raw;
  std::size_t begin = 0;
  for (const std::size_t end : pre_tokenizer_cuts(pre_, text)) {
    bpe(text.substr(begin, end - begin), unspelled, out);
    begin = end;
  }
}

void BpeTokenizer::bpe(std::string_view piece, Unspelled unspelled,
                       std::vector<int32_t>& out) const {
  // Llama 3's ignore_merges: a piece that is a token of the vocabulary is that token, whatever
  // the merges would make of it (HF's BPE looks the spelled piece up before merging, llama.cpp's
  // llm_tokenizer_bpe_session too). Its vocabulary has such tokens, so the ids differ.
  if (ignores_merges(pre_)) {
    std::string spelled;
    for (const char b : piece)
      utf8::append(spelled, alphabet().symbol[static_cast<unsigned char>(b)]);
    if (const int32_t id = id_of(spelled); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  // The piece's bytes as a linked list of symbols; a merged-away symbol has id -1.
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // -1 at the ends
  };
  // Bytes whose symbol is not in the vocabulary are left out, as HF's BPE without an unknown token
  // leaves out the characters it cannot find (their neighbours become adjacent), or refused.
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  for (std::size_t k = 0; k < piece.size(); ++k) {
    const int32_t id = byte_ids_[static_cast<unsigned char>(piece[k])];
    if (id >= 0) {
      symbols.push_back({id, int32_t(symbols.size()) - 1, int32_t(symbols.size()) + 1});
    } else if (const auto byte = static_cast<unsigned char>(piece[k]);
               unspelled == Unspelled::refuse && byte >= 0x20 && byte != 0x7F) {
      throw Error(unspelled_character(piece, k, byte_ids_));
    }
  }
  const int32_t n = int32_t(symbols.size());
  if (n > 0) symbols.back().next = -1;
  // Candidate merges of adjacent pairs, lowest rank first, then leftmost. An entry whose symbols
  // have changed since it was pushed is stale and skipped.
  struct Candidate {
    int32_t rank, left, left_id, right_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int32_t left) {
    if (left < 0 || symbols[left].next < 0) return;
    const Symbol& l = symbols[left];
    const int32_t right_id = symbols[l.next].id;
    const auto it = merges_.find(pair_key(l.id, right_id));
    if (it != merges_.end()) queue.push({it->second.rank, left, l.id, right_id});
  };
  for (int32_t k = 0; k + 1 < n; ++k) consider(k);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = symbols[c.left];
    if (l.id != c.left_id || l.next < 0 || symbols[l.next].id != c.right_id) continue;
    const int32_t right = l.next;
    l.id = merges_.at(pair_key(c.left_id, c.right_id)).id;
    l.next = symbols[right].next;
    if (l.next >= 0) symbols[l.next].prev = c.left;
    symbols[right].id = -1;
    consider(l.prev);
    consider(c.left);
  }
  for (int32_t k = n > 0 ? 0 : -1; k >= 0; k = symbols[k].next) out.push_back(symbols[k].id);
}

}  // namespace qkv
