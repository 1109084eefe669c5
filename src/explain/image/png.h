// explain/image/png.h — PNG images written by qkv (no libpng): an RGB pixel buffer and its encoding
// as a PNG file, filtered row by row, compressed by zlib, in chunks qkv writes itself. The images
// are mostly flat colour: the 6 x 12 model grid, 1.1 MB of pixels, takes 28 KB.
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
// IDATs together hold a zlib stream (RFC 1950, zlib's compress2) of the scanlines, each led by
// its filter type as options.filter chooses.
std::string encode_png(const Image& image, const PngOptions& options = {});

}  // namespace qkv::explain
