// safetensors: round trips, hand-built files with known F16/BF16 values, and every rejection the
// reader promises, each a qkv::Error naming the file and what was wrong.
#include "core/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace qkv {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A file from a header written by hand: the 8-byte little-endian length, the header, the data.
std::string make_file(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

std::string u16_bytes(std::initializer_list<uint16_t> values) {
  std::string out;
  for (uint16_t v : values) out.append(reinterpret_cast<const char*>(&v), 2);
  return out;
}

// The message of the qkv::Error that parsing `bytes` throws ("" when it parses).
std::string parse_error(const std::string& bytes) {
  try {
    parse_safetensors(bytes, "bad.safetensors");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e.what();
  }
  return "";
}

// A header with one F32 tensor "a" of shape `shape` and data_offsets `offsets` (JSON text).
std::string one_tensor(const std::string& dtype, const std::string& shape,
                       const std::string& offsets) {
  return R"({"a":{"dtype":)" + dtype + R"(,"shape":)" + shape + R"(,"data_offsets":)" + offsets +
         "}}";
}

TEST(SafetensorsTest, RoundTripKeepsNamesValuesDtypesAndMetadata) {
  const Tensor a = Tensor::from({2, 3}, {1.f, -2.f, 3.5f, 0.f, -0.f, 1e-30f});
  const Tensor b = Tensor::from({1, 2, 1, 2}, {0.1, -0.2, 1e300, 4.0});  // float64
  Tensor mask({3}, DType::b8);
  mask.data<bool>()[1] = true;
  const Tensor empty({0, 4});
  const Tensor scalar = Tensor::from({}, {7.f});
  const Tensor transposed = Tensor::from({2, 3}, {1.f, 2.f, 3.f, 4.f, 5.f, 6.f}).transpose(0, 1);
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "héllo\n"}};

  const std::string path = (std::filesystem::temp_directory_path() /
                            ("qkv_st_" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  write_safetensors(path,
                    {{"z.first", a},
                     {"b", b},
                     {"mask", mask},
                     {"empty", empty},
                     {"scalar", scalar},
                     {"t", transposed}},
                    metadata);
  const SafetensorsFile file = read_safetensors(path);
  std::filesystem::remove(path);

  EXPECT_EQ(file.names, (std::vector<std::string>{"z.first", "b", "mask", "empty", "scalar", "t"}));
  EXPECT_EQ(file.metadata, metadata);
  auto same = [](const Tensor& got, const Tensor& want) {
    ASSERT_EQ(got.dtype(), want.dtype());
    ASSERT_EQ(got.shape(), want.shape());
    for (int64_t i = 0; i < want.numel(); ++i) EXPECT_EQ(got.value(i), want.value(i)) << i;
  };
  same(file.tensors.at("z.first"), a);
  EXPECT_TRUE(std::signbit(file.tensors.at("z.first").data<float>()[4]));
  same(file.tensors.at("b"), b);
  same(file.tensors.at("mask"), mask);
  same(file.tensors.at("empty"), empty);
  same(file.tensors.at("scalar"), scalar);
  same(file.tensors.at("t"), transposed);
}

TEST(SafetensorsTest, EncodePadsTheHeaderToEightBytesAndPacksTheData) {
  const std::string bytes = encode_safetensors({{"x", Tensor::from({3}, {1.f, 2.f, 3.f})}});
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 12);
  EXPECT_EQ(bytes.substr(8, n).find_last_not_of(' '), bytes.substr(8, n).rfind('}'));
  EXPECT_TRUE(parse_safetensors(bytes, "x").metadata.empty());
}

TEST(SafetensorsTest, EncodeRejectsBadNames) {
  const Tensor t = Tensor::from({1}, {1.f});
  EXPECT_THROW(encode_safetensors({{"", t}}), Error);
  EXPECT_THROW(encode_safetensors({{"a", t}, {"a", t}}), Error);
  EXPECT_THROW(encode_safetensors({{"__metadata__", t}}), Error);
  EXPECT_THROW(encode_safetensors({{"a", Tensor()}}), Error);
  EXPECT_THROW(encode_safetensors({{"\xff", t}}), Error);
}

