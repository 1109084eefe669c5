// qkv/perceiver_report.h — what a Perceiver's latents gather, as one offline HTML page.
#pragma once

#include <string>

#include "qkv/perceiver.h"

namespace qkv::explain {

// A self-contained page (no network): the input, the prediction, a latents × positions heatmap
// of the cross-attention weights (the heads' mean, or one head), the counted symbol's positions
// marked above it, and each latent's share of weight on the counted symbol.
std::string perceiver_html(const PerceiverExplanation& e, const std::string& title);
// What perceiver_html holds while it builds the page for a model of `config` (qkv/memory.h):
// every weight of [heads, latents, length] as a JSON number in the tree, its text and the page
// (measured: ~100 bytes a weight), beside the explanation it reads (perceiver_explain_bytes).
int64_t perceiver_html_bytes(const PerceiverConfig& config);

}  // namespace qkv::explain
