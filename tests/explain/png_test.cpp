// PNG files written by qkv itself: the encoder (explain/png.h) read back by an independent,
// test-only reader that verifies every chunk CRC and the zlib Adler-32, and the attention images
// (explain/png_images.h) checked pixel by pixel against the layout their header documents.
#include "explain/png.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "explain/png_images.h"

namespace qkv::explain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// ---- The reader: only what encode_png writes (8-bit RGB, stored deflate blocks, filter 0), and
// every check the specs give a reader. Its checksums are the definitions, computed the slow way,
// so they share no code with the table-driven ones under test.

// CRC-32 a bit at a time: shift each bit out, XOR the reflected polynomial when it was 1.
uint32_t crc32_by_bits(std::string_view bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (const char ch : bytes) {
    c ^= static_cast<uint8_t>(ch);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? 0xEDB88320u : 0);
  }
  return ~c;
}

// Adler-32 with the modulo after every byte (RFC 1950 §8.2 as written).
uint32_t adler32_by_bytes(std::string_view bytes) {
  uint32_t s1 = 1, s2 = 0;
  for (const char ch : bytes) {
    s1 = (s1 + static_cast<uint8_t>(ch)) % 65521;
    s2 = (s2 + s1) % 65521;
  }
  return (s2 << 16) | s1;
}

struct Decoded {
  int64_t width = 0, height = 0;
  std::vector<std::string> chunks;  // chunk types in file order
  int64_t stored_blocks = 0;
  std::vector<uint8_t> rgb;
  Rgb pixel(int64_t x, int64_t y) const {
    const auto* p = &rgb.at(static_cast<std::size_t>((y * width + x) * 3));
    return {p[0], p[1], p[2]};
  }
};

uint32_t be32(std::string_view s, std::size_t at) {
  return static_cast<uint32_t>(static_cast<uint8_t>(s[at])) << 24 |
         static_cast<uint32_t>(static_cast<uint8_t>(s[at + 1])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(s[at + 2])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(s[at + 3]));
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("read_png: " + what);
}

Decoded read_png(std::string_view png) {
  Decoded d;
  require(png.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8), "bad signature");
  std::string ihdr, z;
  for (std::size_t at = 8; at < png.size();) {
    require(at + 12 <= png.size(), "truncated chunk at byte " + std::to_string(at));
    const uint32_t length = be32(png, at);
    require(at + 12 + length <= png.size(), "chunk length past the end");
    const std::string_view type_and_data = png.substr(at + 4, 4 + length);
    const std::string type(type_and_data.substr(0, 4));
    require(crc32_by_bits(type_and_data) == be32(png, at + 8 + length), "CRC mismatch in " + type);
    d.chunks.push_back(type);
    if (type == "IHDR") ihdr = type_and_data.substr(4);
    if (type == "IDAT") z += type_and_data.substr(4);
    at += 12 + length;
  }
  require(!d.chunks.empty() && d.chunks.front() == "IHDR" && d.chunks.back() == "IEND",
          "IHDR must come first and IEND last");
  require(ihdr.size() == 13, "IHDR of " + std::to_string(ihdr.size()) + " bytes");
  d.width = be32(ihdr, 0), d.height = be32(ihdr, 4);
  require(d.width >= 1 && d.height >= 1, "empty image");
  require(ihdr.substr(8) == std::string("\x08\x02\0\0\0", 5),
          "not 8-bit RGB, deflate, no interlace");

  // zlib (RFC 1950): CM 8, no preset dictionary, header check; then stored blocks (RFC 1951).
  require(z.size() >= 6, "zlib stream too short");
  const auto cmf = static_cast<uint8_t>(z[0]), flg = static_cast<uint8_t>(z[1]);
  require((cmf & 0x0F) == 8 && (cmf * 256 + flg) % 31 == 0 && !(flg & 0x20), "bad zlib header");
  std::string raw;
  std::size_t at = 2;
  for (bool last = false; !last;) {
    require(at + 5 <= z.size(), "truncated deflate block");
    const auto header = static_cast<uint8_t>(z[at]);
    last = header & 1;
    require(((header >> 1) & 3) == 0, "a compressed block; this reader reads stored ones only");
    const uint32_t len = static_cast<uint8_t>(z[at + 1]) | static_cast<uint8_t>(z[at + 2]) << 8;
    const uint32_t nlen = static_cast<uint8_t>(z[at + 3]) | static_cast<uint8_t>(z[at + 4]) << 8;
    require(len == (~nlen & 0xFFFF), "LEN and NLEN disagree");
    require(at + 5 + len <= z.size(), "stored block past the end");
    raw += z.substr(at + 5, len);
    at += 5 + len;
    ++d.stored_blocks;
  }
  require(at + 4 == z.size(), "zlib stream does not end with its Adler-32");
  require(adler32_by_bytes(raw) == be32(z, at), "Adler-32 mismatch");

  const auto row_bytes = static_cast<std::size_t>(d.width * 3);
  require(raw.size() == static_cast<std::size_t>(d.height) * (row_bytes + 1), "wrong data size");
  for (std::size_t y = 0; y < static_cast<std::size_t>(d.height); ++y) {
    const std::size_t row = y * (row_bytes + 1);
    require(raw[row] == 0, "row " + std::to_string(y) + " has filter type " +
                               std::to_string(static_cast<uint8_t>(raw[row])));
    d.rgb.insert(d.rgb.end(), raw.begin() + static_cast<std::ptrdiff_t>(row + 1),
                 raw.begin() + static_cast<std::ptrdiff_t>(row + 1 + row_bytes));
  }
  return d;
}

