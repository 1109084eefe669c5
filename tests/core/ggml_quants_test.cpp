// The quantized ggml types qkv reads (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K), against
// what the gguf package (llama.cpp's own Python reader) dequantizes the same blocks to: random
// blocks with hand-set edge blocks (a zero scale, every quant bit set, negative minimums, a
// subnormal scale), from tests/golden/make_ggml_quant_goldens.py. Every product of scales and
// quants is exact in float32 and each value rounded once, where a minimum is added, in qkv as in
// gguf (src/core/ggml_quants.cpp), so the comparison is bit for bit: a −0 for +0 or one ulp is a
// failure.
#include "core/ggml_quants.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "core/gguf_bytes.h"
#include "qkv/npy.h"

namespace qkv {
namespace {

using ::testing::HasSubstr;

struct QuantCase {
  const char* name;  // the golden files' stem, ggml's name
  GgmlType type;
};
constexpr QuantCase kCases[] = {{"Q4_0", GgmlType::q4_0}, {"Q4_1", GgmlType::q4_1},
                                {"Q5_0", GgmlType::q5_0}, {"Q5_1", GgmlType::q5_1},
                                {"Q8_0", GgmlType::q8_0}, {"Q4_K", GgmlType::q4_k},
                                {"Q5_K", GgmlType::q5_k}, {"Q6_K", GgmlType::q6_k}};
constexpr int64_t kRows = 8, kCols = 256;  // each golden: [8, 256]

uint32_t number(GgmlType t) { return static_cast<uint32_t>(t); }

std::string golden_path(const std::string& file) {
  return std::string(QKV_SOURCE_DIR) + "/tests/golden/ggml_quants/" + file;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error(path + " is missing: run tests/golden/make_ggml_quant_goldens.py");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The blocks and gguf's float32 values of one type.
struct Golden {
  std::string blocks;
  std::vector<float> values;
};
Golden read_golden(const QuantCase& c) {
  const Tensor v = read_npy(golden_path(std::string(c.name) + ".npy"));
  EXPECT_EQ(v.shape(), (Shape{kRows, kCols}));
  return {read_bytes(golden_path(std::string(c.name) + ".bin")),
          std::vector<float>(v.data<float>(), v.data<float>() + v.numel())};
}

std::vector<float> dequantized(GgmlType type, const std::string& blocks, int64_t n) {
  std::vector<float> out(static_cast<std::size_t>(n));
  dequantize(number(type), reinterpret_cast<const std::byte*>(blocks.data()), out.data(), n);
  return out;
}

// The checker: every value the same float32 bits (so −0 ≠ +0, and one ulp is a difference).
::testing::AssertionResult same_bits(const std::vector<float>& want, const float* got,
                                     std::size_t n) {
  if (want.size() != n)
    return ::testing::AssertionFailure() << n << " values; expected " << want.size();
  for (std::size_t i = 0; i < n; ++i) {
    const auto w = std::bit_cast<uint32_t>(want[i]), g = std::bit_cast<uint32_t>(got[i]);
    if (w != g) {
      char line[160];
      std::snprintf(line, sizeof line,
                    "value %zu (row %zu, column %zu): %.9g (0x%08x); gguf: %.9g"
                    " (0x%08x)",
                    i, i / kCols % kRows, i % kCols, got[i], g, want[i], w);
      return ::testing::AssertionFailure() << line;
    }
  }
  return ::testing::AssertionSuccess();
}
::testing::AssertionResult same_bits(const std::vector<float>& want,
                                     const std::vector<float>& got) {
  return same_bits(want, got.data(), got.size());
}

TEST(GgmlQuants, DequantizeMatchesTheGgufPackageBitForBit) {
  for (const QuantCase& c : kCases) {
    SCOPED_TRACE(c.name);
    const Golden g = read_golden(c);
    // The sizes gguf wrote agree with qkv's: 2048 values, whole blocks.
    EXPECT_EQ(g.blocks.size(), ggml_bytes(number(c.type), kRows * kCols));
    EXPECT_TRUE(same_bits(g.values, dequantized(c.type, g.blocks, kRows * kCols)));
  }
  // The zero-scale block's values are ±0 by the sign of (q − offset): gguf keeps −0, and so must
  // qkv (Q4_0's q·d + 0 would not).
  const std::vector<float> q40 = read_golden(kCases[0]).values;
  EXPECT_GT(std::count_if(q40.begin(), q40.begin() + 32, [](float x) { return std::signbit(x); }),
            0);
}

// The checker fails on one changed bit: in the stored blocks (the lowest mantissa bit of block
// 5's f16 scale d, so that every value with a non-zero q moves), or in gguf's values (one ulp).
TEST(GgmlQuants, TheCheckerSeesOneFlippedBit) {
  for (const QuantCase& c : kCases) {
    SCOPED_TRACE(c.name);
    const Golden g = read_golden(c);
    const GgmlBlock block = ggml_block(number(c.type));
    const std::size_t d_at = c.type == GgmlType::q6_k ? 208 : 0;  // Q6_K keeps d last
    std::string flipped = g.blocks;
    flipped[5 * block.bytes + d_at] ^= 1;
    EXPECT_FALSE(same_bits(g.values, dequantized(c.type, flipped, kRows * kCols)));
    std::vector<float> off_by_an_ulp = g.values;
    off_by_an_ulp[777] = std::nextafter(off_by_an_ulp[777], INFINITY);
    EXPECT_FALSE(same_bits(off_by_an_ulp, dequantized(c.type, g.blocks, kRows * kCols)));
  }
}

// quants.gguf: every golden as a tensor, the file written by gguf's GGUFWriter, read through
// GgufFile as a model's weights are.
TEST(GgmlQuants, AFileTheGgufPackageWroteReadsBack) {
  const GgufFile f = GgufFile::open(golden_path("quants.gguf"));
  ASSERT_EQ(f.tensors().size(), std::size(kCases));
  for (const QuantCase& c : kCases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(f.info(c.name).type, number(c.type));
    EXPECT_EQ(ggml_type_name(f.info(c.name).type), c.name);
    const Tensor t = f.tensor(c.name);
    EXPECT_EQ(t.shape(), (Shape{kRows, kCols}));
    EXPECT_TRUE(same_bits(read_golden(c).values, t.data<float>(), t.numel()));
  }
}

// Tensors are read a MiB of whole blocks at a time: one of each type over 1.5 MiB (the goldens'
// blocks repeated) comes back whole and right across the seams, which for Q6_K's 210-byte
// blocks fall inside rows (4993 blocks a read).
TEST(GgmlQuants, TensorsLargerThanOneReadAreWholeAcrossTheSeams) {
  for (const QuantCase& c : kCases) {
    SCOPED_TRACE(c.name);
    const Golden g = read_golden(c);
    const std::size_t copies = (uint64_t{3} << 19) / g.blocks.size() + 1;
    std::string blocks;
    std::vector<float> want;
    for (std::size_t i = 0; i < copies; ++i) {
      blocks += g.blocks;
      want.insert(want.end(), g.values.begin(), g.values.end());
    }
    const uint64_t rows = kRows * copies;
    const GgufFile f =
        GgufFile::parse(test::one_tensor(number(c.type), {kCols, rows}, blocks), "big.gguf");
    const Tensor t = f.tensor("w");
    EXPECT_EQ(t.shape(), (Shape{static_cast<int64_t>(rows), kCols}));
    EXPECT_TRUE(same_bits(want, t.data<float>(), t.numel()));
  }
}

TEST(GgmlQuants, SizesAndRefusals) {
  // Bytes a block: ggml-common.h's static_asserts on the block_* structs.
  EXPECT_EQ(ggml_bytes(number(GgmlType::q5_0), 32), 22u);
  EXPECT_EQ(ggml_bytes(number(GgmlType::q5_1), 32), 24u);
  EXPECT_EQ(ggml_bytes(number(GgmlType::q4_k), 256), 144u);
  EXPECT_EQ(ggml_bytes(number(GgmlType::q5_k), 256), 176u);
  EXPECT_EQ(ggml_bytes(number(GgmlType::q6_k), 256), 210u);
  // A quantized block takes fewer bytes than it has values: any whole count has a size.
  EXPECT_EQ(ggml_bytes(number(GgmlType::q6_k), ~uint64_t{255}), ((uint64_t{1} << 56) - 1) * 210);
  // Not whole blocks, an unread type, a count whose bytes overflow: 0.
  EXPECT_EQ(ggml_bytes(number(GgmlType::q4_k), 32), 0u);
  EXPECT_EQ(ggml_bytes(10, 256), 0u);
  EXPECT_EQ(ggml_bytes(number(GgmlType::f32), uint64_t{1} << 62), 0u);
  EXPECT_EQ(ggml_type_name(10), "Q2_K");
  EXPECT_EQ(ggml_type_name(4), "type 4");  // Q4_2, removed from ggml
  EXPECT_EQ(ggml_type_name(1000), "type 1000");
  std::vector<float> out(256);
  const std::string zeros(210, '\0');
  const auto* data = reinterpret_cast<const std::byte*>(zeros.data());
  EXPECT_THAT([&] { dequantize(number(GgmlType::q6_k), data, out.data(), 32); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("dequantize: 32 values of Q6_K; expected a multiple of 256")));
  EXPECT_THAT([&] { dequantize(11, data, out.data(), 256); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  "dequantize: type 11 (Q3_K) is not a type qkv reads; expected F32, F16, BF16, "
                  "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K")));
}

}  // namespace
}  // namespace qkv
