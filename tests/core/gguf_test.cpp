// GGUF files: hand-built files whose every value is known (each type, quantized blocks decoded by
// hand from ggml's block layouts), every rejection the reader promises, and SmolLM2-135M's real
// file against what llama.cpp's own Python reader (gguf) read from it
// (tests/golden/make_smollm2_gguf_goldens.py).
#include "core/gguf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/gguf_bytes.h"
#include "core/scratch_files.h"
#include "models/model_files.h"

namespace qkv {
namespace {

using test::Bytes;
using test::bytes_of;
using test::gguf_file;
using test::kv_string;
using test::one_tensor;
using test::raw;
using ::testing::HasSubstr;

std::string parse_error(const std::string& bytes) {
  try {
    GgufFile::parse(bytes, "f.gguf");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::runtime) << e.what();
    return e.what();
  }
  return "(no error)";
}

TEST(Gguf, ReadsMetadataOfEveryKind) {
  Bytes kv;
  kv.str("a.u32").put<uint32_t>(4).put<uint32_t>(30);
  kv.str("a.f32").put<uint32_t>(6).put<float>(1e-5f);
  kv.str("a.bool").put<uint32_t>(7).put<uint8_t>(1);
  kv.str("a.tokens").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(2).str("<s>").str("Ġthe");
  kv.str("a.i64").put<uint32_t>(11).put<int64_t>(-7);
  const GgufFile f = GgufFile::parse(gguf_file(5, kv.s, {}), "m.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.meta("a.u32").get<int>(), 30);
  EXPECT_FLOAT_EQ(f.meta("a.f32").get<float>(), 1e-5f);
  EXPECT_EQ(f.meta("a.bool").get<bool>(), true);
  EXPECT_EQ(f.meta("a.tokens"), (nlohmann::json{"<s>", "Ġthe"}));
  EXPECT_EQ(f.meta("a.i64").get<int>(), -7);
  EXPECT_THAT([&] { f.meta("a.missing"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("m.gguf: no metadata \"a.missing\"")));
}

TEST(Gguf, FloatTypesAndShapeInCOrder) {
  // ne = [3, 2]: two rows of three.
  const GgufFile f32 = GgufFile::parse(one_tensor(0, {3, 2}, raw<float>({1, 2, 3, 4, 5, -6})), "a");
  EXPECT_EQ(f32.info("w").shape, (Shape{2, 3}));
  const Tensor t = f32.tensor("w");
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.at<float>(1, 2), -6.0f);
  EXPECT_EQ(t.at<float>(0, 1), 2.0f);
  // F16: 1.0 = 0x3C00, −2.5 = 0xC100, 65504 = 0x7BFF, the smallest subnormal 0x0001 = 2^-24.
  const Tensor h =
      GgufFile::parse(one_tensor(1, {4}, raw<uint16_t>({0x3C00, 0xC100, 0x7BFF, 0x0001})), "b")
          .tensor("w");
  EXPECT_EQ(h.at<float>(0), 1.0f);
  EXPECT_EQ(h.at<float>(1), -2.5f);
  EXPECT_EQ(h.at<float>(2), 65504.0f);
  EXPECT_EQ(h.at<float>(3), std::ldexp(1.0f, -24));
  // BF16: the top half of a float: 0x3FC0 = 1.5, 0xC040 = −3.
  const Tensor b =
      GgufFile::parse(one_tensor(30, {2}, raw<uint16_t>({0x3FC0, 0xC040})), "c").tensor("w");
  EXPECT_EQ(b.at<float>(0), 1.5f);
  EXPECT_EQ(b.at<float>(1), -3.0f);
}

TEST(Gguf, Q8_0BlockIsScaleTimesInt8) {
  // d = 0.5 (F16 0x3800); q = −32 … 31.
  std::vector<uint8_t> block{0x00, 0x38};
  for (int j = 0; j < 32; ++j)
    block.push_back(static_cast<uint8_t>(static_cast<int8_t>(j - 32 + j % 2 * 40)));
  const Tensor t = GgufFile::parse(one_tensor(8, {32}, bytes_of(block)), "q8").tensor("w");
  for (int j = 0; j < 32; ++j)
    EXPECT_EQ(t.at<float>(j), 0.5f * static_cast<float>(j - 32 + j % 2 * 40)) << j;
}

TEST(Gguf, Q4BlocksKeepValueJLowAndJPlus16High) {
  // Byte j = (hi << 4) | lo with lo = j, hi = 15 − j: value j is lo, value j + 16 is hi.
  std::vector<uint8_t> nibbles;
  for (int j = 0; j < 16; ++j) nibbles.push_back(static_cast<uint8_t>(((15 - j) << 4) | j));
  // Q4_0: d = 2 (0x4000); x = (q − 8)·d.
  std::vector<uint8_t> q40{0x00, 0x40};
  q40.insert(q40.end(), nibbles.begin(), nibbles.end());
  const Tensor a = GgufFile::parse(one_tensor(2, {32}, bytes_of(q40)), "q40").tensor("w");
  // Q4_1: d = 0.25 (0x3400), m = −1 (0xBC00); x = q·d + m.
  std::vector<uint8_t> q41{0x00, 0x34, 0x00, 0xBC};
  q41.insert(q41.end(), nibbles.begin(), nibbles.end());
  const Tensor b = GgufFile::parse(one_tensor(3, {32}, bytes_of(q41)), "q41").tensor("w");
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(a.at<float>(j), 2.0f * static_cast<float>(j - 8)) << j;
    EXPECT_EQ(a.at<float>(j + 16), 2.0f * static_cast<float>(15 - j - 8)) << j;
    EXPECT_EQ(b.at<float>(j), 0.25f * static_cast<float>(j) - 1.0f) << j;
    EXPECT_EQ(b.at<float>(j + 16), 0.25f * static_cast<float>(15 - j) - 1.0f) << j;
  }
}

TEST(Gguf, RejectsWhatIsNotAValidFile) {
  const std::string good = one_tensor(0, {2}, raw<float>({1, 2}));
  ASSERT_EQ(parse_error(good), "(no error)");
  EXPECT_THAT(parse_error("GGUX" + good.substr(4)), HasSubstr("does not start with \"GGUF\""));
  EXPECT_THAT(parse_error(gguf_file(0, "", {}, 1)), HasSubstr("version 1"));
  EXPECT_THAT(parse_error(good.substr(0, 30)), HasSubstr("f.gguf: the file ends inside"));
  EXPECT_THAT(parse_error(good.substr(0, good.size() - 1)), HasSubstr("runs past the end"));
  // Unknown tensor type, named; a quantized row that is not whole blocks; rank 5; misalignment.
  // ggml's types qkv does not read by their names; a number ggml does not define as a number.
  EXPECT_THAT(parse_error(one_tensor(10, {256}, std::string(84, '\0'))),
              HasSubstr("f.gguf: tensor \"w\" is of type 10 (Q2_K), which qkv does not read (it "
                        "reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)"));
  EXPECT_THAT(parse_error(one_tensor(20, {32}, std::string(18, '\0'))),
              HasSubstr("\"w\" is of type 20 (IQ4_NL), which qkv does not read"));
  EXPECT_THAT(parse_error(one_tensor(99, {32}, std::string(18, '\0'))),
              HasSubstr("\"w\" is of type 99, which qkv does not read"));
  EXPECT_THAT(parse_error(one_tensor(8, {16}, std::string(34, '\0'))),
              HasSubstr("rows of 16 values of Q8_0; expected a multiple of 32"));
  // The K-quants' blocks are 256 values: a row of 32 (a whole Q4_0 block) is not whole blocks.
  EXPECT_THAT(parse_error(one_tensor(12, {32, 8}, std::string(144, '\0'))),
              HasSubstr("rows of 32 values of Q4_K; expected a multiple of 256"));
  EXPECT_THAT(parse_error(one_tensor(14, {384}, std::string(420, '\0'))),
              HasSubstr("rows of 384 values of Q6_K; expected a multiple of 256"));
  EXPECT_THAT(parse_error(one_tensor(0, {1, 1, 1, 1, 1}, raw<float>({1}))),
              HasSubstr("rank 5; expected 1 to 4"));
  const std::string misaligned =
      gguf_file(0, "", {{.name = "w", .ne = {1}, .type = 0, .data = "", .offset = 4}});
  EXPECT_THAT(parse_error(misaligned), HasSubstr("not a multiple of the alignment 32"));
  const std::string twice =
      gguf_file(0, "",
                {{.name = "w", .ne = {2}, .type = 0, .data = raw<float>({1, 2})},
                 {.name = "w", .ne = {2}, .type = 0, .data = raw<float>({1, 2})}});
  EXPECT_THAT(parse_error(twice), HasSubstr("tensor \"w\" appears twice"));
  const std::string overlap =
      gguf_file(0, "",
                {{.name = "a", .ne = {16}, .type = 0, .data = std::string(64, '\0')},
                 {.name = "b", .ne = {8}, .type = 0, .data = "", .offset = 0}});
  EXPECT_THAT(parse_error(overlap), HasSubstr("overlap"));
  const std::string kv = kv_string("k", "v");
  EXPECT_THAT(parse_error(gguf_file(2, kv + kv, {})), HasSubstr("metadata \"k\" appears twice"));
  // An array that claims more items than the file holds, before anything is allocated.
  const std::string lie =
      Bytes().str("k").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(uint64_t{1} << 40).s;
  EXPECT_THAT(parse_error(gguf_file(1, lie, {})),
              HasSubstr("claims an array of 1099511627776 items"));
  EXPECT_THAT(parse_error(gguf_file(uint64_t{1} << 60, "", {})), HasSubstr("claims"));
}

TEST(Gguf, OpenRefusesAFifoBeforeReadingIt) {
  const test::ScratchDir dir("qkv-gguf");
  const std::string fifo = dir.path("m.gguf");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT([&] { GgufFile::open(fifo); },
              ::testing::ThrowsMessage<Error>(HasSubstr("expected a regular .gguf file")));
}

// open() reads the header and nothing more; a tensor's bytes are read when it is asked for. The
// whole file was read into memory first, and one larger than 16 GiB refused for that: a file of
// 20 GiB (sparse: one small tensor, then a hole) opens at once.
TEST(Gguf, OpenReadsTheHeaderAndATensorOnlyWhenAsked) {
  const test::ScratchDir dir("qkv-gguf");
  const std::string path = dir.write("big.gguf", one_tensor(0, {3}, raw<float>({1, -2, 3})));
  std::filesystem::resize_file(path, uint64_t{20} << 30);
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.meta("general.architecture"), "llama");
  const Tensor t = f.tensor("w");
  EXPECT_EQ(t.at<float>(1), -2.0f);
  EXPECT_EQ(t.at<float>(2), 3.0f);
}