// An image whose every pixel differs from its neighbours, so a misplaced byte shows.
Image pattern(int64_t width, int64_t height) {
  Image image(width, height);
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x)
      image.set(x, y,
                {static_cast<uint8_t>(x * 7 + y), static_cast<uint8_t>(y * 13 + x * 3),
                 static_cast<uint8_t>((x ^ y) * 5)});
  return image;
}

// ---- Checksums

TEST(PngChecksum, Crc32MatchesCheckValueAndBitwiseDefinition) {
  EXPECT_EQ(crc32("123456789"), 0xCBF43926u);
  EXPECT_EQ(crc32(""), 0u);
  EXPECT_EQ(crc32("IEND"), 0xAE426082u);  // the CRC every PNG ends with
  std::mt19937 rng(7);
  for (const std::size_t size : {1, 2, 17, 97, 1025}) {
    std::string bytes(size, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    EXPECT_EQ(crc32(bytes), crc32_by_bits(bytes)) << "size " << size;
  }
}

TEST(PngChecksum, Adler32MatchesCheckValueAcrossItsModuloRuns) {
  EXPECT_EQ(adler32("Wikipedia"), 0x11E60398u);
  EXPECT_EQ(adler32(""), 1u);
  // 0xFF bytes grow the sums fastest: around the 5552-byte runs between two modulos.
  for (const std::size_t size : {5551, 5552, 5553, 11104, 100000})
    EXPECT_EQ(adler32(std::string(size, '\xFF')), adler32_by_bytes(std::string(size, '\xFF')))
        << "size " << size;
}

// ---- Encoder

TEST(PngEncode, SignatureAndHeaderDescribeTheImage) {
  const std::string png = encode_png(pattern(7, 3));
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n"));
  EXPECT_EQ(png.substr(12, 4), "IHDR");
  const Decoded d = read_png(png);
  EXPECT_EQ(d.width, 7);
  EXPECT_EQ(d.height, 3);
  EXPECT_THAT(d.chunks, ElementsAre("IHDR", "IDAT", "IEND"));
  EXPECT_EQ(d.stored_blocks, 1);
  EXPECT_EQ(d.rgb, pattern(7, 3).rgb);
}

TEST(PngEncode, ReaderRejectsAFlippedByte) {
  const std::string png = encode_png(pattern(5, 4));
  ASSERT_NO_THROW(read_png(png));
  // Width in IHDR, a pixel in IDAT, and the stored CRC of IEND itself.
  const std::size_t idat_data = 8 + 25 + 8;
  for (const std::size_t at : {std::size_t{19}, idat_data + 20, png.size() - 1}) {
    std::string bad = png;
    bad[at] = static_cast<char>(bad[at] ^ 0x10);
    EXPECT_THAT([&] { read_png(bad); }, ThrowsMessage<std::runtime_error>(HasSubstr("CRC")))
        << "byte " << at;
  }
  // The same pixel flipped and the chunk's CRC made right again: now Adler-32 catches it.
  std::string bad = png;
  bad[idat_data + 20] = static_cast<char>(bad[idat_data + 20] ^ 0x10);
  const uint32_t idat_length = be32(bad, idat_data - 8);
  const uint32_t crc = crc32(std::string_view(bad).substr(idat_data - 4, 4 + idat_length));
  for (int k = 0; k < 4; ++k)
    bad[idat_data + idat_length + static_cast<std::size_t>(k)] =
        static_cast<char>(crc >> (24 - 8 * k));
  EXPECT_THAT([&] { read_png(bad); }, ThrowsMessage<std::runtime_error>(HasSubstr("Adler-32")));
}

TEST(PngEncode, StoredBlocksSplitAt65535Bytes) {
  // Scanline bytes = height · (1 + 3·width): 65535 fills one block exactly, 65536 needs two.
  for (const auto& [width, height, blocks] :
       {std::tuple{28, 771, 1}, std::tuple{5, 4096, 2}, std::tuple{300, 200, 3}}) {
    const Image image = pattern(width, height);
    const Decoded d = read_png(encode_png(image));
    EXPECT_EQ(d.stored_blocks, blocks) << width << " x " << height;
    EXPECT_EQ(d.rgb, image.rgb) << width << " x " << height;
  }
}

TEST(PngEncode, LargeImageSpansSeveralIdatChunksPixelExact) {
  const Image image = pattern(700, 600);  // 1.26 MB of scanlines: two IDATs, 20 stored blocks
  const Decoded d = read_png(encode_png(image));
  EXPECT_THAT(d.chunks, ElementsAre("IHDR", "IDAT", "IDAT", "IEND"));
  EXPECT_EQ(d.stored_blocks, (600 * 2101 + 65534) / 65535);
  EXPECT_EQ(d.rgb, image.rgb);
}

TEST(PngEncode, RejectsImagesPngCannotHold) {
  EXPECT_THROW(Image(0, 5), Error);
  EXPECT_THROW(Image(5, -1), Error);
  Image image(2, 2);
  image.rgb.pop_back();
  EXPECT_THAT([&] { encode_png(image); }, ThrowsMessage<Error>(HasSubstr("2 x 2")));
}

TEST(PngImage, DrawingClipsReadingChecks) {
  Image image(4, 3);
  image.fill_rect(-2, 1, 4, 9, {1, 2, 3});  // covers x 0..1, y 1..2
  image.set(4, 0, kBlack);                  // outside: ignored
  EXPECT_EQ(image.pixel(1, 2), (Rgb{1, 2, 3}));
  EXPECT_EQ(image.pixel(2, 2), kWhite);
  EXPECT_EQ(image.pixel(0, 0), kWhite);
  EXPECT_THROW(image.pixel(4, 0), Error);
}

// ---- Attention images

// svg.cpp's fill(): each channel 255 − a·(255 − c) for #cc6600, truncated, a = w clamped to [0, 1].
Rgb ramp_colour(double w) {
  const double a = std::clamp(w, 0.0, 1.0);
  return {static_cast<uint8_t>(static_cast<int>(255 - a * (255 - 0xcc))),
          static_cast<uint8_t>(static_cast<int>(255 - a * (255 - 0x66))),
          static_cast<uint8_t>(static_cast<int>(255 - a * (255 - 0x00)))};
}

// n tokens, softmax rows of N(0, 2) logits, and in every head one one-hot row (weights 1 and 0).
Explained explained(int64_t n, int64_t layers, int64_t heads) {
  const std::vector<std::string> words = {
      "[CLS]", "the", "animal", "didn", "'", "t", "cross", "café", "internationalization"};
  Explained e;
  for (int64_t i = 0; i < n; ++i)
    e.tokens.push_back({.text = i < static_cast<int64_t>(words.size())
                                    ? words[static_cast<std::size_t>(i)]
                                    : "w" + std::to_string(i)});
  e.layers = layers, e.heads = heads, e.head_dim = 4, e.scale = 0.5;
  std::mt19937 rng(42);
  std::normal_distribution<double> logit(0.0, 2.0);
  for (int64_t l = 0; l < layers; ++l) {
    std::vector<double> w(static_cast<std::size_t>(heads * n * n));
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < n; ++i) {
        double* row = &w[static_cast<std::size_t>((h * n + i) * n)];
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) sum += row[j] = std::exp(logit(rng));
        for (int64_t j = 0; j < n; ++j) row[j] = i == h % n ? (j == (i + l) % n) : row[j] / sum;
      }
    e.capture.layers.push_back({});
    e.capture.layers.back().weights = Tensor::from({1, heads, n, n}, w);
  }
  return e;
}

