// Text on an image (explain/image/raster.h): the built-in font's glyphs, where draw_text puts each
// font pixel upright, rotated and scaled, and how labels are measured and cut.
#include "explain/image/raster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "qkv/tensor.h"

namespace qkv::explain {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

bool ink(const Glyph& g, int column, int row) {
  return (g[static_cast<std::size_t>(row)] >> (kGlyphWidth - 1 - column)) & 1;
}

int64_t ink_count(const Image& image) {
  int64_t count = 0;
  for (int64_t y = 0; y < image.height; ++y)
    for (int64_t x = 0; x < image.width; ++x) count += image.pixel(x, y) == kBlack;
  return count;
}

TEST(RasterFont, PrintableGlyphsAreDistinctAndFitTheirCell) {
  std::set<Glyph> seen = {replacement_glyph()};
  std::string descenders;
  for (int c = 33; c <= 126; ++c) {
    const Glyph& g = glyph(static_cast<unsigned char>(c));
    EXPECT_TRUE(seen.insert(g).second) << "glyph '" << static_cast<char>(c) << "' repeats another";
    for (const uint8_t row : g) EXPECT_EQ(row >> kGlyphWidth, 0) << "'" << static_cast<char>(c);
    if (g[kGlyphHeight - 1]) descenders += static_cast<char>(c);
  }
  EXPECT_EQ(seen.size(), 95u);
  EXPECT_EQ(glyph(' '), Glyph{});
  EXPECT_EQ(descenders, ",_gjpqy");  // row 7 is for descenders only
  for (const int c : {0, 9, 31, 127, 128, 200, 255})
    EXPECT_EQ(glyph(static_cast<unsigned char>(c)), replacement_glyph()) << "byte " << c;
}

TEST(RasterText, UprightPutsEachFontPixelAtItsAdvance) {
  const std::string text = "Hq{1";
  Image image(40, 12);
  draw_text(image, 3, 2, text);
  for (int64_t y = 0; y < image.height; ++y)
    for (int64_t x = 0; x < image.width; ++x) {
      const int64_t u = x - 3, v = y - 2, k = u / kGlyphAdvance, column = u % kGlyphAdvance;
      const bool expected =
          u >= 0 && v >= 0 && v < kGlyphHeight && k < 4 && column < kGlyphWidth &&
          ink(glyph(static_cast<unsigned char>(text[static_cast<std::size_t>(k)])),
              static_cast<int>(column), static_cast<int>(v));
      EXPECT_EQ(image.pixel(x, y) == kBlack, expected) << "pixel (" << x << ", " << y << ")";
    }
}

TEST(RasterText, RotatedIsAQuarterTurnCounterClockwise) {
  const std::string text = "Lg?";
  const int64_t length = text_length(text);
  Image upright(length, kGlyphHeight), rotated(20, 30);
  draw_text(upright, 0, 0, text);
  draw_text(rotated, 5, 25, text, {.rotated = true});
  // Font pixel (u, v) lands on (x + v, y − 1 − u); nothing lands outside that box.
  for (int64_t u = 0; u < length; ++u)
    for (int64_t v = 0; v < kGlyphHeight; ++v)
      EXPECT_EQ(rotated.pixel(5 + v, 25 - 1 - u), upright.pixel(u, v)) << u << ", " << v;
  EXPECT_EQ(ink_count(rotated), ink_count(upright));
  EXPECT_GT(ink_count(upright), 20);
}

TEST(RasterText, ScaleEnlargesEveryFontPixelIntoASquare) {
  const std::string text = "Aj";
  Image small(text_length(text), kGlyphHeight), big(3 * text_length(text), 3 * kGlyphHeight);
  const Rgb blue{0, 0, 255};
  draw_text(small, 0, 0, text, {.colour = blue});
  draw_text(big, 0, 0, text, {.colour = blue, .scale = 3});
  EXPECT_EQ(text_length(text, 3), 3 * text_length(text));
  for (int64_t y = 0; y < big.height; ++y)
    for (int64_t x = 0; x < big.width; ++x)
      EXPECT_EQ(big.pixel(x, y), small.pixel(x / 3, y / 3)) << x << ", " << y;
  EXPECT_THAT([&] { draw_text(big, 0, 0, text, {.scale = 0}); },
              ThrowsMessage<Error>(HasSubstr("scale 0")));
}

TEST(RasterText, AUtf8CharacterIsOneReplacementBox) {
  EXPECT_EQ(glyph_count("caf\xC3\xA9"), 4);  // é: 2 bytes
  EXPECT_EQ(glyph_count("\xE2\x82\xAC"
                        "1"),
            2);                                   // €: 3 bytes
  EXPECT_EQ(glyph_count("\xF0\x9F\x98\x80"), 1);  // an emoji: 4 bytes
  EXPECT_EQ(glyph_count("\x80\x80"), 2);          // stray continuation bytes
  EXPECT_EQ(text_length("\xC3\xA9x"), 2 * kGlyphAdvance);
  Image box(kGlyphAdvance, kGlyphHeight), e_acute(kGlyphAdvance, kGlyphHeight);
  draw_text(box, 0, 0, "\x7F");
  draw_text(e_acute, 0, 0, "\xC3\xA9");
  EXPECT_EQ(e_acute.rgb, box.rgb);
  for (int v = 0; v < kGlyphHeight; ++v)
    for (int column = 0; column < kGlyphWidth; ++column)
      EXPECT_EQ(box.pixel(column, v) == kBlack, ink(replacement_glyph(), column, v));
}

TEST(RasterText, FitTextCutsWholeGlyphsAndMarksTheCut) {
  EXPECT_EQ(fit_text("international", 36), "inter~");  // 6 glyphs of 6 px
  EXPECT_EQ(fit_text("animal", 36), "animal");
  EXPECT_EQ(fit_text("animals", 36), "anima~");
  EXPECT_EQ(fit_text("\xC3\xA9\xC3\xA9\xC3\xA9", 12), "\xC3\xA9~");  // never inside a sequence
  EXPECT_EQ(fit_text("animal", 5), "");
  EXPECT_EQ(fit_text("animal", 72, 2), "animal");
  EXPECT_EQ(fit_text("animal", 71, 2), "anim~");
}

TEST(RasterText, ClipsAtTheImageEdges) {
  Image image(10, 6);
  draw_text(image, -4, -3, "WWWW");
  draw_text(image, 8, 20, "W", {.scale = 2, .rotated = true});  // entirely below: nothing drawn
  Image whole(text_length("WWWW"), kGlyphHeight);
  draw_text(whole, 0, 0, "WWWW");
  for (int64_t y = 0; y < image.height; ++y)
    for (int64_t x = 0; x < image.width; ++x) {
      const bool inside = x + 4 < whole.width && y + 3 < whole.height;
      EXPECT_EQ(image.pixel(x, y), inside ? whole.pixel(x + 4, y + 3) : kWhite) << x << ", " << y;
    }
}

}  // namespace
}  // namespace qkv::explain
