// explain/explained.h — one text through the model with everything captured, and the questions
// a reader asks of it: which token to focus on, which keys each head's query picks, whether a
// head looks at another word (not the token itself, [CLS], [SEP] or punctuation). A sentence pair
// runs as BERT reads it, [CLS] A [SEP] B [SEP], each token knowing its segment, so a reader can
// split attention into A→A, A→B, B→A and B→B.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/bert/sentence_model.h"

namespace qkv::explain {

struct TokenInfo {
  std::string text;     // as in the vocabulary: "animal", "##ing", "[CLS]"
  std::string surface;  // the bytes of the original text it came from ("" for [CLS]/[SEP])
  int32_t id = 0;
  // Index of the word it belongs to (pieces share one); -1 for specials. The words of B continue
  // the count after A's, so a word index names one word of the whole sequence.
  int64_t word = -1;
  int segment = 0;           // 0: [CLS] A [SEP]; 1: B [SEP] of a pair
  bool special = false;      // [CLS], [SEP], ...
  bool punctuation = false;  // a token of punctuation only
};

struct Explained {
  std::string text;    // A
  std::string text_b;  // B of a pair, else empty
  bool pair = false;
  std::vector<TokenInfo> tokens;
  bool truncated = false;
  int64_t layers = 0, heads = 0, head_dim = 0;
  double scale = 0;  // 1/√head_dim, the scaled-dot default
  BertCapture capture;
  Tensor embedding;  // [1, hidden], the sentence embedding
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  // weights of query token i over the keys in layer l, head h
  double weight(int64_t l, int64_t h, int64_t i, int64_t j) const;
};

// Tokenizes and runs `text` with capture on (attention in float64 through the reference path).
Explained run(const SentenceModel& model, std::string_view text);
// The pair [CLS] text [SEP] text_b [SEP] (token types 0 then 1), cut to the model's max_length
// as BertTokenizer's 'longest_first' does; surfaces point into the token's own text.
Explained run(const SentenceModel& model, std::string_view text, std::string_view text_b);

// The default focus: the first pronoun ("it", "he", "she", "they", ...; of A, then of B), else the
// last word.
int64_t default_focus(const Explained& e);
// A token by its text ("it", "##ing"; case-insensitive, the first match; "it:2" the second), or by
// its 0-based index ("7"). Empty when nothing matches.
std::optional<int64_t> find_token(const Explained& e, std::string_view spec);

// Whether key j is another word for query i: not a piece of i's word, not special, not punctuation.
bool is_other_word(const Explained& e, int64_t i, int64_t j);

// What one head's query at the focus token picks.
struct HeadPick {
  int64_t layer = 0, head = 0;
  std::vector<int64_t> top;  // key indices, largest weight first
  bool other_word = false;   // the top key is another word
};
std::vector<HeadPick> picks(const Explained& e, int64_t focus, int top_k);
// The head to look at first: of those whose top key is another word, the deepest (later layers
// carry more of the sentence's meaning), the strongest within its layer; else the first.
HeadPick suggested_head(const Explained& e, int64_t focus, const std::vector<HeadPick>& all);

}  // namespace qkv::explain
