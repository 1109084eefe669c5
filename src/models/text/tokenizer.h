// models/text/tokenizer.h — BERT's WordPiece tokenizer, as Hugging Face's slow BertTokenizer runs
// it for all-MiniLM-L6-v2 (do_lower_case, tokenize_chinese_chars, accents stripped).
//
// encode(text) gives the ids BertTokenizer(text, truncation=True, max_length=n) gives:
//   1. special tokens written in the text ("[MASK]", "[SEP]", ...) stay whole, as HF's added-token
//      trie keeps them; the text between them goes through steps 2–5 on its own;
//   2. clean_text drops NUL, U+FFFD and control characters and turns whitespace into spaces;
//      tokenize_chinese_chars puts spaces around CJK ideographs; the text splits on whitespace;
//   3. each word is lowercased as Python's str.lower() does it (full mappings, İ → i̇, and a Σ at
//      the end of a word → ς), then run_strip_accents: NFD, and the Mn marks dropped;
//   4. run_split_on_punc: every punctuation character becomes a word of its own;
//   5. wordpiece: greedy longest-match-first, "##" before every piece but the first; a word
//      longer than 100 characters, or one with no match, is [UNK];
//   6. [CLS] pieces… [SEP], the pieces cut so that at most max_length tokens remain.
// BasicTokenizer normalizes the text to NFC before step 3; folding code point by code point gives
// the same words, which scripts/make_unicode_tables.py checks when it writes the tables.
//
// encode_pair(a, b) gives BertTokenizer(a, b, truncation=True, max_length=n): [CLS] A [SEP] B [SEP]
// with token_type_ids 0 for [CLS] A [SEP] and 1 for B [SEP]; when the pieces do not fit,
// 'longest_first' drops the last piece of the longer text, one at a time (B's on a tie).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "qkv/files.h"
#include "qkv/model.h"

namespace qkv {

// A vocab.txt: BERT's holds 30,522 tokens in 230 KB, multilingual ones 250,000 in a few MB.
inline constexpr InputSpec kVocabInput{
    .expected = "a regular text file", .max_bytes = uint64_t{64} << 20, .noun = "the vocabulary"};

class WordPieceTokenizer {
 public:
  // One token a line (\n, \r\n or \r), id = line number from 0, as transformers' load_vocab.
  // A qkv::Error naming the file when it cannot be read or lacks a special token; a path that is
  // not a regular file, or one larger than kVocabInput allows, is refused before it is read.
  static WordPieceTokenizer from_vocab_file(const std::string& path);
  // id = index. [CLS], [SEP], [PAD] and [UNK] must be present ([MASK] may be); a token listed twice
  // maps to its last index, as in transformers.
  explicit WordPieceTokenizer(std::vector<std::string> vocab);

  // [CLS] pieces... [SEP], at most max_length tokens (≥ 2) in all. Text that is not valid UTF-8 is
  // a qkv::Error naming the first bad byte and its offset.
  Encoding encode(std::string_view text, std::size_t max_length = 256) const;
  // [CLS] A [SEP] B [SEP], at most max_length tokens (≥ 3) in all, cut 'longest_first' (above).
  Encoding encode_pair(std::string_view a, std::string_view b, std::size_t max_length = 256) const;
  // The words WordPiece receives: after steps 1–4 above (special tokens stay whole).
  std::vector<std::string> basic_tokenize(std::string_view text) const;

  int32_t id(std::string_view token) const;  // -1 if absent
  const std::string& token(int32_t id) const;
  std::size_t size() const { return vocab_.size(); }
  int32_t cls_id() const { return cls_id_; }
  int32_t sep_id() const { return sep_id_; }
  int32_t pad_id() const { return pad_id_; }
  int32_t unk_id() const { return unk_id_; }

  static constexpr std::size_t kMaxCharsPerWord = 100;

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Map = std::unordered_map<std::string, int32_t, Hash, std::equal_to<>>;
  struct Sink;

  int32_t lookup(const Map& map, std::string_view key) const;
  // Steps 1–5 over the whole text, handing each word or piece to `sink`.
  void run(std::string_view text, Sink& sink) const;
  // Steps 1–5: the first `limit` pieces of the text, all of segment `segment`; `cut` when more
  // were left.
  std::vector<Token> pieces(std::string_view text, std::size_t limit, int segment, bool& cut) const;

  std::vector<std::string> vocab_;
  Map ids_;                        // every token
  Map continuation_;               // "##x" tokens, keyed by x
  std::vector<int32_t> specials_;  // the special tokens a text may contain, matched verbatim
  std::size_t longest_ = 0, longest_continuation_ = 0;  // in bytes: no longer key can match
  int32_t cls_id_ = -1, sep_id_ = -1, pad_id_ = -1, unk_id_ = -1;
};

}  // namespace qkv
