// explain/terminal/terminal.h — a captured model run, drawn for an 80-column terminal: the tokens,
// where the focus token looks in every layer and head, and one head zoomed in (weights heatmap plus
// the focus token's query, scores, softmax and output, number by number).
#pragma once

#include <string>

#include "explain/explained.h"

namespace qkv::explain {

struct Style {
  bool color = false;  // ANSI colours (heatmap backgrounds, highlights); off for pipes
  int top = 3;         // keys shown per head in the overview
};

// The text, its tokens with their indices, and what the focus token's attention computes.
std::string render_tokens(const Explained& e, int64_t focus, const Style& style);
// Per layer and head, the focus token's top keys with weight bars; then the heads whose top key
// is another word, grouped by that word.
std::string render_overview(const Explained& e, int64_t focus, const Style& style);
// One head: the weights matrix as a heatmap, then the focus token step by step.
std::string render_head(const Explained& e, int64_t layer, int64_t head, int64_t focus,
                        const Style& style);

}  // namespace qkv::explain
