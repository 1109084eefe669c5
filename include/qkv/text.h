// qkv/text.h — tokens as every model's tokenizer gives them: ids, text and the bytes each came
// from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace qkv {

struct Token {
  int32_t id;
  std::string text;  // as in the vocabulary, e.g. "##ing"
  // [begin, end): the bytes of its own text (A or B of a pair) the token came from. [CLS] has the
  // empty span at 0, each [SEP] the empty span at the end of the text it closes.
  std::size_t begin = 0, end = 0;
  int segment = 0;  // BERT's token type: 0 for [CLS] A [SEP], 1 for B [SEP] of a pair
};

struct Encoding {
  std::vector<Token> tokens;
  bool truncated = false;  // pieces were dropped to fit max_length
  std::vector<int32_t> ids() const;
  std::vector<int32_t> type_ids() const;  // each token's segment
};

}  // namespace qkv
