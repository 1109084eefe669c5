// models/text/spm.h — SentencePiece-style BPE over scored tokens, as llama.cpp runs it for GGUF
// files with tokenizer.ggml.model "llama" (Llama 2, TinyLlama, Mistral 7B, Gemma, Phi-3).
//
// encode(text) gives the ids llama.cpp's llm_tokenizer_spm gives (without BOS/EOS: GgufTokenizer
// adds those), which are SentencePiece's own for text without special tokens:
//   1. tokens typed control, user-defined or unknown written in the text ("<start_of_turn>",
//      "<unk>") stay whole, the longest one first where several start at the same byte; the text
//      between them goes through steps 2–4 on its own (llama.cpp's tokenizer_st_partition);
//   2. each such stretch gets a leading space when add_space_prefix (SentencePiece's
//      add_dummy_prefix: Llama 2 yes, Gemma no) — after a special token too, as llama.cpp and
//      SentencePiece, run stretch by stretch, do — and every space becomes U+2581 "▁";
//   3. the symbols are its UTF-8 characters; the adjacent pair whose concatenation is a token of
//   the
//      highest score is merged, the leftmost of equal ones, until no pair makes a token;
//   4. a symbol that is a token is that token; one that is not (a character never seen in training,
//      "\n" in Llama 2) is its bytes as the byte tokens <0x0A> (byte fallback: tokens typed byte)
//      or, where the vocabulary lacks one of them, the unknown token.
// Only normal tokens are made by merging or stand for a symbol (llama.cpp takes any token; real
// vocabularies spell no control, byte or unused token from characters, and a user-defined one is
// cut out of the text in step 1 — made from a "▁" that was a space, it would decode as "▁").
// Decoding is then lossless, which the fuzz target tests/fuzz/spm_fuzz.cpp holds it to.
// transformers' tokenizer from the same GGUF differs on the Llama kind in two places (see
// tests/golden/make_spm_goldens.py): no "▁" added to text that already starts with a space, nor
// after a special token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "models/text/bpe.h"  // TokenType, BpeTokenizer::Unspelled

namespace qkv {

class GgufFile;

class SpmTokenizer {
 public:
  using Unspelled = BpeTokenizer::Unspelled;

  // tokens[id] as the vocabulary spells them ("▁the", "<0x0A>", "<s>"), one score per token (the
  // merge priority: higher first), one TokenType per token (none: all normal). The unknown token
  // is the id written for a character without token or byte tokens (-1: none). A qkv::Error when
  // the sizes disagree, a token is not UTF-8, a score is not finite, or unknown_id is not a token.
  // A token listed twice keeps its first id.
  static SpmTokenizer from_vocab(std::vector<std::string> tokens, std::vector<float> scores,
                                 std::vector<int32_t> token_types, bool add_space_prefix,
                                 int32_t unknown_id = -1);

  // From a GGUF's metadata: tokenizer.ggml.tokens, .scores (required: without them the merges are
  // not the model's), .token_type (optional), .add_space_prefix (optional, true as llama.cpp
  // defaults it), .unknown_token_id (optional, 0 as llama.cpp defaults it). tokenizer.ggml.model
  // must be "llama".
  static SpmTokenizer from_gguf(const GgufFile& file);

  // The ids of a text (steps 1–4). Text that is not valid UTF-8 is a qkv::Error naming the first
  // bad byte. A character with neither a token nor all of its byte tokens is the unknown token
  // (drop; left out when there is none) or a qkv::Error naming it (refuse).
  std::vector<int32_t> encode(std::string_view text, Unspelled unspelled = Unspelled::drop) const;
  // The bytes the ids stand for, concatenated, less the space step 2 added: one leading space is
  // dropped at the start and after each special token when add_space_prefix, so decode(encode(t))
  // == t for text without special tokens or "▁" (which reads as a space). An id out of range is a
  // qkv::Error.
  std::string decode(const std::vector<int32_t>& ids) const;
  // The bytes one token stands for: "▁the" → " the", "<0x0A>" (a byte token) → "\n", "<s>" →
  // itself.
  std::string token_text(int32_t id) const;
  // The token as the vocabulary spells it ("▁the").
  const std::string& token(int32_t id) const;
  float score(int32_t id) const;

  std::size_t size() const { return tokens_.size(); }
  int32_t id_of(std::string_view token) const;  // -1 if absent
  TokenType type(int32_t id) const;
  bool add_space_prefix() const { return add_space_prefix_; }
  int32_t unknown_id() const { return unknown_id_; }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  // Steps 2–4 on text without special tokens, appending its ids.
  void encode_plain(std::string_view text, Unspelled unspelled, std::vector<int32_t>& out) const;
  // Step 4 for one symbol that is not a token.
  void spell_bytes(std::string_view symbol, Unspelled unspelled, std::vector<int32_t>& out) const;
  // The token a merge or a symbol may become (step 3's rule): a normal one; else -1.
  int32_t mergeable(std::string_view text) const;
  bool is_special(int32_t id) const;

  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  std::vector<int32_t> types_;
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ids_;
  int32_t byte_ids_[256];          // the id of <0xXX>, or -1
  std::vector<int32_t> specials_;  // control, user-defined and unknown, longest first
  bool special_first_[256] = {};   // the first bytes of the specials
  bool add_space_prefix_ = true;
  int32_t unknown_id_ = -1;
};

}  // namespace qkv
