// explain/image/svg.h — images of a captured run, written by qkv itself (no browser): one head's
// weights as a labelled heatmap, or the model grid of every layer × head.
#pragma once

#include <string>

#include "explain/explained.h"

namespace qkv::explain {

// The weights of `layer`, `head`: queries down, keys across, token labels on both sides.
std::string svg_heatmap(const Explained& e, int64_t layer, int64_t head);
// Every layer (rows) × head (columns) as small heatmaps.
std::string svg_model_grid(const Explained& e);

}  // namespace qkv::explain
