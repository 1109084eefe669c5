// The deflate compressor (explain/deflate.h) against the test-only inflater of png_reader.h, and
// that inflater against streams real zlib wrote.
#include "explain/deflate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "explain/png_reader.h"

namespace qkv::explain {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using namespace png_test;  // NOLINT: the inflater

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

}  // namespace
}  // namespace qkv::explain
