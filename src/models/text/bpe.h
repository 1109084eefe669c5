// models/text/bpe.h — byte-level BPE with ranked merges, as Hugging Face's tokenizers runs it for
// the GGUF vocabularies of tokenizer.ggml.model "gpt2": SmolLM2 ("smollm"), Llama 3.x
// ("llama-bpe"), Qwen 2/2.5/3 ("qwen2"), GPT-2 ("gpt-2") — tokenizer.ggml.pre names the
// pre-tokenizer (pre_tokenizers.h).
//
// encode(text) gives the ids tokenizer(text, add_special_tokens=False)["input_ids"] gives:
//   1. control and user-defined tokens written in the text ("<|im_start|>", "<|endoftext|>", ...)
//      stay whole, the longest one first where several start at the same byte, as HF's added
//      tokens do; the text between them goes through steps 2–4 on its own;
//   2. (qwen2) the text is put in Unicode NFC, as the NFC normalizer of Qwen's tokenizer.json;
//   3. the pre-tokenizer cuts it into pieces (smollm: every \p{N} alone, then GPT-2's regex;
//      llama3: Llama 3's regex; ...: pre_tokenizers.h);
//   4. each piece's bytes become the symbols of GPT-2's byte alphabet (printable bytes stand for
//      themselves, the others for U+0100 onwards: a space is Ġ, a newline Ċ) — a byte whose symbol
//      the vocabulary lacks is dropped, as HF does (SmolLM2 lacks 21, e.g. 0x04), or refused
//      (Unspelled) — and, unless the pre-tokenizer ignores merges (llama3) and the spelled piece
//      is a token, the adjacent pair of lowest merge rank is merged, the leftmost of equal ones,
//      until no merge applies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "models/text/pre_tokenizers.h"

namespace qkv {

class GgufFile;

// tokenizer.ggml.token_type, as llama.cpp numbers them.
enum class TokenType : int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,       // <|im_start|>, <|endoftext|>: matched whole in a text
  user_defined = 4,  // matched whole in a text too
  unused = 5,
  byte = 6,
};

class BpeTokenizer {
 public:
  // tokens[id] spelled in the byte alphabet (as tokenizer.ggml.tokens), merges "left right" in
  // rank order (tokenizer.ggml.merges), one type per token (TokenType; none: all normal). A
  // qkv::Error when the sizes disagree, a token is not UTF-8, or a merge is malformed or names a
  // token not in the vocabulary (its parts or their concatenation). A token listed twice keeps its
  // first id, a merge listed twice its first rank. `pre`: the pre-tokenizer (steps 2–3).
  static BpeTokenizer from_vocab(std::vector<std::string> tokens,
                                 const std::vector<std::string>& merges,
                                 std::vector<int32_t> token_types,
                                 PreTokenizer pre = PreTokenizer::smollm);

  // From a GGUF's metadata: tokenizer.ggml.tokens, .merges and .token_type (optional). Only the
  // pre-tokenizers written here are accepted: tokenizer.ggml.model "gpt2" with a tokenizer.ggml.pre
  // of pre_tokenizers.h; another (or none) is a qkv::Error naming it and listing those, not ids
  // that would silently differ. The merges
  // must be there (without them every text falls apart into single bytes), and every special
  // token id the file states (tokenizer.ggml.*_token_id: end of text, padding, ...) must be a
  // token of the vocabulary. The tokens and merges must be arrays of strings, the token types an
  // array of llama.cpp's types (0 to 6); a value of another type is named with its key.
  static BpeTokenizer from_gguf(const GgufFile& file);

  // What encode does with a byte whose symbol the vocabulary lacks (step 4).
  enum class Unspelled {
    drop,  // leaves it out, as Hugging Face's tokenizers and llama.cpp do
    // A qkv::Error naming the character and its bytes: nothing is lost unsaid. ASCII control
    // characters (0x00–0x1F, 0x7F) are still left out: real vocabularies lack some of them
    // (SmolLM2 lacks 21, \x04 among them) and Hugging Face's ids, the goldens, leave them out.
    refuse,
  };
  // The ids of a text (steps 1–4 above). Text that is not valid UTF-8 is a qkv::Error naming the
  // first bad byte.
  std::vector<int32_t> encode(std::string_view text, Unspelled unspelled = Unspelled::drop) const;
  // The bytes the ids stand for, concatenated; decode(encode(t)) == t for any text without the
  // bytes that encode drops (step 4). Ids that cut a character
  // in two give bytes that are not UTF-8 (HF's decode writes U+FFFD there). An id out of range is
  // a qkv::Error.
  std::string decode(const std::vector<int32_t>& ids) const;
  // The bytes one token stands for: "Ġthe" → " the", "<|im_end|>" → itself.
  std::string token_text(int32_t id) const;
  // The token as the vocabulary spells it ("Ġthe").
  const std::string& token(int32_t id) const;

  std::size_t size() const { return tokens_.size(); }
  int32_t id_of(std::string_view token) const;  // -1 if absent
  TokenType type(int32_t id) const;

  // Steps 2–3 alone, on text without special tokens: the pieces BPE receives, as raw bytes.
  // Text that is not valid UTF-8 is a qkv::Error.
  std::vector<std::string> pre_tokenize(std::string_view text) const;
  PreTokenizer pre_tokenizer() const { return pre_; }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Merge {
    int32_t rank;
    int32_t id;  // the merged token
  };

  // Step 4 on one piece, appending its ids.
  void bpe(std::string_view piece, Unspelled unspelled, std::vector<int32_t>& out) const;
  // Steps 2–4 on text without special tokens.
  void encode_plain(std::string_view text, Unspelled unspelled, std::vector<int32_t>& out) const;

  PreTokenizer pre_ = PreTokenizer::smollm;
  std::vector<std::string> tokens_;
  std::vector<int32_t> types_;
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ids_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) → merge
  int32_t byte_ids_[256];                       // the id of each byte's symbol, or -1
  std::vector<int32_t> specials_;               // control and user-defined, longest first
  bool special_first_[256] = {};                // the first bytes of the specials
};

}  // namespace qkv