TEST(SafetensorsTest, WriteToAMissingDirectoryIsARuntimeError) {
  try {
    write_safetensors("/nonexistent-dir-qkv/x.safetensors", {{"a", Tensor::from({1}, {1.f})}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::runtime);
  }
}

TEST(SafetensorsTest, ReadsF16AndBF16Exactly) {
  const std::string header = R"({"h":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]},)"
                             R"("__metadata__":{"k":"v"},)"
                             R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[12,18]}})";
  const std::string data = u16_bytes({0x3C00, 0xC000, 0x7C00, 0x0001, 0x8000, 0x7BFF}) +
                           u16_bytes({0x3F80, 0xC040, 0xFF80});
  const SafetensorsFile file = parse_safetensors(make_file(header, data), "hand");
  EXPECT_EQ(file.names, (std::vector<std::string>{"h", "b"}));
  EXPECT_EQ(file.metadata.at("k"), "v");
  const Tensor& h = file.tensors.at("h");
  ASSERT_EQ(h.dtype(), DType::f32);
  ASSERT_EQ(h.shape(), (Shape{2, 3}));
  const float* hv = h.data<float>();
  EXPECT_EQ(hv[0], 1.0f);
  EXPECT_EQ(hv[1], -2.0f);
  EXPECT_EQ(hv[2], std::numeric_limits<float>::infinity());
  EXPECT_EQ(hv[3], std::ldexp(1.0f, -24));  // the smallest subnormal half
  EXPECT_EQ(hv[4], 0.0f);
  EXPECT_TRUE(std::signbit(hv[4]));
  EXPECT_EQ(hv[5], 65504.0f);  // the largest finite half
  const float* bv = file.tensors.at("b").data<float>();
  EXPECT_EQ(bv[0], 1.0f);
  EXPECT_EQ(bv[1], -3.0f);
  EXPECT_EQ(bv[2], -std::numeric_limits<float>::infinity());
}

TEST(SafetensorsTest, ReadsHalfNaNAsNaN) {
  const auto f = parse_safetensors(
      make_file(one_tensor("\"F16\"", "[1]", "[0,2]"), u16_bytes({0x7E00})), "nan");
  EXPECT_TRUE(std::isnan(f.tensors.at("a").data<float>()[0]));
}

TEST(SafetensorsTest, RejectsTruncatedFiles) {
  EXPECT_THAT(parse_error(""), AllOf(StartsWith("bad.safetensors: "), HasSubstr("at least 8")));
  EXPECT_THAT(parse_error("\x10\0\0"), HasSubstr("at least 8"));
  EXPECT_THAT(parse_error(make_file("{}").substr(0, 9)), HasSubstr("past the end of the file"));
  const std::string full = make_file(one_tensor("\"F32\"", "[2]", "[0,8]"), std::string(8, '\0'));
  EXPECT_THAT(parse_error(full.substr(0, full.size() - 1)),
              AllOf(HasSubstr("\"a\""), HasSubstr("data ends at 8"), HasSubstr("7 data bytes")));
  // A tensor moved beyond the data is the one named, not the one after the gap it left (issue 26).
  EXPECT_EQ(parse_error(make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":"
                                  "[1000,1008]},\"b\":{\"dtype\":\"F32\",\"shape\":[2],"
                                  "\"data_offsets\":[8,16]}}",
                                  std::string(16, '\0'))),
            "bad.safetensors: tensor \"a\": data ends at 1008 (data_offsets [1000, 1008]) but the "
            "file holds 16 data bytes");
  for (const auto& [path, why] :
       {std::pair{"/nonexistent/x.safetensors", "cannot open: No such file or directory"},
        std::pair{"/", "is a directory; expected a regular .safetensors file"}}) {
    try {
      read_safetensors(path);
      ADD_FAILURE() << path;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), std::string(path) + ": " + why);
    }
  }
}

TEST(SafetensorsTest, RejectsAnOversizedHeaderLength) {
  std::string bytes(16, ' ');
  const uint64_t n = 100'000'001;
  std::memcpy(bytes.data(), &n, 8);
  EXPECT_THAT(parse_error(bytes), AllOf(HasSubstr("100000001"), HasSubstr("limit")));
  const uint64_t huge = std::numeric_limits<uint64_t>::max();
  std::memcpy(bytes.data(), &huge, 8);
  EXPECT_THAT(parse_error(bytes), HasSubstr("limit"));
}