TEST(PngHeatmap, LayoutFollowsTheSvgCellSizes) {
  for (const auto& [n, cell] : {std::pair{1, 22}, std::pair{12, 22}, std::pair{32, 22},
                                std::pair{33, 8}, std::pair{96, 8}, std::pair{97, 3}}) {
    const HeatmapLayout at = heatmap_layout(n);
    EXPECT_EQ(at.cell, cell) << "n " << n;
    const Decoded d = read_png(png_heatmap(explained(n, 1, 1), 0, 0));
    EXPECT_EQ(d.width, std::max<int64_t>(at.x0 + n * cell + 10, 400)) << "n " << n;
    EXPECT_EQ(d.width, at.width) << "n " << n;
    EXPECT_EQ(d.height, at.y0 + n * cell + 10) << "n " << n;
    EXPECT_EQ(d.height, at.height) << "n " << n;
  }
}

TEST(PngHeatmap, CellCentreHasTheRampColourOfItsWeight) {
  for (const int64_t n : {12, 40, 100}) {  // the three cell sizes
    const Explained e = explained(n, 2, 3);
    const HeatmapLayout at = heatmap_layout(n);
    for (int64_t l = 0; l < e.layers; ++l)
      for (int64_t h = 0; h < e.heads; ++h) {
        const Decoded d = read_png(png_heatmap(e, l, h));
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < n; ++j) {
            const Rgb got =
                d.pixel(at.x0 + j * at.cell + at.cell / 2, at.y0 + i * at.cell + at.cell / 2);
            ASSERT_EQ(got, ramp_colour(e.weight(l, h, i, j)))
                << "n " << n << ", layer " << l << ", head " << h << ", cell (" << i << ", " << j
                << "), weight " << e.weight(l, h, i, j);
          }
        // The one-hot row h: the ramp's two ends.
        EXPECT_EQ(d.pixel(at.x0 + (h + l) % n * at.cell, at.y0 + h * at.cell),
                  (Rgb{0xcc, 0x66, 0x00}));
        EXPECT_EQ(d.pixel(at.x0 + (h + l + 1) % n * at.cell, at.y0 + h * at.cell), kWhite);
      }
  }
}