// A string (or an array) that claims more than a header may hold is refused before it is read:
// in a file of 200 MiB, a key of 100 MiB.
TEST(Gguf, TheHeaderIsBounded) {
  const test::ScratchDir dir("qkv-gguf");
  const std::string lie = Bytes().put<uint64_t>(uint64_t{100} << 20).s;
  const std::string path = dir.write("long.gguf", gguf_file(1, lie, {}));
  std::filesystem::resize_file(path, uint64_t{200} << 20);
  EXPECT_THAT([&] { GgufFile::open(path); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  "a metadata key at byte 24 claims 104857600 bytes, more than a GGUF header may "
                  "hold (64 MiB); expected a valid GGUF file")));
}

// Tensors are read and dequantized a MiB at a time: one larger than that is whole and right across
// the seams. Q8_0: 40,000 blocks of 34 bytes (1.36 MB); F16: 600,000 values (1.2 MB).
TEST(Gguf, TensorsLargerThanOneReadAreDequantizedWhole) {
  const test::ScratchDir dir("qkv-gguf");
  constexpr int kBlocks = 40'000;
  std::vector<uint8_t> q8;
  for (int b = 0; b < kBlocks; ++b) {
    q8.insert(q8.end(), {0x00, 0x3C});  // d = 1
    for (int j = 0; j < 32; ++j)
      q8.push_back(static_cast<uint8_t>(static_cast<int8_t>((b + j) % 200 - 100)));
  }
  const Tensor q =
      GgufFile::open(dir.write("q8.gguf", one_tensor(8, {32 * kBlocks}, bytes_of(q8)))).tensor("w");
  for (int b = 0; b < kBlocks; b += 97)
    for (int j = 0; j < 32; ++j)
      ASSERT_EQ(q.at<float>(int64_t{b} * 32 + j), static_cast<float>((b + j) % 200 - 100))
          << b << " " << j;
  constexpr int kHalves = 600'000;
  std::vector<uint16_t> halves(kHalves);
  for (int i = 0; i < kHalves; ++i)
    halves[i] = static_cast<uint16_t>(0x3C00 + i % 1000);  // 1 + k/1024
  const Tensor h =
      GgufFile::open(dir.write("f16.gguf", one_tensor(1, {kHalves}, raw<uint16_t>(halves))))
          .tensor("w");
  for (int i = 0; i < kHalves; i += 1009)
    ASSERT_EQ(h.at<float>(i), 1.0f + static_cast<float>(i % 1000) / 1024) << i;
  ASSERT_EQ(h.at<float>(kHalves - 1), 1.0f + static_cast<float>((kHalves - 1) % 1000) / 1024);
}