TEST(SafetensorsTest, RejectsBadJsonAndNonObjects) {
  EXPECT_THAT(parse_error(make_file("{\"a\":")), HasSubstr("not valid JSON"));
  EXPECT_THAT(parse_error(make_file("")), HasSubstr("not valid JSON"));
  EXPECT_THAT(parse_error(make_file("[1,2]")), AllOf(HasSubstr("[1,2]"), HasSubstr("object")));
  EXPECT_THAT(parse_error(make_file("{\"\xc3\x28\":1}")), HasSubstr("not valid UTF-8"));
  EXPECT_THAT(parse_error(make_file(R"({"a":3})")), AllOf(HasSubstr("\"a\""), HasSubstr("object")));
  EXPECT_THAT(parse_error(make_file(R"({"__metadata__":{"k":1}})")),
              AllOf(HasSubstr("__metadata__"), HasSubstr("string")));
  EXPECT_THAT(parse_error(make_file(R"({"__metadata__":[]})")), HasSubstr("__metadata__"));
  EXPECT_THAT(parse_error(make_file(R"({"a":{"shape":[],"data_offsets":[0,0]}})")),
              HasSubstr("no \"dtype\""));
  EXPECT_EQ(parse_error(make_file(R"({"__metadata__":null}   )")), "");
}

// A header of 100,000 nested '[' (200 KB) overflowed the stack and killed the process, through
// every reader (issue 26); 30,000 was refused. Now both are refused at the 65th level.
TEST(SafetensorsTest, RejectsDeeplyNestedHeadersWithoutCrashing) {
  for (const std::size_t depth : {std::size_t{65}, std::size_t{30'000}, std::size_t{100'000}}) {
    EXPECT_EQ(parse_error(make_file(std::string(depth, '[') + std::string(depth, ']'))),
              "bad.safetensors: the header nests arrays and objects more than 64 deep (at byte "
              "64); expected at most 64 levels")
        << depth;
    std::string objects;
    for (std::size_t i = 0; i < depth; ++i) objects += "{\"a\":";
    objects += "1" + std::string(depth, '}');
    EXPECT_THAT(parse_error(make_file(objects)), HasSubstr("more than 64 deep")) << depth;
  }
}

TEST(SafetensorsTest, ListsIntegerTensorsWithoutLoadingThem) {
  const SafetensorsFile file = parse_safetensors(
      make_file(one_tensor("\"I64\"", "[1]", "[0,8]"), std::string(8, 'x')), "t.safetensors");
  EXPECT_TRUE(file.tensors.empty());
  ASSERT_EQ(file.skipped.size(), 1u);
  EXPECT_EQ(file.skipped.at("a"), "I64");
  // Still validated: an I64 of 1 element needs 8 bytes.
  EXPECT_THAT(parse_error(make_file(one_tensor("\"I64\"", "[1]", "[0,4]"), std::string(4, 'x'))),
              HasSubstr("needs 8 bytes"));
}

TEST(SafetensorsTest, RejectsUnknownDtypes) {
  EXPECT_THAT(parse_error(make_file(one_tensor("\"Q4\"", "[1]", "[0,8]"), std::string(8, 'x'))),
              AllOf(HasSubstr("\"a\""), HasSubstr("\"Q4\""), HasSubstr("not a safetensors dtype")));
  EXPECT_THAT(parse_error(make_file(one_tensor("4", "[1]", "[0,4]"), std::string(4, 'x'))),
              HasSubstr("dtype is 4"));
}

TEST(SafetensorsTest, RejectsSizeMismatchesAndBadShapes) {
  EXPECT_THAT(parse_error(make_file(one_tensor("\"F32\"", "[2,3]", "[0,20]"), std::string(20, 0))),
              AllOf(HasSubstr("\"a\""), HasSubstr("needs 24 bytes"), HasSubstr("hold 20")));
  EXPECT_THAT(parse_error(make_file(one_tensor("\"F32\"", "[2,-1]", "[0,0]"))),
              AllOf(HasSubstr("shape[1] is -1"), HasSubstr("non-negative integer")));
  EXPECT_THAT(parse_error(make_file(one_tensor("\"F32\"", "[2.0]", "[0,8]"), std::string(8, 0))),
              HasSubstr("shape[0] is 2.0"));
  EXPECT_THAT(parse_error(make_file(one_tensor("\"F32\"", "3", "[0,12]"), std::string(12, 0))),
              HasSubstr("shape is 3"));
  EXPECT_THAT(parse_error(make_file(one_tensor("\"F32\"", "[1,1,1,1,1]", "[0,4]"), "abcd")),
              HasSubstr("rank 5"));
  EXPECT_THAT(parse_error(make_file(one_tensor("\"F32\"", "[4294967296,4294967296]", "[0,0]"))),
              HasSubstr("overflows"));
  EXPECT_THAT(parse_error(make_file(one_tensor("\"F32\"", "[1099511627776,2,0]", "[0,0]"))),
              AllOf(HasSubstr("\"a\""), HasSubstr("multiply past 2^40")));
}

