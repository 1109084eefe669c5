// PNG files written by qkv itself: the deflate compressor (explain/deflate.h) and the PNG encoder
// (explain/png.h) read back by an independent, test-only reader — an inflater of stored and
// fixed-Huffman blocks, the five filters undone, every chunk CRC and the zlib Adler-32 verified —
// and the attention images (explain/png_images.h) checked pixel by pixel against the layout their
// header documents. tests/explain/png_zlib_check.py reads the same encoder's files with Python's
// zlib (ctest png.python_zlib_reads_our_png).
#include "explain/png.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

#include "explain/deflate.h"
#include "explain/png_images.h"

namespace qkv::explain {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// ---- The reader: what encode_png writes (8-bit RGB, stored or fixed-Huffman deflate blocks,
// filter types 0 .. 4), and every check the specs give a reader. It is written from the specs
// apart from src/: its checksums are the definitions computed the slow way, its inflater reads a
// bit at a time and builds the fixed code from its code lengths (§3.2.2) where deflate.cpp
// writes the code table out, and it derives the length and distance bases from their extra-bit
// counts where deflate.cpp lists them.

void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("read_png: " + what);
}

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
const HuffmanCode& fixed_literal_code() {
  static const HuffmanCode code = [] {
    std::vector<int> lengths(288);
    for (std::size_t s = 0; s < 288; ++s) lengths[s] = s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8;
    return HuffmanCode(lengths);
  }();
  return code;
}
const HuffmanCode& fixed_distance_code() {
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
Inflated inflate(std::string_view data) {
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

uint32_t be32(std::string_view s, std::size_t at) {
  return static_cast<uint32_t>(static_cast<uint8_t>(s[at])) << 24 |
         static_cast<uint32_t>(static_cast<uint8_t>(s[at + 1])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(s[at + 2])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(s[at + 3]));
}

// PNG spec §9.2 – §9.4: the predictor of a byte from a (left), b (above), c (above-left).
int predictor(int type, int a, int b, int c) {
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
Image pattern(int64_t width, int64_t height) {
  Image image(width, height);
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x)
      image.set(x, y,
                {static_cast<uint8_t>(x * 7 + y), static_cast<uint8_t>(y * 13 + x * 3),
                 static_cast<uint8_t>((x ^ y) * 5)});
  return image;
}

// Uniform random bytes: nothing for LZ77 or a filter to find.
Image noise(int64_t width, int64_t height, uint32_t seed) {
  Image image(width, height);
  std::mt19937 rng(seed);
  for (uint8_t& b : image.rgb) b = static_cast<uint8_t>(rng());
  return image;
}

// Cells of `cell` x `cell` pixels, each one of 6 colours: like the model grid's thumbnails.
Image few_colour_cells(int64_t width, int64_t height, int64_t cell, uint32_t seed) {
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

// ---- Deflate

// The test inflater on its own, on streams Python's zlib wrote (zlib.compressobj(9, DEFLATED,
// -15, 9, Z_FIXED)): it must not merely agree with deflate() about some private misreading.
TEST(DeflateInflater, ReadsStreamsZlibWrote) {
  const std::string text = "Attention: queries, keys and values; queries, keys and values!";
  const std::string zlib_fixed(
      "\x73\x2c\x29\x49\xcd\x2b\xc9\xcc\xcf\xb3\x52\x28\x2c\x4d\x2d\xca\x4c\x2d\xd6\x51\xc8\x4e"
      "\xad\x2c\x56\x48\xcc\x4b\x51\x28\x4b\xcc\x29\x4d\x2d\xb6\xc6\x29\xa3\x08\x00",
      41);
  const Inflated got = inflate(zlib_fixed);
  EXPECT_EQ(got.bytes, text);
  EXPECT_EQ(got.fixed_blocks, 1);
  EXPECT_EQ(got.bytes_read, zlib_fixed.size());
  EXPECT_EQ(inflate(std::string("\x01\x03\x00\xfc\xff"
                                "abc",
                                8))
                .bytes,
            "abc");  // stored
  EXPECT_THAT(
      [] {
        inflate(
            std::string("\x01\x03\x00\xfd\xff"
                        "abc",
                        8));
      },
      ThrowsMessage<std::runtime_error>(HasSubstr("NLEN")));
  EXPECT_THAT([] { inflate(std::string("\x05\x00", 2)); },  // BTYPE 10
              ThrowsMessage<std::runtime_error>(HasSubstr("dynamic")));
}

// The smallest streams, bit by bit from §3.2.6 (codes MSB first, all else LSB first): empty is
// BFINAL 1, BTYPE 01, end-of-block 0000000 → 1 1 0 | 0000000 → 03 00, as zlib writes it; "a"
// adds the 8-bit code 10010001 of 0x61 before the end → 4b 04 00, zlib's too. Ten a's: the
// literal, then length 9 (symbol 263: 0000111) at distance 1 (code 0: 00000) → 4b 84 03 00, a
// byte less than zlib's lazy matcher writes (4b 4c 84 01 00: two literals, then a copy of 8),
// which the test inflater reads as the same ten a's.
TEST(Deflate, SmallestStreamsBitByBit) {
  EXPECT_EQ(deflate(""), std::string("\x03\x00", 2));
  EXPECT_EQ(deflate("a"), std::string("\x4b\x04\x00", 3));
  EXPECT_EQ(deflate("aaaaaaaaaa"), std::string("\x4b\x84\x03\x00", 4));
  EXPECT_EQ(inflate(std::string("\x4b\x4c\x84\x01\x00", 5)).bytes, "aaaaaaaaaa");
}

// Random byte strings of the awkward lengths — none, one, below, at and past the shortest and
// longest match, the window and a stored block — with contents from incompressible to one run.
TEST(Deflate, RoundTripsAcrossLengthsAndContents) {
  const std::vector<std::string> kinds = {"zeros", "random",      "period 3", "period 7",
                                          "words", "two symbols", "runs"};
  // Measured at n >= 32767 (all but random in fixed blocks): 155, 1.00, 154, 141, 7.3, 4.1, 61.
  const std::vector<double> least_ratio = {100, 0.99, 100, 100, 5, 3, 40};
  for (const std::size_t n :
       {0, 1, 2, 3, 4, 257, 258, 259, 260, 32767, 32768, 32769, 65535, 65536, 65537, 100000})
    for (std::size_t kind = 0; kind < kinds.size(); ++kind) {
      const uint32_t seed = static_cast<uint32_t>(1000 * n + kind);
      std::mt19937 rng(seed);
      std::string bytes(n, '\0');
      const std::vector<std::string> words = {"query ", "key ", "value ", "softmax ", "the "};
      for (std::size_t i = 0; i < n;) {
        switch (kind) {
          case 0:
            ++i;
            break;
          case 1:
            bytes[i++] = static_cast<char>(rng());
            break;
          case 2:
            bytes[i] = "abc"[i % 3], ++i;
            break;
          case 3:
            bytes[i] = static_cast<char>(200 + i % 7), ++i;
            break;
          case 4:
            for (const char c : words[rng() % words.size()])
              if (i < n) bytes[i++] = c;
            break;
          case 5:
            bytes[i++] = rng() % 2 ? 'x' : '\xF0';
            break;
          default:
            for (auto [c, run] = std::pair{static_cast<char>(rng()), rng() % 600}; run > 0 && i < n;
                 --run)
              bytes[i++] = c;
        }
      }
      const std::string z = deflate(bytes);
      const std::string where =
          "length " + std::to_string(n) + ", " + kinds[kind] + ", seed " + std::to_string(seed);
      Inflated back;
      ASSERT_NO_THROW(back = inflate(z)) << where;
      ASSERT_EQ(back.bytes, bytes) << where;
      EXPECT_EQ(back.bytes_read, z.size()) << where;
      EXPECT_EQ(
          back.stored_blocks + back.fixed_blocks,
          std::max<int64_t>(1, (static_cast<int64_t>(n) + kMaxStoredBlock - 1) / kMaxStoredBlock))
          << where;
      // Never longer than all stored: each block takes the fewer bits of the two.
      EXPECT_LE(z.size(), n + 5 * static_cast<std::size_t>(back.stored_blocks + back.fixed_blocks))
          << where;
      if (n >= 1000)
        EXPECT_GE(static_cast<double>(n) / static_cast<double>(z.size()), least_ratio[kind])
            << where;
    }
}

// Fixed codes spend 8.44 bits on an average random byte, so random bytes go stored: 5 bytes of
// block header per 65535 and no more. (A last block of a few bytes goes fixed: 18 bits for one
// literal against 40 for LEN, NLEN and the byte.)
TEST(Deflate, RandomBytesGoStored) {
  std::mt19937 rng(11);
  for (const std::size_t n : {300, 65535, 100000, 131070}) {
    std::string bytes(n, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    const std::string z = deflate(bytes);
    const Inflated back = inflate(z);
    EXPECT_EQ(back.bytes, bytes) << "length " << n;
    EXPECT_EQ(back.fixed_blocks, 0) << "length " << n;
    EXPECT_EQ(z.size(), n + 5 * ((n + 65534) / 65535)) << "length " << n;
  }
}

// One run: a literal, then copies of 258 at distance 1 of 13 bits each (symbol 285 is 8 bits,
// distance code 0 is 5), the last 2 bytes literals: 3 + 8 + 254·13 + 2·8 + 7 = 3336 bits.
TEST(Deflate, ARunCosts13BitsPer258Bytes) {
  const std::string zeros(65535, '\0');
  const std::string z = deflate(zeros);
  EXPECT_EQ(z.size(), 3336u / 8);
  EXPECT_EQ(inflate(z).bytes, zeros);
}

// The window is 32768 bytes (RFC 1951 §3.2.5: distances 1 .. 32768): random bytes repeated at
// that distance compress to about half, one byte farther they cannot.
TEST(Deflate, MatchesReachBack32768BytesAndNoFarther) {
  for (const std::size_t period : {32768, 32769}) {
    std::mt19937 rng(static_cast<uint32_t>(period));
    std::string half(period, '\0');
    for (char& c : half) c = static_cast<char>(rng());
    const std::string bytes = half + half;
    const std::string z = deflate(bytes);
    EXPECT_EQ(inflate(z).bytes, bytes) << "period " << period;
    if (period == 32768)
      EXPECT_LT(z.size(), 36000u);  // 32768 literals of 8.44 bits and 127 copies of 258
    else
      EXPECT_GT(z.size(), 65000u);
  }
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
  EXPECT_EQ(d.stored_blocks + d.fixed_blocks, 1);
  EXPECT_EQ(d.rgb, pattern(7, 3).rgb);
}

TEST(PngEncode, ReaderRejectsAFlippedByte) {
  const std::string png = encode_png(noise(40, 20, 1));  // stored: the pixels in plain sight
  ASSERT_EQ(read_png(png).stored_blocks, 1);
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

// Every byte of a compressed zlib stream with its lowest bit flipped (always a data bit: padding
// sits in the high bits of a block's last byte) and the IDAT CRC made right: the reader notices,
// through the header check, a bad code or distance, the length, or the Adler-32.
TEST(PngEncode, ReaderRejectsEveryFlippedLowBitOfACompressedStream) {
  const std::string png = encode_png(pattern(20, 10));
  const Decoded good = read_png(png);
  ASSERT_EQ(good.fixed_blocks, 1);
  const std::size_t idat_data = 8 + 25 + 8;
  const uint32_t idat_length = be32(png, idat_data - 8);
  for (std::size_t at = idat_data; at < idat_data + idat_length; ++at) {
    std::string bad = png;
    bad[at] = static_cast<char>(bad[at] ^ 0x01);
    const uint32_t crc = crc32(std::string_view(bad).substr(idat_data - 4, 4 + idat_length));
    for (int k = 0; k < 4; ++k)
      bad[idat_data + idat_length + static_cast<std::size_t>(k)] =
          static_cast<char>(crc >> (24 - 8 * k));
    EXPECT_THROW(read_png(bad), std::runtime_error) << "zlib byte " << at - idat_data;
  }
}

TEST(PngEncode, RandomPixelsGoStoredInBlocksOf65535Bytes) {
  // Scanline bytes = height · (1 + 3·width): 65535 fill one block exactly; of 65536, the last
  // byte goes in a fixed-Huffman block of its own (18 bits, where a stored one takes 40).
  for (const auto& [width, height, stored, fixed] :
       {std::tuple{28, 771, 1, 0}, std::tuple{5, 4096, 1, 1}, std::tuple{300, 200, 3, 0}}) {
    const Image image = noise(width, height, static_cast<uint32_t>(width));
    const Decoded d = read_png(encode_png(image));
    EXPECT_EQ(d.stored_blocks, stored) << width << " x " << height;
    EXPECT_EQ(d.fixed_blocks, fixed) << width << " x " << height;
    EXPECT_EQ(d.rgb, image.rgb) << width << " x " << height;
  }
}

TEST(PngEncode, LargeImagesPixelExactStoredAndCompressed) {
  // Random: 1.26 MB of scanlines stored, so two IDATs and 20 stored blocks.
  const Image random = noise(700, 600, 3);
  const Decoded r = read_png(encode_png(random));
  EXPECT_THAT(r.chunks, ElementsAre("IHDR", "IDAT", "IDAT", "IEND"));
  EXPECT_EQ(r.stored_blocks, (600 * 2101 + 65534) / 65535);
  EXPECT_EQ(r.rgb, random.rgb);
  // The pattern: the same size, coded in 20 fixed-Huffman blocks.
  const Image smooth = pattern(700, 600);
  const std::string png = encode_png(smooth);
  const Decoded s = read_png(png);
  EXPECT_THAT(s.chunks, ElementsAre("IHDR", "IDAT", "IEND"));
  EXPECT_EQ(s.fixed_blocks, (600 * 2101 + 65534) / 65535);
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
  const Explained e = explained(40, 2, 3);
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
