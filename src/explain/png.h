// explain/png.h — PNG images written by qkv itself (no libpng, no zlib): an RGB pixel buffer and
// its encoding as a PNG file, filtered row by row and compressed by explain/deflate.h. The
// images are mostly flat colour: the 6 x 12 model grid, 1.1 MB of pixels, takes 48 KB.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qkv::explain {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  friend bool operator==(const Rgb&, const Rgb&) = default;
};

inline constexpr Rgb kWhite{255, 255, 255};
inline constexpr Rgb kBlack{0, 0, 0};

// An 8-bit RGB image: pixel (x, y) is rgb[3·(y·width + x) + {0, 1, 2}], rows top to bottom.
// Drawing outside the image is clipped (silently: labels may run off an edge), reading throws.
struct Image {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // 3 bytes per pixel, row-major

  Image() = default;
  // width, height >= 1 (PNG has no empty images); throws qkv::Error otherwise.
  Image(int64_t width, int64_t height, Rgb background = kWhite);

  bool contains(int64_t x, int64_t y) const { return x >= 0 && y >= 0 && x < width && y < height; }
  Rgb pixel(int64_t x, int64_t y) const;       // throws qkv::Error outside the image
  void set(int64_t x, int64_t y, Rgb colour);  // no-op outside the image
  void fill_rect(int64_t x, int64_t y, int64_t w, int64_t h, Rgb colour);  // clipped
};

// CRC-32 of ISO 3309 / ITU-T V.42 as PNG uses it (reflected polynomial 0xEDB88320, initial and
// final XOR 0xFFFFFFFF); table-driven. crc32("123456789") = 0xCBF43926.
uint32_t crc32(std::string_view bytes);
// Adler-32 of RFC 1950 §8.2 (sums modulo 65521). adler32("Wikipedia") = 0x11E60398.
uint32_t adler32(std::string_view bytes);

// Which filter each scanline gets (PNG spec §9: 0 none, 1 sub, 2 up, 3 average, 4 paeth).
enum class PngFilter {
  none,      // type 0 on every row
  adaptive,  // per row, the type whose output has the least sum of |signed byte| (§12.8)
  smaller,   // both of the above, keeping the smaller file (twice the time)
};

struct PngOptions {
  PngFilter filter = PngFilter::smaller;
};

// The PNG file of `image` (W3C PNG spec, 2nd ed., https://www.w3.org/TR/png/): the signature,
// IHDR (8-bit RGB, colour type 2, no interlace), IDAT chunks of at most 1 MiB each, IEND. The
// IDATs together hold a zlib stream (RFC 1950: header 0x78 0x5E, Adler-32 trailer) whose deflate
// data (explain/deflate.h: fixed-Huffman or stored blocks) is the scanlines, each led by its
// filter type as options.filter chooses.
std::string encode_png(const Image& image, const PngOptions& options = {});

}  // namespace qkv::explain
