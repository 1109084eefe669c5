#include <cstdio>
#include <sstream>

#include "explain/markup.h"
#include "qkv/explain.h"
#include "qkv/field_error.h"
#include "qkv/memory.h"

namespace qkv::explain {
namespace {

// One <rect> a weight (about 75 bytes): 300 words on the 72-head grid made a 363 MB file. Refused
// past a million cells; a PNG draws any size in a few hundred KB.
constexpr int64_t kMaxSvgCells = 1'000'000;
void check_svg_cells(const Run& e, bool grid) {
  const int64_t n = e.size(), heads = e.model.layers * e.model.heads;
  const int64_t cells = (grid ? heads : 1) * n * n;
  if (cells <= kMaxSvgCells) return;
  throw FieldError(
      "svg", "{svg}: " + (grid ? "the grid of " + grouped(heads) + " heads" : "the heatmap") +
                 " of " + grouped(n) + " tokens would draw " + grouped(cells) + " cells (about " +
                 bytes_str(cells * 75) + " of SVG), over " + grouped(kMaxSvgCells) +
                 "; expected {png} for this size" +
                 (grid ? ", or {layer=L} {head=H} for one heatmap" : "") + ", or a shorter text");
}

// White (0) to orange (1), the report's accent colour.
std::string fill(double w) {
  const double a = w < 0 ? 0 : w > 1 ? 1 : w;
  char buffer[24];
  std::snprintf(buffer, sizeof buffer, "#%02x%02x%02x", static_cast<int>(255 - a * (255 - 204)),
                static_cast<int>(255 - a * (255 - 102)), static_cast<int>(255 - a * 255));
  return buffer;
}

void cells(std::ostringstream& s, const Run& e, int64_t layer, int64_t head, double x0, double y0,
           double cell) {
  const int64_t n = e.size();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      s << "<rect x=\"" << x0 + j * cell << "\" y=\"" << y0 + i * cell << "\" width=\"" << cell
        << "\" height=\"" << cell << "\" fill=\"" << fill(e.weight(layer, head, i, j)) << "\"/>";
}

}  // namespace

std::string svg_heatmap(const Run& e, int64_t layer, int64_t head) {
  check_svg_cells(e, false);
  const int64_t n = e.size();
  const double cell = n <= 32 ? 22 : n <= 96 ? 8 : 3, pad = 100;
  const double size = pad + n * cell + 10;
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << size << "\" height=\"" << size + 24
    << "\" font-family=\"sans-serif\" font-size=\"11\"><rect width=\"100%\" height=\"100%\" "
       "fill=\"white\"/><text x=\"4\" y=\"16\" font-size=\"13\">layer "
    << layer << ", head " << head << ": attention weights (row: query, column: key)</text>";
  s << "<g transform=\"translate(0,24)\">";
  if (n <= 96)
    for (int64_t i = 0; i < n; ++i) {
      const std::string t = escape_markup(e.tokens[static_cast<std::size_t>(i)].text);
      s << "<text x=\"" << pad - 4 << "\" y=\"" << pad + i * cell + cell * 0.7
        << "\" text-anchor=\"end\">" << t << "</text>";
      s << "<text transform=\"translate(" << pad + i * cell + cell * 0.7 << "," << pad - 4
        << ") rotate(-90)\">" << t << "</text>";
    }
  cells(s, e, layer, head, pad, pad, cell);
  s << "</g></svg>\n";
  return s.str();
}

std::string svg_model_grid(const Run& e) {
  check_svg_cells(e, true);
  const double thumb = 60, gap = 6, left = 60, top = 40;
  const double cell = thumb / static_cast<double>(std::max<int64_t>(e.size(), 1));
  const double width = left + e.model.heads * (thumb + gap),
               height = top + e.model.layers * (thumb + gap);
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" font-family=\"sans-serif\" font-size=\"11\"><rect width=\"100%\" height=\"100%\" "
       "fill=\"white\"/><text x=\"4\" y=\"16\" font-size=\"13\">every layer (rows) × head "
       "(columns)</text>";
  for (int64_t h = 0; h < e.model.heads; ++h)
    s << "<text x=\"" << left + h * (thumb + gap) + thumb / 2 << "\" y=\"" << top - 6
      << "\" text-anchor=\"middle\">h" << h << "</text>";
  for (int64_t l = 0; l < e.model.layers; ++l) {
    s << "<text x=\"4\" y=\"" << top + l * (thumb + gap) + thumb / 2 << "\">layer " << l
      << "</text>";
    for (int64_t h = 0; h < e.model.heads; ++h)
      cells(s, e, l, h, left + h * (thumb + gap), top + l * (thumb + gap), cell);
  }
  s << "</svg>\n";
  return s.str();
}

}  // namespace qkv::explain
