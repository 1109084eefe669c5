// tests/explain/png_reader.h — a test-only PNG reader for what explain/png.h writes, written
// from the specs apart from src/ (RFC 1950/1951, W3C PNG), and small sample images. Used by
// png_test.cpp and deflate_test.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "explain/png.h"

namespace qkv::explain::png_test {

// ---- The reader: what encode_png writes (8-bit RGB, stored or fixed-Huffman deflate blocks,
// filter types 0 .. 4), and every check the specs give a reader. It is written from the specs
// apart from src/: its checksums are the definitions computed the slow way, its inflater reads a
// bit at a time and builds the fixed code from its code lengths (§3.2.2) where deflate.cpp
// writes the code table out, and it derives the length and distance bases from their extra-bit
// counts where deflate.cpp lists them.

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

// RFC 1951 §3.1.1: bits from the least significant of each byte on; numbers LSB first.
class BitReader {
 public:
  explicit BitReader(std::string_view bytes) : bytes_(bytes) {}
  uint32_t bit() {
    require(at_ < 8 * bytes_.size(), "deflate data ends inside a block");
    const uint32_t b = (static_cast<uint8_t>(bytes_[at_ / 8]) >> (at_ % 8)) & 1;
    ++at_;
    return b;
  }
  uint32_t number(int bits) {
    uint32_t v = 0;
    for (int k = 0; k < bits; ++k) v |= bit() << k;
    return v;
  }
  void skip_to_byte() { at_ = (at_ + 7) / 8 * 8; }
  std::size_t bytes_read() const { return (at_ + 7) / 8; }

 private:
  std::string_view bytes_;
  std::size_t at_ = 0;  // in bits
};

// A canonical Huffman code from its code lengths (RFC 1951 §3.2.2), decoded a bit at a time,
// most significant bit of the code first: symbol_of[length][code], −1 where no symbol.
class HuffmanCode {
 public:
  explicit HuffmanCode(const std::vector<int>& lengths) {
    std::array<int, 16> count{}, next{};
    for (const int l : lengths) ++count[static_cast<std::size_t>(l)];
    count[0] = 0;
    for (int bits = 1, code = 0; bits < 16; ++bits) {
      code = (code + count[static_cast<std::size_t>(bits) - 1]) << 1;
      next[static_cast<std::size_t>(bits)] = code;
    }
    for (std::size_t l = 0; l < 16; ++l) symbol_of_[l].assign(std::size_t{1} << l, -1);
    for (std::size_t s = 0; s < lengths.size(); ++s)
      if (const auto l = static_cast<std::size_t>(lengths[s]); l > 0)
        symbol_of_[l][static_cast<std::size_t>(next[l]++)] = static_cast<int>(s);
  }
  int decode(BitReader& in) const {
    uint32_t code = 0;
    for (std::size_t length = 1; length < 16; ++length) {
      code = code << 1 | in.bit();
      if (const int s = symbol_of_[length][code]; s >= 0) return s;
    }
    throw std::runtime_error("read_png: no Huffman code matches");
  }

