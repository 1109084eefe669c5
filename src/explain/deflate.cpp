#include "explain/deflate.h"

#include <algorithm>
#include <array>
#include <vector>

namespace qkv::explain {
namespace {

// ---- RFC 1951 §3.2.5: the lengths 3 .. 258 as symbols 257 .. 285 and the distances 1 .. 32768
// as codes 0 .. 29, each a base plus that many extra bits.
constexpr std::array<uint16_t, 29> kLengthBase = {3,  4,  5,  6,   7,   8,   9,   10,  11, 13,
                                                  15, 17, 19, 23,  27,  31,  35,  43,  51, 59,
                                                  67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr std::array<uint8_t, 29> kLengthExtra = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                                  2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
constexpr std::array<uint16_t, 30> kDistanceBase = {
    1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
    193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
constexpr std::array<uint8_t, 30> kDistanceExtra = {0, 0, 0,  0,  1,  1,  2,  2,  3,  3,
                                                    4, 4, 5,  5,  6,  6,  7,  7,  8,  8,
                                                    9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

constexpr int kMinMatch = 3, kMaxMatch = 258;
constexpr int64_t kWindow = 32768;  // the farthest distance a code can express
constexpr int kEndOfBlock = 256;

// The index into kLengthBase / kDistanceBase: the last base not above the value. Length 258 is
// symbol 285 (no extra bits), not 284 + 31: §3.2.5 gives 284 the lengths 227 .. 257 only.
template <std::size_t N>
int code_of(const std::array<uint16_t, N>& base, int value) {
  return static_cast<int>(std::upper_bound(base.begin(), base.end(), value) - base.begin()) - 1;
}

// A Huffman code as it goes out: §3.1.1 packs codes from their most significant bit, everything
// else from the least, so the codes are stored bit-reversed and then written like other fields.
struct Code {
  uint16_t bits = 0;
  uint8_t length = 0;
};

constexpr uint16_t reversed(uint32_t code, int length) {
  uint32_t r = 0;
  for (int k = 0; k < length; ++k) r |= ((code >> k) & 1) << (length - 1 - k);
  return static_cast<uint16_t>(r);
}

// §3.2.6, the fixed literal/length code: 0..143 → 8 bits from 00110000, 144..255 → 9 bits from
// 110010000, 256..279 → 7 bits from 0000000, 280..287 → 8 bits from 11000000.
constexpr std::array<Code, 288> make_fixed_literal_codes() {
  std::array<Code, 288> codes{};
  for (int s = 0; s < 288; ++s) {
    const auto [first_symbol, first_code, length] = s < 144   ? std::array{0, 0x30, 8}
                                                    : s < 256 ? std::array{144, 0x190, 9}
                                                    : s < 280 ? std::array{256, 0x00, 7}
                                                              : std::array{280, 0xC0, 8};
    const auto code = static_cast<uint32_t>(first_code + s - first_symbol);
    codes[static_cast<std::size_t>(s)] = {reversed(code, length), static_cast<uint8_t>(length)};
  }
  return codes;
}
constexpr std::array<Code, 288> kFixedLiteral = make_fixed_literal_codes();
// The fixed distance code: code d as 5 bits.
constexpr int kFixedDistanceBits = 5;

// Bits out, least significant first (§3.1.1), into a growing string.
class BitWriter {
 public:
  explicit BitWriter(std::string& out) : out_(out) {}
  void put(uint32_t bits, int count) {  // count <= 24
    buffer_ |= static_cast<uint64_t>(bits) << filled_;
    filled_ += count;
    while (filled_ >= 8) {
      out_ += static_cast<char>(buffer_ & 0xFF);
      buffer_ >>= 8;
      filled_ -= 8;
    }
  }
  void put(Code code) { put(code.bits, code.length); }
  void align_to_byte() {
    if (filled_ > 0) put(0, 8 - filled_);
  }
  int pending_bits() const { return filled_; }

 private:
  std::string& out_;
  uint64_t buffer_ = 0;
  int filled_ = 0;  // bits in buffer_, < 8 between calls
};

// One LZ77 step: a literal byte (length 0) or a copy of `length` bytes from `distance` back.
struct Token {
  uint16_t length = 0;
  uint16_t value = 0;  // the literal, or the distance (1 .. 32768)
};

// The hash of the 3 bytes a match must start with (Knuth's multiplicative hashing); collisions
// only cost time, since candidates are compared byte by byte.
constexpr int kHashBits = 15;
uint32_t hash3(const uint8_t* p) {
  const uint32_t v = p[0] | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16;
  return (v * 0x9E3779B1u) >> (32 - kHashBits);
}

// How many candidates one position examines, newest first. No compare runs past the match
// finally taken (that is the longest), and greedy parsing skips the bytes a match covers, so the
// search costs at most about kMaxChain byte compares per input byte. Measured on `qkv explain
// --png` with PngFilter::adaptive (the 852 x 436 model grid / a 440 x 464 heatmap): 8 → 55.0 /
// 8.7 KB, 32 → 53.9 / 8.3 KB, 64 → 53.6 / 8.1 KB, 128 → 53.3 / 8.0 KB, in 5.8 / 6.3 / 6.9 /
// 7.4 ms for the grid.
constexpr int kMaxChain = 64;

// Hash chains over the whole input, as RFC 1951 §4 sketches them: head[h] is the newest position
// whose 3 bytes hash to h, prev[p mod 32768] the one before p with the same hash. An entry is
// overwritten 32768 insertions later, when it is out of reach anyway.
class MatchFinder {
 public:
  explicit MatchFinder(std::string_view bytes)
      : data_(reinterpret_cast<const uint8_t*>(bytes.data())),
        size_(static_cast<int64_t>(bytes.size())),
        head_(std::size_t{1} << kHashBits, -1),
        prev_(static_cast<std::size_t>(kWindow), -1) {}

  void insert(int64_t pos) {
    if (pos + kMinMatch > size_) return;
    int64_t& newest = head_[hash3(data_ + pos)];
    prev_[static_cast<std::size_t>(pos & (kWindow - 1))] = newest;
    newest = pos;
  }

  // The longest match for `pos` among the chain's newest kMaxChain candidates, of at most
  // `limit` bytes; {0, 0} when none reaches kMinMatch. The first of equal lengths wins: the
  // nearest, whose distance code is the shortest.
  Token longest(int64_t pos, int limit) const {
    Token best;
    if (limit < kMinMatch) return best;
    const uint8_t* here = data_ + pos;
    int best_length = kMinMatch - 1;
    int64_t candidate = head_[hash3(here)];
    for (int chain = kMaxChain; candidate >= 0 && pos - candidate <= kWindow && chain > 0;
         --chain) {
      const uint8_t* there = data_ + candidate;
      if (there[best_length] == here[best_length]) {  // cannot beat best_length otherwise
        int length = 0;
        while (length < limit && there[length] == here[length]) ++length;
        if (length > best_length) {
          best_length = length;
          best = {static_cast<uint16_t>(length), static_cast<uint16_t>(pos - candidate)};
          if (length == limit) break;
        }
      }
      candidate = prev_[static_cast<std::size_t>(candidate & (kWindow - 1))];
    }
    return best;
  }

 private:
  const uint8_t* data_;
  int64_t size_;
  std::vector<int64_t> head_, prev_;
};

// The bits of a token under the fixed codes, extra bits included.
int fixed_cost(Token t) {
  if (t.length == 0) return kFixedLiteral[t.value].length;
  const int l = code_of(kLengthBase, t.length), d = code_of(kDistanceBase, t.value);
  return kFixedLiteral[static_cast<std::size_t>(257 + l)].length + kLengthExtra[l] +
         kFixedDistanceBits + kDistanceExtra[d];
}

void put_fixed(BitWriter& out, Token t) {
  if (t.length == 0) return out.put(kFixedLiteral[t.value]);
  const auto l = static_cast<std::size_t>(code_of(kLengthBase, t.length));
  out.put(kFixedLiteral[257 + l]);
  out.put(t.length - kLengthBase[l], kLengthExtra[l]);
  const auto d = static_cast<std::size_t>(code_of(kDistanceBase, t.value));
  out.put(reversed(static_cast<uint32_t>(d), kFixedDistanceBits), kFixedDistanceBits);
  out.put(t.value - kDistanceBase[d], kDistanceExtra[d]);
}

}  // namespace

std::string deflate(std::string_view bytes) {
  const auto size = static_cast<int64_t>(bytes.size());
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  std::string out;
  out.reserve(bytes.size() / 4 + 64);
  BitWriter bits(out);
  MatchFinder matches(bytes);
  std::vector<Token> tokens;
  tokens.reserve(static_cast<std::size_t>(std::min(size, kMaxStoredBlock)));

  int64_t begin = 0;
  do {
    const int64_t end = std::min(size, begin + kMaxStoredBlock);
    const bool last = end == size;

    // Greedy parsing: take the longest match at each position, else a literal. Every position
    // goes into the hash chains, those inside a match too, so later text can match them.
    tokens.clear();
    int64_t coded_bits = 3 + kFixedLiteral[kEndOfBlock].length;  // header and end of block
    for (int64_t pos = begin; pos < end;) {
      Token t = matches.longest(pos, static_cast<int>(std::min<int64_t>(kMaxMatch, end - pos)));
      const int64_t advance = t.length == 0 ? 1 : t.length;
      if (t.length == 0) t.value = data[pos];
      for (int64_t p = pos; p < pos + advance; ++p) matches.insert(p);
      coded_bits += fixed_cost(t);
      tokens.push_back(t);
      pos += advance;
    }

    // The stored block: 3 header bits, padding to the byte, LEN and NLEN, the bytes (§3.2.4).
    const int64_t stored_bits =
        3 + (8 - (bits.pending_bits() + 3) % 8) % 8 + 32 + 8 * (end - begin);
    const uint32_t bfinal = last ? 1 : 0;
    if (coded_bits < stored_bits) {
      bits.put(bfinal | 0b01 << 1, 3);  // BTYPE 01: fixed Huffman codes
      for (const Token t : tokens) put_fixed(bits, t);
      bits.put(kFixedLiteral[kEndOfBlock]);
    } else {
      bits.put(bfinal | 0b00 << 1, 3);  // BTYPE 00: stored
      bits.align_to_byte();
      const auto len = static_cast<uint32_t>(end - begin);
      bits.put(len, 16);
      bits.put(~len & 0xFFFF, 16);
      out.append(bytes.substr(static_cast<std::size_t>(begin), len));
    }
    begin = end;
  } while (begin < size);
  bits.align_to_byte();
  return out;
}

}  // namespace qkv::explain