// Ollama keeps a model as a blob named by its hash: a GGUF file is known by its first four bytes.
// Only a regular file is read (a FIFO would block the open, /dev/zero never ends).
TEST(Gguf, IsGgufFileGoesByTheMagicBytesNotTheName) {
  const test::ScratchDir dir("qkv-gguf");
  const std::string good = one_tensor(0, {2}, raw<float>({1, 2}));
  EXPECT_TRUE(is_gguf_file(dir.write("sha256-6a0746a1ec1a", good)));
  EXPECT_TRUE(is_gguf_file(dir.write("model.safetensors", good)));
  EXPECT_TRUE(is_gguf_file(dir.write("magic-only", "GGUF")));
  EXPECT_FALSE(is_gguf_file(dir.write("text.gguf", "not a model")));
  EXPECT_FALSE(is_gguf_file(dir.write("short", "GGU")));
  EXPECT_FALSE(is_gguf_file(dir.path("missing.gguf")));
  EXPECT_FALSE(is_gguf_file(dir.root().string()));
  const test::Watchdog watchdog(30);
  EXPECT_FALSE(is_gguf_file(dir.fifo("fifo.gguf")));
  EXPECT_FALSE(is_gguf_file("/dev/zero"));
}

// NaN metadata was shown as JSON shows it, "null"; an array of 49,152 tokens as all of them.
TEST(Gguf, ValuesInMessagesAreSpelledForReading) {
  EXPECT_EQ(gguf_value_str(nlohmann::json(std::nan(""))), "NaN");
  EXPECT_EQ(gguf_value_str(nlohmann::json(-INFINITY)), "-inf");
  EXPECT_EQ(gguf_value_str(nlohmann::json(INFINITY)), "+inf");
  EXPECT_EQ(gguf_value_str(nlohmann::json(2000000000u)), "2000000000");
  EXPECT_EQ(gguf_value_str(nlohmann::json("llama")), "\"llama\"");
  EXPECT_EQ(gguf_value_str(nlohmann::json::array({"a", "b", "c"})), "an array of 3 items");
  EXPECT_EQ(gguf_value_str(nlohmann::json::array({1})), "an array of 1 item");
  // Clipped at 60 bytes, never inside a UTF-8 character: the quote and 29 of the 2-byte "é", as the
  // 60th byte is the first half of the 30th.
  std::string accents;
  for (int i = 0; i < 40; ++i) accents += "é";
  EXPECT_EQ(gguf_value_str(nlohmann::json(accents)), "\"" + accents.substr(0, 58) + "…");
  Bytes kv;
  kv.str("general.alignment").put<uint32_t>(6).put<float>(std::nanf(""));
  EXPECT_THAT(parse_error(gguf_file(1, kv.s, {})),
              HasSubstr("general.alignment is NaN; expected a power of two"));
}