TEST(SafetensorsTest, RejectsMalformedOffsets) {
  for (const char* offsets : {"[0]", "[0,4,8]", "[4,0]", "[-1,3]", "[0.0,4]", "{}", "\"0,4\""})
    EXPECT_THAT(parse_error(make_file(one_tensor("\"F32\"", "[1]", offsets), "abcd")),
                AllOf(HasSubstr("\"a\""), HasSubstr("data_offsets"), HasSubstr("[begin, end]")))
        << offsets;
}

TEST(SafetensorsTest, RejectsOverlapsGapsAndTrailingBytes) {
  const std::string two = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":%}})";
  auto with_b = [&](const std::string& offsets) {
    std::string h = two;
    return h.replace(h.find('%'), 1, offsets);
  };
  EXPECT_EQ(parse_error(make_file(with_b("[8,16]"), std::string(16, 0))), "");
  EXPECT_THAT(parse_error(make_file(with_b("[4,12]"), std::string(12, 0))),
              AllOf(HasSubstr("\"b\""), HasSubstr("overlap"), HasSubstr("\"a\"")));
  EXPECT_THAT(parse_error(make_file(with_b("[12,20]"), std::string(20, 0))),
              AllOf(HasSubstr("\"b\""), HasSubstr("gap"), HasSubstr("begin at 8")));
  EXPECT_THAT(parse_error(make_file(one_tensor("\"F32\"", "[1]", "[4,8]"), std::string(8, 0))),
              AllOf(HasSubstr("gap"), HasSubstr("begin at 0")));
  EXPECT_THAT(parse_error(make_file(with_b("[8,16]"), std::string(17, 0))),
              AllOf(HasSubstr("trailing"), HasSubstr("1 trailing bytes")));
  EXPECT_THAT(parse_error(make_file("{}", "x")), HasSubstr("trailing"));
}

TEST(SafetensorsTest, RejectsDuplicateAndEmptyNames) {
  const std::string dup = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                          R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  EXPECT_THAT(parse_error(make_file(dup, std::string(8, 0))),
              AllOf(HasSubstr("\"a\""), HasSubstr("twice")));
  EXPECT_THAT(parse_error(make_file(R"({"__metadata__":{"k":"1","k":"2"}})")), HasSubstr("twice"));
  EXPECT_THAT(parse_error(make_file(R"({"":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})")),
              HasSubstr("empty name"));
}

// Flipped and truncated bytes of a valid file: each variant parses or throws qkv::Error.
TEST(SafetensorsTest, FuzzedFilesParseOrThrowQkvError) {
  Tensor mask({2}, DType::b8);
  const std::string valid = encode_safetensors({{"w", Tensor::from({2, 2}, {1.f, 2.f, 3.f, 4.f})},
                                                {"d", Tensor::from({1}, {5.0})},
                                                {"m", mask},
                                                {"e", Tensor({0})}},
                                               {{"format", "pt"}});
  std::mt19937 rng(20240611);
  int parsed = 0, rejected = 0;
  for (int variant = 0; variant < 4000; ++variant) {
    std::string bytes = valid;
    const int kind = variant % 4;
    if (kind == 3) {
      bytes.resize(rng() % bytes.size());
    } else {
      for (int flips = 0; flips <= kind; ++flips) {
        const std::size_t at = rng() % bytes.size();
        bytes[at] = kind == 0 ? static_cast<char>(bytes[at] ^ (1 << (rng() % 8)))
                              : static_cast<char>(rng() % 256);
      }
    }
    try {
      parse_safetensors(bytes, "fuzz");
      ++parsed;
    } catch (const Error& e) {
      ASSERT_THAT(e.what(), StartsWith("fuzz: ")) << "variant " << variant;
      ++rejected;
    }
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace qkv
