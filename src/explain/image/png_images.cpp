#include "explain/image/png_images.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "explain/image/png.h"
#include "explain/image/raster.h"
#include "qkv/tensor.h"

namespace qkv::explain {
namespace {

constexpr Rgb kFrame{204, 204, 204};
constexpr Rgb kNan{128, 128, 128};
constexpr int64_t kTitleTop = 8, kLabelGap = 4;

// White (0) to orange #cc6600 (1), the report's accent colour; the same bytes as svg.cpp's fill().
Rgb ramp(double w) {
  if (std::isnan(w)) return kNan;
  const double a = w < 0 ? 0 : w > 1 ? 1 : w;
  return {static_cast<uint8_t>(255 - a * (255 - 204)), static_cast<uint8_t>(255 - a * (255 - 102)),
          static_cast<uint8_t>(255 - a * 255)};
}

void frame(Image& image, int64_t x, int64_t y, int64_t w, int64_t h) {
  image.fill_rect(x - 1, y - 1, w + 2, 1, kFrame);
  image.fill_rect(x - 1, y + h, w + 2, 1, kFrame);
  image.fill_rect(x - 1, y, 1, h, kFrame);
  image.fill_rect(x + w, y, 1, h, kFrame);
}

// The capture must hold weights [1, heads, n, n] for every layer: Run::weight reads them
// flat, so a mismatch would read out of bounds instead of failing.
void check_capture(const Run& e, const char* where) {
  const int64_t n = e.size();
  if (static_cast<int64_t>(e.blocks.front().layers.size()) < e.model.layers)
    throw Error(std::string(where) + ": the capture holds " +
                std::to_string(e.blocks.front().layers.size()) + " layers but the model has " +
                std::to_string(e.model.layers));
  for (int64_t l = 0; l < e.model.layers; ++l) {
    const Tensor& w = e.blocks.front().layers[static_cast<std::size_t>(l)].weights;
    if (!w.defined() || w.numel() != e.model.heads * n * n)
      throw Error(std::string(where) + ": layer " + std::to_string(l) + " weights hold " +
                  std::to_string(w.defined() ? w.numel() : 0) + " values; expected [1, " +
                  std::to_string(e.model.heads) + ", " + std::to_string(n) + ", " +
                  std::to_string(n) + "]");
  }
}

}  // namespace

HeatmapLayout heatmap_layout(int64_t n) {
  HeatmapLayout layout;
  layout.cell = n <= 32 ? 22 : n <= 96 ? 8 : 3;
  layout.x0 = 100;
  layout.y0 = 24 + 100;  // the title bar, then the column labels
  layout.width = std::max<int64_t>(layout.x0 + n * layout.cell + 10, 400);
  layout.height = layout.y0 + n * layout.cell + 10;
  return layout;
}

GridLayout grid_layout(int64_t layers, int64_t heads) {
  GridLayout layout{.left = 60, .top = 40, .thumb = 60, .gap = 6};
  layout.width = std::max<int64_t>(layout.left + heads * (layout.thumb + layout.gap), 220);
  layout.height = layout.top + layers * (layout.thumb + layout.gap);
  return layout;
}

std::string png_heatmap(const Run& e, int64_t layer, int64_t head) {
  if (layer < 0 || layer >= e.model.layers || head < 0 || head >= e.model.heads)
    throw Error("png_heatmap: layer " + std::to_string(layer) + ", head " + std::to_string(head) +
                " but the model has layers 0.." + std::to_string(e.model.layers - 1) +
                " and heads 0.." + std::to_string(e.model.heads - 1));
  check_capture(e, "png_heatmap");
  const int64_t n = e.size();
  const HeatmapLayout at = heatmap_layout(n);
  Image image(at.width, at.height);
  draw_text(image, 4, kTitleTop,
            "layer " + std::to_string(layer) + ", head " + std::to_string(head) +
                ": attention weights (row: query, column: key)");
  if (at.cell >= 8) {
    const int64_t room = at.x0 - 2 * kLabelGap, centre = (at.cell - kCapHeight) / 2;
    for (int64_t i = 0; i < n; ++i) {
      const std::string label = fit_text(e.tokens[static_cast<std::size_t>(i)].text, room);
      draw_text(image, at.x0 - kLabelGap - text_length(label), at.y0 + i * at.cell + centre, label);
      draw_text(image, at.x0 + i * at.cell + centre, at.y0 - kLabelGap, label, {.rotated = true});
    }
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      image.fill_rect(at.x0 + j * at.cell, at.y0 + i * at.cell, at.cell, at.cell,
                      ramp(e.weight(layer, head, i, j)));
  if (n > 0) frame(image, at.x0, at.y0, n * at.cell, n * at.cell);
  return encode_png(image);
}

std::string png_model_grid(const Run& e) {
  check_capture(e, "png_model_grid");
  const int64_t n = e.size();
  const GridLayout at = grid_layout(e.model.layers, e.model.heads);
  Image image(at.width, at.height);
  draw_text(image, 4, kTitleTop, "every layer (rows) x head (columns)");
  for (int64_t h = 0; h < e.model.heads; ++h) {
    // Appended, not "h" + to_string(h): GCC 12 warns falsely there (-Wrestrict).
    std::string label = "h";
    label += std::to_string(h);
    draw_text(image, at.x(h) + (at.thumb - text_length(label)) / 2, at.top - 6 - kCapHeight, label);
  }
  // The token span thumbnail pixel p covers (see GridLayout).
  const auto span = [&](int64_t p) {
    const int64_t lo = p * n / at.thumb;
    return std::pair{lo, std::max(lo + 1, (p + 1) * n / at.thumb)};
  };
  for (int64_t l = 0; l < e.model.layers; ++l) {
    std::string label = "layer ";
    label += std::to_string(l);
    draw_text(image, 4, at.y(l) + (at.thumb - kCapHeight) / 2, label);
    for (int64_t h = 0; h < e.model.heads; ++h) {
      frame(image, at.x(h), at.y(l), at.thumb, at.thumb);
      if (n == 0) continue;
      for (int64_t q = 0; q < at.thumb; ++q)
        for (int64_t p = 0; p < at.thumb; ++p) {
          const auto [i_lo, i_hi] = span(q);
          const auto [j_lo, j_hi] = span(p);
          double w = e.weight(l, h, i_lo, j_lo);
          for (int64_t i = i_lo; i < i_hi; ++i)
            for (int64_t j = j_lo; j < j_hi; ++j) {
              const double x = e.weight(l, h, i, j);
              if (std::isnan(x) || x > w) w = x;  // a NaN anywhere in the block shows
            }
          image.set(at.x(h) + p, at.y(l) + q, ramp(w));
        }
    }
  }
  return encode_png(image);
}

}  // namespace qkv::explain
