// tests/explain/png_reader.h — a test-only PNG reader for what explain/image/png.h writes, written
// from the specs apart from src/ (RFC 1950, W3C PNG; zlib inflates), and small sample images.
// Used by png_test.cpp.
#pragma once

#include <zlib.h>

#include <array>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "explain/image/png.h"

namespace qkv::explain::png_test {

// ---- The reader: what encode_png writes (8-bit RGB, filter types 0 .. 4), and every check the
// specs give a reader. Written from the specs apart from src/: its checksums are the definitions
// computed the slow way; the deflate data is inflated by zlib.

inline void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("read_png: " + what);
}

// CRC-32 a bit at a time: shift each bit out, XOR the reflected polynomial when it was 1.
inline uint32_t crc32_by_bits(std::string_view bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (const char ch : bytes) {
    c ^= static_cast<uint8_t>(ch);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? 0xEDB88320u : 0);
  }
  return ~c;
}

// Adler-32 with the modulo after every byte (RFC 1950 §8.2 as written).
inline uint32_t adler32_by_bytes(std::string_view bytes) {
  uint32_t s1 = 1, s2 = 0;
  for (const char ch : bytes) {
    s1 = (s1 + static_cast<uint8_t>(ch)) % 65521;
    s2 = (s2 + s1) % 65521;
  }
  return (s2 << 16) | s1;
}

// Raw deflate data (RFC 1951) inflated by zlib, which reads every block type; with the count of
// bytes it consumed up to the end of the last block. (The zlib header and Adler-32 around it
// are the reader's to check.)
struct Inflated {
  std::string bytes;
  std::size_t bytes_read = 0;
};

inline Inflated inflate_raw(std::string_view z) {
  z_stream s{};
  require(inflateInit2(&s, -15) == Z_OK, "inflateInit2");
  Inflated out;
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(z.data()));
  s.avail_in = static_cast<uInt>(z.size());
  int rc = Z_OK;
  char buffer[1 << 16];
  while (rc == Z_OK) {
    s.next_out = reinterpret_cast<Bytef*>(buffer);
    s.avail_out = sizeof buffer;
    rc = inflate(&s, Z_NO_FLUSH);
    out.bytes.append(buffer, sizeof buffer - s.avail_out);
    if (rc == Z_BUF_ERROR && s.avail_in == 0) break;  // input ended before the stream did
  }
  out.bytes_read = z.size() - s.avail_in;
  inflateEnd(&s);
  require(rc == Z_STREAM_END, "deflate data: " + std::string(s.msg ? s.msg : "ends early"));
  return out;
}

struct Decoded {
  int64_t width = 0, height = 0;
  std::vector<std::string> chunks;  // chunk types in file order
  std::vector<int> row_filters;     // the filter type of each scanline
  std::vector<uint8_t> rgb;
  Rgb pixel(int64_t x, int64_t y) const {
    const auto* p = &rgb.at(static_cast<std::size_t>((y * width + x) * 3));
    return {p[0], p[1], p[2]};
  }
};

inline uint32_t be32(std::string_view s, std::size_t at) {
  return static_cast<uint32_t>(static_cast<uint8_t>(s[at])) << 24 |
         static_cast<uint32_t>(static_cast<uint8_t>(s[at + 1])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(s[at + 2])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(s[at + 3]));
}

// PNG spec §9.2 – §9.4: the predictor of a byte from a (left), b (above), c (above-left).
inline int predictor(int type, int a, int b, int c) {
  switch (type) {
    case 0:
      return 0;
    case 1:
      return a;
    case 2:
      return b;
    case 3:
      return (a + b) / 2;
    case 4: {  // Paeth: the one of a, b, c nearest to a + b − c; ties a, then b
      const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
      return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
    }
  }
  throw std::runtime_error("read_png: filter type " + std::to_string(type));
}

inline Decoded read_png(std::string_view png) {
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

  // zlib (RFC 1950): CM 8 with a window of at most 32K, no preset dictionary, header check;
  // the stream ends where the IDATs do, and its Adler-32 (checked here the slow way, as well as
  // by zlib) covers the scanlines.
  require(z.size() >= 6, "zlib stream too short");
  const auto cmf = static_cast<uint8_t>(z[0]), flg = static_cast<uint8_t>(z[1]);
  require((cmf & 0x0F) == 8 && (cmf >> 4) <= 7 && (cmf * 256 + flg) % 31 == 0 && !(flg & 0x20),
          "bad zlib header");
  const Inflated inflated = inflate_raw(std::string_view(z).substr(2, z.size() - 6));
  require(2 + inflated.bytes_read + 4 == z.size(), "zlib stream does not end with its Adler-32");
  const std::string& raw = inflated.bytes;
  require(adler32_by_bytes(raw) == be32(z, z.size() - 4), "Adler-32 mismatch");

  const auto row_bytes = static_cast<std::size_t>(d.width * 3);
  require(raw.size() == static_cast<std::size_t>(d.height) * (row_bytes + 1), "wrong data size");
  d.rgb.resize(static_cast<std::size_t>(d.height) * row_bytes);
  for (std::size_t y = 0; y < static_cast<std::size_t>(d.height); ++y) {
    const int type = static_cast<uint8_t>(raw[y * (row_bytes + 1)]);
    d.row_filters.push_back(type);
    uint8_t* row = &d.rgb[y * row_bytes];
    const uint8_t* above = y > 0 ? row - row_bytes : nullptr;
    for (std::size_t i = 0; i < row_bytes; ++i) {
      const int a = i >= 3 ? row[i - 3] : 0, b = above ? above[i] : 0,
                c = above && i >= 3 ? above[i - 3] : 0;
      row[i] = static_cast<uint8_t>(static_cast<uint8_t>(raw[y * (row_bytes + 1) + 1 + i]) +
                                    predictor(type, a, b, c));
    }
  }
  return d;
}

// An image whose every pixel differs from its neighbours, so a misplaced byte shows.
inline Image pattern(int64_t width, int64_t height) {
  Image image(width, height);
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x)
      image.set(x, y,
                {static_cast<uint8_t>(x * 7 + y), static_cast<uint8_t>(y * 13 + x * 3),
                 static_cast<uint8_t>((x ^ y) * 5)});
  return image;
}

// Uniform random bytes: nothing for LZ77 or a filter to find.
inline Image noise(int64_t width, int64_t height, uint32_t seed) {
  Image image(width, height);
  std::mt19937 rng(seed);
  for (uint8_t& b : image.rgb) b = static_cast<uint8_t>(rng());
  return image;
}

// Cells of `cell` x `cell` pixels, each one of 6 colours: like the model grid's thumbnails.
inline Image few_colour_cells(int64_t width, int64_t height, int64_t cell, uint32_t seed) {
  const std::array<Rgb, 6> palette = {{{255, 255, 255},
                                       {0xcc, 0x66, 0},
                                       {250, 240, 230},
                                       {230, 200, 170},
                                       {0, 0, 0},
                                       {204, 204, 204}}};
  Image image(width, height);
  std::mt19937 rng(seed);
  for (int64_t y = 0; y < height; y += cell)
    for (int64_t x = 0; x < width; x += cell) image.fill_rect(x, y, cell, cell, palette[rng() % 6]);
  return image;
}

}  // namespace qkv::explain::png_test
