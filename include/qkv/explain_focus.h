// qkv/explain_focus.h — the focus of a captured run (qkv/explain_run.h): which query token a view
// starts from, and which heads it suggests looking at first.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qkv/explain_run.h"

namespace qkv::explain {

// ---- the focus: which query token a view starts from ----
// The default focus: the first pronoun ("it", "he", "she", "they", ...; of A, then of B), else the
// last word.
int64_t default_focus(const Run& run);
// A token by its text ("it", "##ing"; case-insensitive, the first match; "it:2" the second), or by
// its 0-based index ("7"). Empty when nothing matches.
std::optional<int64_t> find_token(const Run& run, std::string_view spec);
// find_token of `spec`, else default_focus; a qkv::Error for a spec that names no token: "'x' is
// not a token of the text; expected one of: the cat … (or an index 0-7)".
int64_t focus(const Run& run, const std::optional<std::string>& spec);

// Whether key j is another word for query i: not a piece of i's word, not special, not punctuation,
// and not a decoder's first token (its attention sink).
bool is_other_word(const Run& run, int64_t i, int64_t j);

// What one head's query at the focus token picks.
struct HeadPick {
  int64_t layer = 0, head = 0;
  std::vector<int64_t> top;  // key indices, largest weight first
  bool other_word = false;   // the top key is another word
};
std::vector<HeadPick> picks(const Run& run, int64_t focus, int top_k);
// The head to look at first: of those whose top key is another word, the deepest (later layers
// carry more of the sentence's meaning), the strongest within its layer; else the first.
HeadPick suggested_head(const Run& run, int64_t focus, const std::vector<HeadPick>& all);

}  // namespace qkv::explain
