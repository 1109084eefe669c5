#include "explain/image/png.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>
#include <vector>

#include "qkv/tensor.h"

namespace qkv::explain {

Image::Image(int64_t width_, int64_t height_, Rgb background) : width(width_), height(height_) {
  // PNG spec §11.2.2: width and height are 1 .. 2^31 − 1.
  constexpr int64_t kMaxSide = (int64_t{1} << 31) - 1;
  if (width < 1 || height < 1 || width > kMaxSide || height > kMaxSide)
    throw Error("Image: size " + std::to_string(width) + " x " + std::to_string(height) +
                " but a PNG image needs 1 .. 2^31 - 1 pixels on each side");
  rgb.resize(static_cast<std::size_t>(width * height * 3));
  fill_rect(0, 0, width, height, background);
}

Rgb Image::pixel(int64_t x, int64_t y) const {
  if (!contains(x, y))
    throw Error("Image::pixel: (" + std::to_string(x) + ", " + std::to_string(y) +
                ") is outside the " + std::to_string(width) + " x " + std::to_string(height) +
                " image");
  const auto* p = &rgb[static_cast<std::size_t>((y * width + x) * 3)];
  return {p[0], p[1], p[2]};
}

void Image::set(int64_t x, int64_t y, Rgb colour) {
  if (!contains(x, y)) return;
  auto* p = &rgb[static_cast<std::size_t>((y * width + x) * 3)];
  p[0] = colour.r, p[1] = colour.g, p[2] = colour.b;
}

void Image::fill_rect(int64_t x, int64_t y, int64_t w, int64_t h, Rgb colour) {
  const int64_t x_begin = std::max<int64_t>(x, 0), x_end = std::min(x + w, width);
  const int64_t y_begin = std::max<int64_t>(y, 0), y_end = std::min(y + h, height);
  for (int64_t row = y_begin; row < y_end; ++row)
    for (int64_t col = x_begin; col < x_end; ++col) set(col, row, colour);
}

namespace {

void put_u32_be(std::string& out, uint32_t v) {
  out += static_cast<char>(v >> 24);
  out += static_cast<char>(v >> 16);
  out += static_cast<char>(v >> 8);
  out += static_cast<char>(v);
}

// A chunk: length (of the data only), type, data, CRC-32 over type and data (PNG spec §5.3).
void put_chunk(std::string& out, std::string_view type, std::string_view data) {
  put_u32_be(out, static_cast<uint32_t>(data.size()));
  const std::size_t crc_from = out.size();
  out += type;
  out += data;
  const std::string_view covered = std::string_view(out).substr(crc_from);
  put_u32_be(out, static_cast<uint32_t>(::crc32(::crc32(0, nullptr, 0),
                                                reinterpret_cast<const Bytef*>(covered.data()),
                                                static_cast<uInt>(covered.size()))));
}

constexpr std::size_t kIdatBytes = std::size_t{1} << 20;
// zlib's compression level. `qkv explain --png`'s model grid (852 x 436, 1.1 MB of scanlines,
// both filterings tried): level 6 28.1 KB in 0.19–0.20 s for the whole command, level 9 26.3 KB
// in 0.28 s; the hand-written fixed-Huffman deflate this replaced, 36.1 KB in 0.19 s.
constexpr int kZlibLevel = 6;

// ---- Filtering (PNG spec §9, filter method 0): each scanline goes out as a byte naming its
// filter type, then every byte x as x − predictor(a, b, c) mod 256, where a is the same channel
// of the pixel to the left, b the byte above, c the byte above-left (0 outside the image).
constexpr int kFilterTypes = 5;  // 0 none, 1 sub, 2 up, 3 average, 4 paeth
constexpr std::size_t kBytesPerPixel = 3;

// §9.4: whichever of a, b, c is nearest to the estimate a + b − c, ties in that order.
int paeth_predictor(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

// Filter type `type` over `row`, whose previous row is `above` (zeros for the first row).
void filter_row(int type, const uint8_t* row, const uint8_t* above, std::size_t n, uint8_t* out) {
  for (std::size_t i = 0; i < n; ++i) {
    const int a = i >= kBytesPerPixel ? row[i - kBytesPerPixel] : 0, b = above[i],
              c = i >= kBytesPerPixel ? above[i - kBytesPerPixel] : 0;
    const int predictor = type == 0   ? 0
                          : type == 1 ? a
                          : type == 2 ? b
                          : type == 3 ? (a + b) / 2
                                      : paeth_predictor(a, b, c);
    out[i] = static_cast<uint8_t>(row[i] - predictor);
  }
}

// The scanlines (§7.2), each led by its filter type. PngFilter::adaptive is the heuristic of the
// spec's "Filter selection" (§12.8): try all five, read the outputs as signed bytes, keep the
// least sum of absolute values (the lowest type on a tie).
std::string filtered_scanlines(const Image& image, PngFilter filter) {
  const std::size_t row_bytes = static_cast<std::size_t>(image.width) * kBytesPerPixel;
  std::string raw;
  raw.reserve((row_bytes + 1) * static_cast<std::size_t>(image.height));
  const std::vector<uint8_t> zeros(row_bytes, 0);
  std::vector<uint8_t> trial(row_bytes * kFilterTypes);
  const int types = filter == PngFilter::none ? 1 : kFilterTypes;
  for (int64_t y = 0; y < image.height; ++y) {
    const uint8_t* row = &image.rgb[static_cast<std::size_t>(y) * row_bytes];
    const uint8_t* above = y == 0 ? zeros.data() : row - row_bytes;
    int best_type = 0;
    int64_t best_sum = -1;
    for (int type = 0; type < types; ++type) {
      uint8_t* out = &trial[static_cast<std::size_t>(type) * row_bytes];
      filter_row(type, row, above, row_bytes, out);
      int64_t sum = 0;
      for (std::size_t i = 0; i < row_bytes; ++i) sum += std::abs(static_cast<int8_t>(out[i]));
      if (best_sum < 0 || sum < best_sum) best_type = type, best_sum = sum;
    }
    raw += static_cast<char>(best_type);
    raw.append(
        reinterpret_cast<const char*>(&trial[static_cast<std::size_t>(best_type) * row_bytes]),
        row_bytes);
  }
  return raw;
}

// The zlib stream (RFC 1950) of `raw`, by zlib at kZlibLevel.
std::string zlib_stream(const std::string& raw) {
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::string z(size, '\0');
  const int rc = compress2(reinterpret_cast<Bytef*>(z.data()), &size,
                           reinterpret_cast<const Bytef*>(raw.data()),
                           static_cast<uLong>(raw.size()), kZlibLevel);
  if (rc != Z_OK)
    throw Error("encode_png: zlib's compress2 failed (" + std::to_string(rc) + ") on " +
                std::to_string(raw.size()) + " bytes of scanlines");
  z.resize(size);
  return z;
}

}  // namespace

std::string encode_png(const Image& image, const PngOptions& options) {
  if (image.width < 1 || image.height < 1 ||
      image.rgb.size() != static_cast<std::size_t>(image.width * image.height * 3))
    throw Error("encode_png: image of " + std::to_string(image.width) + " x " +
                std::to_string(image.height) + " pixels holds " + std::to_string(image.rgb.size()) +
                " bytes; expected 3 per pixel, both sides >= 1");

  // The filter heuristic alone loses on images of few colours in blocks, whose unfiltered rows
  // repeat byte for byte (PNG spec §12.8 recommends type 0 for indexed-colour images for the same
  // reason). Measured with the earlier hand-written deflate, `qkv explain --png`'s model grid of
  // 852 x 436 took 53.6 KB adaptive, 47.8 KB unfiltered; a 440 x 464 heatmap 8.1 KB adaptive,
  // 9.4 KB unfiltered.
  std::string z;
  for (const PngFilter f : {PngFilter::adaptive, PngFilter::none}) {
    if (options.filter != PngFilter::smaller && options.filter != f) continue;
    const std::string raw = filtered_scanlines(image, f);
    std::string candidate = zlib_stream(raw);
    if (z.empty() || candidate.size() < z.size()) z = std::move(candidate);
  }

  std::string ihdr;  // PNG spec §11.2.2
  put_u32_be(ihdr, static_cast<uint32_t>(image.width));
  put_u32_be(ihdr, static_cast<uint32_t>(image.height));
  ihdr += '\x08';  // bit depth
  ihdr += '\x02';  // colour type 2: truecolour (RGB)
  ihdr += '\0';    // compression method 0: deflate
  ihdr += '\0';    // filter method 0: adaptive, five types
  ihdr += '\0';    // interlace method 0: none

  std::string png = "\x89PNG\r\n\x1a\n";  // PNG spec §5.2
  put_chunk(png, "IHDR", ihdr);
  // One chunk may hold 2^31 − 1 bytes; smaller IDATs (their data concatenate, §10.1) keep every
  // chunk far below that for any image size.
  for (std::size_t at = 0; at < z.size(); at += kIdatBytes)
    put_chunk(png, "IDAT", std::string_view(z).substr(at, kIdatBytes));
  put_chunk(png, "IEND", "");
  return png;
}

}  // namespace qkv::explain
