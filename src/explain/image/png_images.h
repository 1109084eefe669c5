// explain/image/png_images.h — the PNG twins of explain/image/svg.h, drawn pixel by pixel by qkv
// itself: one head's weights as a labelled heatmap, or the model grid of every layer × head.
// Colours are those of the SVG: white at weight 0 to #cc6600 at weight 1 (a NaN weight is grey
// #808080).
#pragma once

#include <cstdint>
#include <string>

#include "qkv/explain.h"

namespace qkv::explain {

// Where png_heatmap draws, for n tokens, in pixels from the top-left corner:
//   - the title "layer L, head H: attention weights (row: query, column: key)" in the top 24 rows;
//   - cell (i, j), query i and key j, fills [x0 + j·cell, x0 + (j+1)·cell) × [y0 + i·cell, ...),
//     with x0 = 100, y0 = 124 and cell = 22 (n ≤ 32), 8 (n ≤ 96) or 3, as svg_heatmap;
//   - a grey (#cccccc) frame one pixel outside the n·cell square; text in black on white;
//   - when cell ≥ 8, token labels (cut with '~' to 15 characters): each row's right-aligned and
//     ending at x0 − 4, each column's rotated, reading upward from y0 − 4;
//   - width = max(x0 + n·cell + 10, 400) (room for the title), height = y0 + n·cell + 10.
struct HeatmapLayout {
  int64_t x0 = 0, y0 = 0, cell = 0, width = 0, height = 0;
};
HeatmapLayout heatmap_layout(int64_t n);

// Where png_model_grid draws: the title "every layer (rows) x head (columns)" in the top rows,
// "h<H>" above each column, "layer <L>" left of each row, and the thumb × thumb heatmap of layer l,
// head h with its top-left corner at (x(h), y(l)), a grey (#cccccc) frame one pixel outside it.
// thumb = 60, gap = 6, left = 60, top = 40 (as svg_model_grid);
// width = max(left + heads·(thumb + gap), 220), height = top + layers·(thumb + gap).
// Thumbnail pixel (p, q) (p across, q down, 0 ≤ p, q < thumb) shows the largest weight of queries
// [⌊q·n/thumb⌋, max(⌊q·n/thumb⌋ + 1, ⌊(q+1)·n/thumb⌋)) over keys likewise from p: for n ≤ thumb
// that is exactly the weight of query ⌊q·n/thumb⌋ over key ⌊p·n/thumb⌋; for longer texts a
// sharp peak is kept, not averaged away.
struct GridLayout {
  int64_t left = 0, top = 0, thumb = 0, gap = 0, width = 0, height = 0;
  int64_t x(int64_t head) const { return left + head * (thumb + gap); }
  int64_t y(int64_t layer) const { return top + layer * (thumb + gap); }
};
GridLayout grid_layout(int64_t layers, int64_t heads);

}  // namespace qkv::explain
