// qkv/perceiver_report.h — what a Perceiver's latents gather, as one offline HTML page.
#pragma once

#include <string>

#include "qkv/perceiver.h"

namespace qkv::explain {

// A self-contained page (no network): the input, the prediction, a latents × positions heatmap
// of the cross-attention weights (the heads' mean, or one head), the counted symbol's positions
// marked above it, and each latent's share of weight on the counted symbol.
std::string perceiver_html(const PerceiverExplanation& e, const std::string& title);

}  // namespace qkv::explain