TEST(PngHeatmap, IsNotBlankAndHasLabels) {
  const int64_t n = 12;
  const Explained e = explained(n, 1, 2);
  const HeatmapLayout at = heatmap_layout(n);
  const Decoded d = read_png(png_heatmap(e, 0, 1));
  std::set<std::tuple<int, int, int>> colours;
  for (int64_t y = 0; y < d.height; ++y)
    for (int64_t x = 0; x < d.width; ++x) {
      const Rgb p = d.pixel(x, y);
      colours.insert({p.r, p.g, p.b});
    }
  // Exactly the weights' colours, the white background, the black text and the #cccccc frame;
  // softmax rows of 12 keys give mostly small weights, so the 144 share about 50 colours.
  std::set<std::tuple<int, int, int>> expected = {{255, 255, 255}, {0, 0, 0}, {204, 204, 204}};
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const Rgb p = ramp_colour(e.weight(0, 1, i, j));
      expected.insert({p.r, p.g, p.b});
    }
  EXPECT_EQ(colours, expected);
  EXPECT_GE(colours.size(), 40u);

  // Ink in each row's label band left of the cells, in each column's band above them, and in
  // the title.
  const auto has_ink = [&](int64_t x_begin, int64_t x_end, int64_t y_begin, int64_t y_end) {
    for (int64_t y = y_begin; y < y_end; ++y)
      for (int64_t x = x_begin; x < x_end; ++x)
        if (d.pixel(x, y) == kBlack) return true;
    return false;
  };
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_TRUE(has_ink(0, at.x0, at.y0 + i * at.cell, at.y0 + (i + 1) * at.cell)) << "row " << i;
    EXPECT_TRUE(has_ink(at.x0 + i * at.cell, at.x0 + (i + 1) * at.cell, 24, at.y0)) << "col " << i;
  }
  EXPECT_TRUE(has_ink(0, d.width, 0, 24));
  EXPECT_FALSE(has_ink(at.x0, at.x0 + n * at.cell, at.y0, at.y0 + n * at.cell));
}

