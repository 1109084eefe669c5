// qkv/perceiver_report.h — what a Perceiver's latents gather: the numbers both views show, and
// the offline HTML page.
#pragma once

#include <string>
#include <vector>

#include "qkv/perceiver.h"

namespace qkv::explain {

// One latent's row, formatted once for the terminal's table and the page's alike, so that the two
// show the same numbers to the same digits.
struct LatentRow {
  std::string label;                  // "latent 3"
  double bar = 0;                     // its weight on the counted symbol ÷ the largest latent's
  std::string counted;                // the heads' mean weight on the counted symbol, "0.031"
  std::string times_uniform;          // that ÷ the uniform look's, "10.7×"; "—" without a count
  std::vector<std::string> per_head;  // each head's weight on it, "0.02"
  std::string spread;                 // exp(entropy) of the heads' mean weights, "1,021"
  std::vector<std::string> top;       // the positions it weighs most, "#@27"
};

struct LatentTable {
  std::string probability;     // of the prediction, "0.999"
  std::string uniform_share;   // what a uniform look puts on the counted symbol, "0.0029"
  std::string uniform_weight;  // what it puts on one position (1 / length), "0.00098"
  std::vector<LatentRow> rows;
};

LatentTable latent_table(const PerceiverExplanation& e);

// A self-contained page (no network): the input, the prediction, a latents × positions heatmap
// of the cross-attention weights (the heads' mean, or one head) with a label a latent, the counted
// symbol's positions marked above it, and latent_table's rows.
std::string perceiver_html(const PerceiverExplanation& e, const std::string& title);
// What perceiver_html holds while it builds the page for a model of `config` (qkv/memory.h):
// every weight of [heads, latents, length] as a JSON number in the tree, its text and the page
// (measured: ~100 bytes a weight), beside the explanation it reads (perceiver_explain_bytes).
int64_t perceiver_html_bytes(const PerceiverConfig& config);

}  // namespace qkv::explain