// SmolLM2-135M-Instruct.Q4_1.gguf as gguf (llama.cpp's Python reader) reads it: the metadata, the
// count of each type, and for tensors of every stored type their shape and the sum, sum of
// squares, first and last values of the dequantized numbers. Sums are float64 over float32
// values; the bound is a few ulps of the float64 sum of 28M terms.
TEST(GgufSmolLM2, MatchesWhatLlamaCppsReaderReads) {
  const nlohmann::json golden = test::read_golden_json("gguf_tensors.json", "smollm2");
  const GgufFile f = GgufFile::open(test::smollm2_gguf());
  EXPECT_EQ(f.tensors().size(), golden["tensor_count"].get<std::size_t>());
  std::map<std::string, int> types;
  for (const GgufTensorInfo& t : f.tensors()) ++types[ggml_type_name(t.type)];
  for (const auto& [name, count] : golden["types"].items()) EXPECT_EQ(types[name], count) << name;
  for (const auto& [key, value] : golden["metadata"].items()) {
    if (key.find(':') != std::string::npos) continue;
    if (value.is_number_float())
      EXPECT_FLOAT_EQ(f.meta(key).get<float>(), value.get<float>()) << key;
    else
      EXPECT_EQ(f.meta(key), value) << key;
  }
  const nlohmann::json& tokens = f.meta("tokenizer.ggml.tokens");
  const nlohmann::json& merges = f.meta("tokenizer.ggml.merges");
  EXPECT_EQ(nlohmann::json({tokens.size(), tokens.front(), tokens.back()}),
            golden["metadata"]["tokens: count, first, last"]);
  EXPECT_EQ(nlohmann::json({merges.size(), merges.front(), merges.back()}),
            golden["metadata"]["merges: count, first, last"]);

  for (const auto& [name, g] : golden["tensors"].items()) {
    SCOPED_TRACE(name);
    EXPECT_EQ(ggml_type_name(f.info(name).type), g["type"].get<std::string>());
    const Tensor t = f.tensor(name);
    EXPECT_EQ(t.shape(), g["shape"].get<Shape>());
    const float* x = t.data<float>();
    const int64_t n = t.numel();
    double sum = 0, squares = 0;
    for (int64_t i = 0; i < n; ++i) sum += x[i], squares += double{x[i]} * x[i];
    EXPECT_NEAR(sum, g["sum"].get<double>(), 1e-9 * (1 + squares));
    EXPECT_NEAR(squares, g["sum_squares"].get<double>(), 1e-9 * squares);
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(x[i], g["first"][i].get<float>()) << i;
      EXPECT_EQ(x[n - 8 + i], g["last"][i].get<float>()) << i;
    }
  }
}

}  // namespace
}  // namespace qkv
