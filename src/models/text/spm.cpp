// SentencePiece-style BPE over scored tokens; see spm.h. Written from llama.cpp's
// src/llama-vocab.cpp (llm_tokenizer_spm_session: the bigram queue by score;
// tokenizer_st_partition; the " " prefix and the "▁" escape) and SentencePiece's bpe_model.cc
// (which tokens merges may make), and checked against SentencePiece itself on the goldens of
// tests/golden/spm.
#include "models/text/spm.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <queue>
#include <utility>

#include "core/gguf.h"
#include "core/text/utf8.h"
#include "models/text/gguf_tokenizer.h"
#include "models/text/specials.h"
#include "qkv/tensor.h"

namespace qkv {
namespace {

constexpr std::string_view kMeta = "\xE2\x96\x81";  // U+2581 "▁", SentencePiece's space

// "<0x0A>" → 0x0A; -1 when `token` is not spelled as a byte token.
int byte_of(std::string_view token) {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return -1;
  int value = 0;
  for (const char c : token.substr(3, 2)) {
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (digit < 0) return -1;  // SentencePiece writes upper-case hex only
    value = value * 16 + digit;
  }
  return value;
}

// Why a character cannot be encoded: no token spells it, and the vocabulary lacks its byte tokens.
std::string unspelled_character(std::string_view symbol, const int32_t* byte_ids) {
  char hex[16];
  std::string bytes;
  for (const char c : symbol) {
    std::snprintf(hex, sizeof hex, " 0x%02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
    bytes += hex;
  }
  std::size_t i = 0;
  const char32_t cp = utf8::next(symbol, i);
  std::snprintf(hex, sizeof hex, "U+%04X", static_cast<unsigned>(cp));
  const auto lacking = std::count(byte_ids, byte_ids + 256, -1);
  return std::string("the text's character ") + hex + " (" +
         (symbol.size() == 1 ? "byte" : "bytes") + bytes +
         ") has no token in this model's vocabulary, which lacks " + std::to_string(lacking) +
         " of the 256 byte tokens <0x00>…<0xFF> that would spell it; expected only characters "
         "the vocabulary can spell";
}

}  // namespace

SpmTokenizer SpmTokenizer::from_vocab(std::vector<std::string> tokens, std::vector<float> scores,
                                      std::vector<int32_t> token_types, bool add_space_prefix,
                                      int32_t unknown_id) {
  const auto fail = [](const std::string& why) { throw Error("SentencePiece vocabulary: " + why); };
  if (tokens.empty()) fail("no tokens");
  if (tokens.size() > std::size_t(INT32_MAX)) fail("too many tokens");
  if (token_types.empty()) token_types.assign(tokens.size(), int32_t(TokenType::normal));
  if (scores.size() != tokens.size() || token_types.size() != tokens.size())
    fail(std::to_string(scores.size()) + " scores and " + std::to_string(token_types.size()) +
         " token types for " + std::to_string(tokens.size()) +
         " tokens; expected one score and one type per token");
  if (unknown_id < -1 || (unknown_id >= 0 && std::size_t(unknown_id) >= tokens.size()))
    fail("the unknown token id " + std::to_string(unknown_id) + " is not a token (0 to " +
         std::to_string(tokens.size() - 1) + ")");
  SpmTokenizer t;
  t.tokens_ = std::move(tokens);
  t.scores_ = std::move(scores);
  t.types_ = std::move(token_types);
  t.add_space_prefix_ = add_space_prefix;
  t.unknown_id_ = unknown_id;
  std::fill(std::begin(t.byte_ids_), std::end(t.byte_ids_), -1);
  t.ids_.reserve(t.tokens_.size());
  for (std::size_t id = 0; id < t.tokens_.size(); ++id) {
    utf8::validate(t.tokens_[id], "SentencePiece vocabulary: token " + std::to_string(id));
    // A NaN score would make the merge order depend on the queue's internals.
    if (!std::isfinite(t.scores_[id]))
      fail("token " + std::to_string(id) + " has the score " + std::to_string(t.scores_[id]) +
           "; expected a finite number");
    if (!t.ids_.emplace(t.tokens_[id], int32_t(id)).second) continue;
    if (const int b = byte_of(t.tokens_[id]);
        b >= 0 && t.byte_ids_[b] < 0 && TokenType(t.types_[id]) == TokenType::byte)
      t.byte_ids_[b] = int32_t(id);
    if (t.is_special(int32_t(id)) && !t.tokens_[id].empty()) t.specials_.push_back(int32_t(id));
  }
  std::stable_sort(t.specials_.begin(), t.specials_.end(),
                   [&](int32_t x, int32_t y) { return t.tokens_[x].size() > t.tokens_[y].size(); });
  for (const int32_t id : t.specials_)
    t.special_first_[static_cast<unsigned char>(t.tokens_[id][0])] = true;
  return t;
}

SpmTokenizer SpmTokenizer::from_gguf(const GgufFile& file) {
  const std::string model = gguf_string(file, "tokenizer.ggml.model");
  if (model != "llama")
    throw Error(file.name() + ": tokenizer.ggml.model \"" + model +
                "\"; qkv's SentencePiece tokenizer reads \"llama\"");
  std::vector<std::string> tokens =
      gguf_strings(file, "tokenizer.ggml.tokens", "the vocabulary, an array of strings");
  if (!file.has("tokenizer.ggml.scores"))
    throw Error(file.name() +
                ": no metadata \"tokenizer.ggml.scores\"; a SentencePiece vocabulary "
                "(tokenizer.ggml.model \"llama\") needs its scores, the order of its merges");
  std::vector<float> scores = gguf_floats(file, "tokenizer.ggml.scores");
  std::vector<int32_t> types = gguf_token_types(file, tokens);
  const bool prefix = !file.has("tokenizer.ggml.add_space_prefix") ||
                      gguf_bool(file, "tokenizer.ggml.add_space_prefix");
  int32_t unknown = 0;  // SentencePiece's <unk>, where the file states none (as llama.cpp)
  if (file.has("tokenizer.ggml.unknown_token_id"))
    unknown = gguf_token_id(file, "tokenizer.ggml.unknown_token_id", tokens.size());
  try {
    return from_vocab(std::move(tokens), std::move(scores), std::move(types), prefix, unknown);
  } catch (const Error& e) {
    throw Error(file.name() + ": " + e.what());
  }
}

int32_t SpmTokenizer::id_of(std::string_view token) const {
  const auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

const std::string& SpmTokenizer::token(int32_t id) const {
  if (id < 0 || std::size_t(id) >= tokens_.size())
    throw Error("token id " + std::to_string(id) + " is out of range; expected 0 to " +
                std::to_string(tokens_.size() - 1));
  return tokens_[id];
}

float SpmTokenizer::score(int32_t id) const { return token(id), scores_[id]; }

TokenType SpmTokenizer::type(int32_t id) const {
  token(id);  // checks the range
  return TokenType(types_[id]);
}

bool SpmTokenizer::is_special(int32_t id) const {
  const auto type = TokenType(types_[id]);
  return type == TokenType::control || type == TokenType::user_defined ||
         type == TokenType::unknown;
}

int32_t SpmTokenizer::mergeable(std::string_view text) const {
  const int32_t id = id_of(text);
  if (id < 0) return -1;
  const auto type = TokenType(types_[id]);
  return type == TokenType::normal || type == TokenType::undefined ? id : -1;
}

std::string SpmTokenizer::token_text(int32_t id) const {
  const std::string& t = token(id);
  if (TokenType(types_[id]) == TokenType::byte)
    if (const int b = byte_of(t); b >= 0) return std::string(1, char(b));
  if (is_special(id)) return t;  // "<start_of_turn>": written as it is
  std::string out;
  for (std::size_t i = 0; i < t.size();) {
    if (t.compare(i, kMeta.size(), kMeta) == 0) {
      out += ' ';
      i += kMeta.size();
    } else {
      out += t[i++];
    }
  }
  return out;
}

std::string SpmTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  bool stretch_start = true;  // at the start or after a special token: step 2 added a space
  for (const int32_t id : ids) {
    std::string text = token_text(id);
    if (is_special(id)) {
      stretch_start = true;
    } else {
      if (stretch_start && add_space_prefix_ && !text.empty() && text[0] == ' ') text.erase(0, 1);
      stretch_start = false;
    }
    out += text;
  }
  return out;
}

std::vector<int32_t> SpmTokenizer::encode(std::string_view text, Unspelled unspelled) const {
  utf8::validate(text);
  std::vector<int32_t> out;
  // Step 1: the special tokens stay whole (models/text/specials.h).
  split_at_specials(
      text, tokens_, specials_, special_first_,
      [&](std::string_view stretch) { encode_plain(stretch, unspelled, out); },
      [&](int32_t id) { out.push_back(id); });
  return out;
}

void SpmTokenizer::encode_plain(std::string_view text, Unspelled unspelled,
                                std::vector<int32_t>& out) const {
  if (text.empty()) return;  // llama.cpp makes no fragment of an empty stretch: no "▁" alone
  // Step 2: the prefix, and every space as "▁".
  std::string s;
  s.reserve(3 * text.size() + 3);
  if (add_space_prefix_) s += kMeta;
  for (const char c : text)
    if (c == ' ')
      s += kMeta;
    else
      s += c;
  // Step 3: the characters as a linked list of symbols, each a stretch [begin, begin + size) of s;
  // a merged-away symbol has size 0.
  struct Symbol {
    std::size_t begin, size;
    int32_t prev, next;  // -1 at the ends
  };
  std::vector<Symbol> symbols;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t begin = i;
    utf8::next(s, i);
    symbols.push_back({begin, i - begin, int32_t(symbols.size()) - 1, int32_t(symbols.size()) + 1});
  }
  symbols.back().next = -1;
  // Candidate merges of adjacent pairs, highest score first, then leftmost (llama.cpp's
  // llm_bigram_spm order). An entry whose symbols have changed since it was pushed is stale: its
  // length no longer matches theirs.
  struct Candidate {
    float score;
    int32_t left;
    std::size_t size;
    bool operator<(const Candidate& o) const {
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::priority_queue<Candidate> queue;
  auto consider = [&](int32_t left) {
    if (left < 0 || symbols[left].next < 0) return;
    const Symbol& l = symbols[left];
    const std::size_t size = l.size + symbols[l.next].size;
    if (const int32_t id = mergeable(std::string_view(s).substr(l.begin, size)); id >= 0)
      queue.push({scores_[id], left, size});
  };
  for (int32_t k = 0; k + 1 < int32_t(symbols.size()); ++k) consider(k);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = symbols[c.left];
    if (l.size == 0 || l.next < 0 || l.size + symbols[l.next].size != c.size) continue;
    Symbol& r = symbols[l.next];
    l.size += r.size;
    r.size = 0;
    l.next = r.next;
    if (l.next >= 0) symbols[l.next].prev = c.left;
    consider(l.prev);
    consider(c.left);
  }
  // Step 4.
  for (int32_t k = 0; k >= 0; k = symbols[k].next) {
    const std::string_view symbol = std::string_view(s).substr(symbols[k].begin, symbols[k].size);
    if (const int32_t id = mergeable(symbol); id >= 0)
      out.push_back(id);
    else
      spell_bytes(symbol, unspelled, out);
  }
}

void SpmTokenizer::spell_bytes(std::string_view symbol, Unspelled unspelled,
                               std::vector<int32_t>& out) const {
  const bool spelled = std::all_of(symbol.begin(), symbol.end(), [&](char c) {
    return byte_ids_[static_cast<unsigned char>(c)] >= 0;
  });
  if (spelled) {
    for (const char c : symbol) out.push_back(byte_ids_[static_cast<unsigned char>(c)]);
  } else if (unspelled == Unspelled::refuse) {
    throw Error(unspelled_character(symbol == kMeta ? " " : symbol, byte_ids_));
  } else if (unknown_id_ >= 0) {
    out.push_back(unknown_id_);  // SentencePiece's <unk> for a character it cannot spell
  }
}

}  // namespace qkv
