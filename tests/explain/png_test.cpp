// PNG files written by qkv itself: the PNG encoder (explain/image/png.h; zlib compresses) read back
// by an independent, test-only reader — zlib's inflate, the five filters undone, every chunk CRC
// and the zlib Adler-32 verified by their definitions —
// and the attention images (explain/image/png_images.h) checked pixel by pixel against the layout
// their header documents. tests/explain/png_zlib_check.py reads the same encoder's files with
// Python's zlib (ctest png.python_zlib_reads_our_png).
#include "explain/image/png.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "explain/image/png_images.h"
#include "explain/png_reader.h"

namespace qkv::explain {
namespace {

using namespace png_test;  // NOLINT: the reader and sample images

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// ---- Checksums: the reader's own definitions, against the specs' check values (they check the
// encoder's CRCs and Adler-32 below).

TEST(PngChecksum, ReaderChecksumsMatchTheirCheckValues) {
  EXPECT_EQ(crc32_by_bits("123456789"), 0xCBF43926u);
  EXPECT_EQ(crc32_by_bits(""), 0u);
  EXPECT_EQ(crc32_by_bits("IEND"), 0xAE426082u);  // the CRC every PNG ends with
  EXPECT_EQ(adler32_by_bytes("Wikipedia"), 0x11E60398u);
  EXPECT_EQ(adler32_by_bytes(""), 1u);
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
  EXPECT_EQ(d.rgb, pattern(7, 3).rgb);
}

TEST(PngEncode, ReaderRejectsAFlippedByte) {
  const std::string png = encode_png(noise(40, 20, 1));
  ASSERT_EQ(read_png(png).width, 40);
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
  const uint32_t crc = crc32_by_bits(std::string_view(bad).substr(idat_data - 4, 4 + idat_length));
  for (int k = 0; k < 4; ++k)
    bad[idat_data + idat_length + static_cast<std::size_t>(k)] =
        static_cast<char>(crc >> (24 - 8 * k));
  EXPECT_THAT([&] { read_png(bad); }, ThrowsMessage<std::runtime_error>(HasSubstr("Adler-32")));
}

// Every byte of the zlib stream with its lowest bit flipped and the IDAT CRC made right: the
// reader notices, through the header check, zlib's inflate (a bad code or distance, the length)
// or the Adler-32.
TEST(PngEncode, ReaderRejectsEveryFlippedLowBitOfACompressedStream) {
  const std::string png = encode_png(pattern(20, 10));
  ASSERT_EQ(read_png(png).width, 20);
  const std::size_t idat_data = 8 + 25 + 8;
  const uint32_t idat_length = be32(png, idat_data - 8);
  for (std::size_t at = idat_data; at < idat_data + idat_length; ++at) {
    std::string bad = png;
    bad[at] = static_cast<char>(bad[at] ^ 0x01);
    const uint32_t crc =
        crc32_by_bits(std::string_view(bad).substr(idat_data - 4, 4 + idat_length));
    for (int k = 0; k < 4; ++k)
      bad[idat_data + idat_length + static_cast<std::size_t>(k)] =
          static_cast<char>(crc >> (24 - 8 * k));
    EXPECT_THROW(read_png(bad), std::runtime_error) << "zlib byte " << at - idat_data;
  }
}

TEST(PngEncode, LargeImagesPixelExact) {
  // Random: 1.26 MB of scanlines that do not compress, so more than one IDAT of 1 MiB.
  const Image random = noise(700, 600, 3);
  const Decoded r = read_png(encode_png(random));
  EXPECT_THAT(r.chunks, ElementsAre("IHDR", "IDAT", "IDAT", "IEND"));
  EXPECT_EQ(r.rgb, random.rgb);
  // The pattern: the same size, compressed to under a quarter.
  const Image smooth = pattern(700, 600);
  const std::string png = encode_png(smooth);
  const Decoded s = read_png(png);
  EXPECT_THAT(s.chunks, ElementsAre("IHDR", "IDAT", "IEND"));
  EXPECT_EQ(s.rgb, smooth.rgb);
  EXPECT_LT(png.size(), smooth.rgb.size() / 4);
}

TEST(PngEncode, FlatImageCompressesOver100Times) {
  for (const auto& [width, height] : {std::pair{600, 400}, std::pair{1, 1}, std::pair{1, 5000}}) {
    const Image flat(width, height, {30, 60, 90});
    const std::string png = encode_png(flat);
    const Decoded d = read_png(png);
    EXPECT_EQ(d.rgb, flat.rgb) << width << " x " << height;
    if (width == 600)  // elsewhere the 57 bytes of signature and chunk headers dominate
      EXPECT_GT(flat.rgb.size(), 100 * png.size())
          << width << " x " << height << ": " << png.size();
  }
}

// Filter 0 (none) on every row, the spec's heuristic on each row, and the smaller of the two
// files (the default).
TEST(PngEncode, FilterOptions) {
  for (const auto& [name, image] : {std::pair{"pattern", pattern(120, 90)},
                                    std::pair{"cells", few_colour_cells(240, 120, 4, 5)},
                                    std::pair{"noise", noise(50, 40, 9)}}) {
    const std::string none = encode_png(image, {.filter = PngFilter::none});
    const std::string adaptive = encode_png(image, {.filter = PngFilter::adaptive});
    const std::string smaller = encode_png(image);
    EXPECT_THAT(read_png(none).row_filters, Each(0)) << name;
    EXPECT_EQ(smaller.size(), std::min(none.size(), adaptive.size())) << name;
    for (const std::string* png : {&none, &adaptive, &smaller})
      EXPECT_EQ(read_png(*png).rgb, image.rgb) << name;

    // Each row's type has the least sum of |filtered byte| read as signed, the lowest on a tie.
    const Decoded d = read_png(adaptive);
    const std::size_t row_bytes = static_cast<std::size_t>(d.width * 3);
    for (std::size_t y = 0; y < static_cast<std::size_t>(d.height); ++y) {
      std::array<int64_t, 5> sums{};
      for (int type = 0; type < 5; ++type)
        for (std::size_t i = 0; i < row_bytes; ++i) {
          const uint8_t* row = &d.rgb[y * row_bytes];
          const int a = i >= 3 ? row[i - 3] : 0, b = y > 0 ? row[i - row_bytes] : 0,
                    c = y > 0 && i >= 3 ? row[i - row_bytes - 3] : 0;
          sums[static_cast<std::size_t>(type)] +=
              std::abs(static_cast<int8_t>(row[i] - predictor(type, a, b, c)));
        }
      const auto best = std::min_element(sums.begin(), sums.end()) - sums.begin();
      ASSERT_EQ(d.row_filters[y], best) << name << ", row " << y;
    }
  }
  // Cells of few colours compress better unfiltered (like the model grid); a smooth pattern
  // better filtered, mostly by sub, up and paeth.
  const Image cells = few_colour_cells(240, 120, 4, 5), smooth = pattern(120, 90);
  EXPECT_THAT(read_png(encode_png(cells)).row_filters, Each(0));
  const Decoded s = read_png(encode_png(smooth));
  EXPECT_GT(std::count_if(s.row_filters.begin(), s.row_filters.end(), [](int t) { return t != 0; }),
            80);
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
explain::Run explained(int64_t n, int64_t layers, int64_t heads) {
  const std::vector<std::string> words = {
      "[CLS]", "the", "animal", "didn", "'", "t", "cross", "café", "internationalization"};
  explain::Run e;
  for (int64_t i = 0; i < n; ++i)
    e.tokens.push_back({.text = i < static_cast<int64_t>(words.size())
                                    ? words[static_cast<std::size_t>(i)]
                                    : "w" + std::to_string(i)});
  e.model.layers = layers, e.model.heads = heads, e.model.head_dim = 4, e.model.scale = 0.5;
  e.blocks.emplace_back();
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
    e.blocks.front().layers.push_back({});
    e.blocks.front().layers.back().weights = Tensor::from({1, heads, n, n}, w);
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
    const explain::Run e = explained(n, 2, 3);
    const HeatmapLayout at = heatmap_layout(n);
    for (int64_t l = 0; l < e.model.layers; ++l)
      for (int64_t h = 0; h < e.model.heads; ++h) {
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
  const explain::Run e = explained(n, 1, 2);
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
  const explain::Run e = explained(4, 2, 3);
  EXPECT_THAT([&] { png_heatmap(e, 2, 0); }, ThrowsMessage<Error>(HasSubstr("layer 2")));
  EXPECT_THAT([&] { png_heatmap(e, 0, -1); }, ThrowsMessage<Error>(HasSubstr("head -1")));
  explain::Run short_capture = e;
  short_capture.tokens.push_back({.text = "extra"});  // 5 tokens, weights for 4
  EXPECT_THAT([&] { png_heatmap(short_capture, 0, 0); },
              ThrowsMessage<Error>(HasSubstr("expected [1, 3, 5, 5]")));
}

TEST(PngModelGrid, DimensionsAndThumbnailsAsDocumented) {
  const explain::Run e = explained(12, 2, 3);
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
  const explain::Run e = explained(n, 1, 2);
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

// ---- Sample PNGs and the pixels they were made from, NAME.png and NAME.rgb, each read back here;
// tests/explain/png_zlib_check.py (ctest png.python_zlib_reads_our_png) runs this test with
// $QKV_PNG_SAMPLES set and reads the same files with Python's zlib. Without it, a temporary folder.
TEST(PngSamples, EveryFilterRoundTripsAndIsWrittenForPython) {
  const char* given = std::getenv("QKV_PNG_SAMPLES");
  const std::filesystem::path own = std::filesystem::temp_directory_path() / "qkv-png-samples";
  if (given == nullptr) std::filesystem::create_directories(own);
  const std::string folder = given != nullptr ? given : own.string();
  const auto write = [&](const std::string& name, const Image& image, const std::string& png) {
    const Decoded back = read_png(png);
    EXPECT_EQ(back.width, image.width) << name;
    EXPECT_EQ(back.height, image.height) << name;
    EXPECT_TRUE(back.rgb == image.rgb) << name << ": pixels differ after the round trip";
    const std::filesystem::path base = std::filesystem::path(folder) / name;
    std::ofstream(base.string() + ".png", std::ios::binary) << png;
    std::ofstream(base.string() + ".rgb", std::ios::binary)
        << std::string(image.rgb.begin(), image.rgb.end());
  };
  for (const auto& [name, image] :
       {std::pair{"pattern_7x3", pattern(7, 3)}, std::pair{"pattern_300x200", pattern(300, 200)},
        std::pair{"noise_700x600", noise(700, 600, 3)},
        std::pair{"flat_600x400", Image(600, 400, {30, 60, 90})},
        std::pair{"cells_240x120", few_colour_cells(240, 120, 4, 5)},
        std::pair{"one_pixel", Image(1, 1, {1, 2, 3})}}) {
    write(name, image, encode_png(image));
    write(std::string(name) + "_adaptive", image,
          encode_png(image, {.filter = PngFilter::adaptive}));
  }
  // The attention images as `qkv explain --png` draws them; their pixels as this file's reader
  // reads them. Should it fail, the PNG goes alone, for Python to judge on its own.
  const explain::Run e = explained(40, 2, 3);
  for (const auto& [name, png] :
       {std::pair{"heatmap_40", png_heatmap(e, 1, 2)}, std::pair{"grid_2x3", png_model_grid(e)}}) {
    try {
      const Decoded d = read_png(png);
      Image image(d.width, d.height);
      image.rgb = d.rgb;
      write(name, image, png);
    } catch (const std::runtime_error& error) {
      ADD_FAILURE() << name << ": " << error.what();
      std::ofstream(std::filesystem::path(folder) / (std::string(name) + ".png"), std::ios::binary)
          << png;
    }
  }
}

}  // namespace
}  // namespace qkv::explain