 private:
  std::array<std::vector<int>, 16> symbol_of_;
};

// §3.2.6: literal/length symbols 0..143 take 8 bits, 144..255 9, 256..279 7, 280..287 8;
// the 30 distance codes (and the 2 unused ones) 5 bits.
inline const HuffmanCode& fixed_literal_code() {
  static const HuffmanCode code = [] {
    std::vector<int> lengths(288);
    for (std::size_t s = 0; s < 288; ++s) lengths[s] = s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8;
    return HuffmanCode(lengths);
  }();
  return code;
}
inline const HuffmanCode& fixed_distance_code() {
  static const HuffmanCode code(std::vector<int>(32, 5));
  return code;
}

// §3.2.5 by its pattern: length codes 257 .. 284 take (i − 4) / 4 extra bits from the 9th on,
// distance codes i / 2 − 1 from the 5th on; each base is the previous one plus the range the
// previous extra bits cover. Code 285 is the exception: 258, no extra bits.
struct LengthAndDistanceBases {
  std::array<int, 29> length_base{}, length_extra{};
  std::array<int, 30> distance_base{}, distance_extra{};
  LengthAndDistanceBases() {
    for (int i = 0, base = 3; i < 28; base += 1 << length_extra[static_cast<std::size_t>(i++)]) {
      length_extra[static_cast<std::size_t>(i)] = i < 8 ? 0 : (i - 4) / 4;
      length_base[static_cast<std::size_t>(i)] = base;
    }
    length_base[28] = 258, length_extra[28] = 0;
    for (int i = 0, base = 1; i < 30; base += 1 << distance_extra[static_cast<std::size_t>(i++)]) {
      distance_extra[static_cast<std::size_t>(i)] = i < 4 ? 0 : i / 2 - 1;
      distance_base[static_cast<std::size_t>(i)] = base;
    }
  }
};

struct Inflated {
  std::string bytes;
  int64_t stored_blocks = 0, fixed_blocks = 0;
  std::size_t bytes_read = 0;  // of the deflate data, up to the byte the last block ends in
};

// RFC 1951 §3.2.3 – §3.2.6 for BTYPE 00 and 01; a dynamic-Huffman block (10) is an error here,
// since deflate() writes none. Distances are checked against the output so far and the 32 KiB
// window the zlib header announces.
inline Inflated inflate(std::string_view data) {
  static const LengthAndDistanceBases bases;
  BitReader in(data);
  Inflated out;
  for (bool last = false; !last;) {
    last = in.number(1);
    const uint32_t type = in.number(2);
    if (type == 0) {
      in.skip_to_byte();
      const uint32_t len = in.number(16), nlen = in.number(16);
      require(len == (~nlen & 0xFFFF), "LEN and NLEN disagree");
      for (uint32_t i = 0; i < len; ++i) out.bytes += static_cast<char>(in.number(8));
      ++out.stored_blocks;
      continue;
    }
    require(type == 1, type == 2 ? "a dynamic-Huffman block; this reader reads stored and fixed"
                                 : "block type 11 (reserved)");
    for (;;) {
      const int symbol = fixed_literal_code().decode(in);
      if (symbol < 256) {
        out.bytes += static_cast<char>(symbol);
        continue;
      }
      if (symbol == 256) break;
      require(symbol <= 285, "literal/length symbol " + std::to_string(symbol));
      const auto l = static_cast<std::size_t>(symbol - 257);
      const uint32_t length = bases.length_base[l] + in.number(bases.length_extra[l]);
      const int code = fixed_distance_code().decode(in);
      require(code < 30, "distance code " + std::to_string(code));
      const auto d = static_cast<std::size_t>(code);
      const uint32_t distance = bases.distance_base[d] + in.number(bases.distance_extra[d]);
      require(distance <= out.bytes.size() && distance <= 32768,
              "distance " + std::to_string(distance) + " past the start or the window");
      for (uint32_t k = 0; k < length; ++k) out.bytes += out.bytes[out.bytes.size() - distance];
    }
    ++out.fixed_blocks;
  }
  out.bytes_read = in.bytes_read();
  return out;
}

struct Decoded {
  int64_t width = 0, height = 0;
  std::vector<std::string> chunks;  // chunk types in file order
  int64_t stored_blocks = 0, fixed_blocks = 0;
  std::vector<int> row_filters;  // the filter type of each scanline
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

  // zlib (RFC 1950): CM 8 with a window of at most 32K, no preset dictionary, header check.
  require(z.size() >= 6, "zlib stream too short");
  const auto cmf = static_cast<uint8_t>(z[0]), flg = static_cast<uint8_t>(z[1]);
  require((cmf & 0x0F) == 8 && (cmf >> 4) <= 7 && (cmf * 256 + flg) % 31 == 0 && !(flg & 0x20),
          "bad zlib header");
  const Inflated inflated = inflate(std::string_view(z).substr(2, z.size() - 6));
  d.stored_blocks = inflated.stored_blocks, d.fixed_blocks = inflated.fixed_blocks;
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
