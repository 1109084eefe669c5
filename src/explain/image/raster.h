// explain/image/raster.h — text on an Image, with a 5×8 bitmap font built into qkv (printable
// ASCII; anything else is drawn as a box), optionally rotated a quarter turn for column labels and
// enlarged by an integer factor. Enough for the labels of a heatmap, nothing more: no kerning, no
// anti-aliasing, one byte of colour per channel.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "explain/image/png.h"

namespace qkv::explain {

// A glyph is 8 rows top to bottom, 5 columns each in bits 4 (left) .. 0 (right). Capitals and
// digits fill rows 0..6; row 7 holds only descenders (g, j, p, q, y, the comma, '_').
using Glyph = std::array<uint8_t, 8>;
inline constexpr int kGlyphWidth = 5, kGlyphHeight = 8, kCapHeight = 7;
inline constexpr int kGlyphAdvance = kGlyphWidth + 1;  // a blank column between glyphs

// The glyph of printable ASCII c (32 ' ' .. 126 '~'); any other byte gives replacement_glyph().
const Glyph& glyph(unsigned char c);
// A hollow box: what a control byte or a non-ASCII character (one per UTF-8 sequence) looks like.
const Glyph& replacement_glyph();

struct TextStyle {
  Rgb colour = kBlack;
  int scale = 1;  // each font pixel becomes scale × scale image pixels (scale >= 1)
  bool rotated =
      false;  // a quarter turn counter-clockwise: reads bottom to top, as SVG rotate(-90)
};

// Glyphs drawn for `text`: one per ASCII byte, one per UTF-8 sequence (a lead byte and the
// continuation bytes 10xxxxxx after it), one per stray continuation byte.
int64_t glyph_count(std::string_view text);
// Pixels along the reading direction: glyph_count · kGlyphAdvance · scale (the blank column after
// the last glyph included).
int64_t text_length(std::string_view text, int scale = 1);

// `text` shortened to at most max_length pixels: the glyphs that fit and a final '~' when it had
// to be cut (never inside a UTF-8 sequence); "" when not even one glyph fits.
std::string fit_text(std::string_view text, int64_t max_length, int scale = 1);

// Draws `text`; pixels outside the image are clipped. Upright, (x, y) is the top-left corner and
// the text covers [x, x + text_length) × [y, y + kGlyphHeight·scale). Rotated, (x, y) is the
// bottom-left corner: the text covers [x, x + kGlyphHeight·scale) × [y − text_length, y), the
// first glyph at the bottom and the tops of the letters facing left. Font pixel (u, v) of the
// text (u along it, v down from the top of the glyphs) lands on the scale × scale block at
// (x + u·scale, y + v·scale) upright and at (x + v·scale, y − (u + 1)·scale) rotated.
void draw_text(Image& image, int64_t x, int64_t y, std::string_view text,
               const TextStyle& style = {});

}  // namespace qkv::explain