TEST(PngHeatmap, RejectsALayerOrHeadTheCaptureLacks) {
  const Explained e = explained(4, 2, 3);
  EXPECT_THAT([&] { png_heatmap(e, 2, 0); }, ThrowsMessage<Error>(HasSubstr("layer 2")));
  EXPECT_THAT([&] { png_heatmap(e, 0, -1); }, ThrowsMessage<Error>(HasSubstr("head -1")));
  Explained short_capture = e;
  short_capture.tokens.push_back({.text = "extra"});  // 5 tokens, weights for 4
  EXPECT_THAT([&] { png_heatmap(short_capture, 0, 0); },
              ThrowsMessage<Error>(HasSubstr("expected [1, 3, 5, 5]")));
}

TEST(PngModelGrid, DimensionsAndThumbnailsAsDocumented) {
  const Explained e = explained(12, 2, 3);
  const GridLayout at = grid_layout(2, 3);
  const Decoded d = read_png(png_model_grid(e));
  EXPECT_EQ(d.width, at.width);
  EXPECT_EQ(d.height, at.height);
  EXPECT_EQ(d.width, 60 + 3 * (60 + 6));
  EXPECT_EQ(d.height, 40 + 2 * (60 + 6));
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t q = 0; q < at.thumb; ++q)
        for (int64_t p = 0; p < at.thumb; ++p)
          ASSERT_EQ(d.pixel(at.x(h) + p, at.y(l) + q),
                    ramp_colour(e.weight(l, h, q * 12 / at.thumb, p * 12 / at.thumb)))
              << "layer " << l << ", head " << h << ", pixel (" << p << ", " << q << ")";
  EXPECT_EQ(grid_layout(6, 12).width, 60 + 12 * 66);
  EXPECT_EQ(grid_layout(1, 1).width, 220);  // the title's room
}

TEST(PngModelGrid, LongTextKeepsTheLargestWeightOfEachBlock) {
  const int64_t n = 150;  // 2.5 tokens a pixel
  const Explained e = explained(n, 1, 2);
  const GridLayout at = grid_layout(1, 2);
  const Decoded d = read_png(png_model_grid(e));
  for (const auto& [p, q] : {std::pair{0, 0}, std::pair{17, 41}, std::pair{59, 59}}) {
    double largest = 0;
    for (int64_t i = q * n / 60; i < (q + 1) * n / 60; ++i)
      for (int64_t j = p * n / 60; j < (p + 1) * n / 60; ++j)
        largest = std::max(largest, e.weight(0, 1, i, j));
    EXPECT_EQ(d.pixel(at.x(1) + p, at.y(0) + q), ramp_colour(largest)) << p << ", " << q;
  }
}

}  // namespace
}  // namespace qkv::explain
