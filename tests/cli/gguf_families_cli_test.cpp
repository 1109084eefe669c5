// `qkv explain` and `qkv generate` on the tiny GGUF model of each family
// (tests/golden/gguf_families, made by tests/golden/make_gguf_family_goldens.py): the terminal
// names the family's attention features, the JSON carries them, generation runs; a file of an
// architecture qkv does not run is one line, exit 2. The numbers are checked against transformers
// in tests/models/gguf_families_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_expect.h"
#include "cli/cli_runner.h"
#include "core/gguf.h"
#include "models/tiny_llama_gguf.h"

namespace qkv {
namespace {

using testing::expect_one_line_error;
using ::testing::HasSubstr;
using testing::run_qkv;

std::string tiny(const std::string& family) {
  return std::string(QKV_SOURCE_DIR) + "/tests/golden/gguf_families/tiny-" + family + ".gguf";
}

struct Case {
  std::string file, architecture, feature;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.file; }

class GgufFamilyCli : public ::testing::TestWithParam<Case> {};

TEST_P(GgufFamilyCli, ExplainNamesTheFamilysAttentionFeatures) {
  const Case& c = GetParam();
  const auto r = run_qkv({"explain", "--model", tiny(c.file), "the cat sat on the mat"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr(c.architecture + ":")) << r.out;
  EXPECT_THAT(r.out, HasSubstr(c.feature)) << r.out;

  const auto j = run_qkv({"explain", "--model", tiny(c.file), "the cat sat", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.describe();
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["model"]["architecture"], c.architecture);
  bool said = false;
  for (const auto& f : doc["model"]["attention_features"])
    said = said || f.get<std::string>().find(c.feature) != std::string::npos;
  EXPECT_TRUE(said) << doc["model"].dump();
}

TEST_P(GgufFamilyCli, GenerateRuns) {
  const auto r = run_qkv({"generate", "--model", tiny(GetParam().file), "the cat",
                          "--max-tokens", "4"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
}

INSTANTIATE_TEST_SUITE_P(
    Families, GgufFamilyCli,
    ::testing::Values(Case{"llama3", "llama", "Llama 3.1 frequency factors"},
                    Case{"llama2", "llama", "RoPE base 10,000, pairs (2i, 2i+1)"},
                    Case{"qwen2", "qwen2", "q, k and v add biases"},
                    Case{"qwen3", "qwen3", "RMSNorm on each head's q and k before RoPE"},
                    Case{"gemma3", "gemma3", "sliding window of 4 positions"}),
    [](const ::testing::TestParamInfo<Case>& i) { return i.param.file; });

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {(std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()};
}

// A scratch file of `bytes`, removed with the object.
struct Scratch {
  std::string path;
  explicit Scratch(const std::string& bytes, const std::string& tag)
      : path((std::filesystem::temp_directory_path() /
              ("qkv-" + tag + "-" + std::to_string(::getpid()) + ".gguf"))
                 .string()) {
    std::ofstream(path, std::ios::binary) << bytes;
  }
  ~Scratch() { std::filesystem::remove(path); }
};

void put_u64(std::string& bytes, std::size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// Where tensor `name`'s info holds its type (u32) and offset (u64): after the name, its rank and
// its dimensions (core/gguf.h's layout).
std::pair<std::size_t, std::size_t> type_and_offset(const std::string& bytes,
                                                    const std::string& name, std::size_t dims) {
  const std::size_t at = bytes.find(name) + name.size() + 4 + 8 * dims;
  return {at, at + 4};
}

// Lying files of a real family (qwen3): each a line naming what is wrong, exit 2 — as the fuzz
// target (tests/fuzz/gguf_fuzz.cpp, its corpus holding these files) finds no crash on any.
TEST(GgufFamilyCliErrors, LyingCountsOffsetsAndUnknownTypesAreOneLine) {
  const std::string good = bytes_of(tiny("qwen3"));
  std::string more = good;
  put_u64(more, 8, GgufFile::open(tiny("qwen3")).tensors().size() + 1);  // one more tensor
  const Scratch a(more, "count");
  const auto r = run_qkv({"explain", "--model", a.path, "hello"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("--model " + a.path + ": ")) << r.err;

  std::string far = good;
  put_u64(far, type_and_offset(far, "blk.1.attn_q.weight", 2).second, uint64_t{1} << 40);
  const Scratch b(far, "offset");
  expect_one_line_error(run_qkv({"explain", "--model", b.path, "hello"}), 2,
                        "--model " + b.path + ": tensor \"blk.1.attn_q.weight\"");

  std::string q2k = good;
  q2k[type_and_offset(q2k, "blk.0.ffn_down.weight", 2).first] = 10;  // Q2_K
  const Scratch c(q2k, "q2k");
  expect_one_line_error(run_qkv({"explain", "--model", c.path, "hello"}), 2, "(Q2_K)");
}

// A 10 MB chat template: the model runs, --chat is refused on one line, exit 2.
TEST(GgufFamilyCliErrors, ATenMegabyteChatTemplateRefusesChat) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("qkv-template-" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  test::tiny_llama_gguf()
      .set("tokenizer.chat_template", test::gguf_str(std::string(10'000'000, 'x')))
      .write(path);
  EXPECT_EQ(run_qkv({"generate", "--model", path, "hello", "--max-tokens", "2"}).exit_code, 0);
  expect_one_line_error(run_qkv({"generate", "--model", path, "--chat", "hello"}), 2,
                        "is 10000000 bytes; expected at most 1048576");
  std::filesystem::remove(path);
}

// A GGUF file of another architecture: its name and the ones qkv runs, on one line, exit 2.
TEST(GgufFamilyCliErrors, AnUnknownArchitectureIsNamed) {
  std::string bytes = bytes_of(tiny("qwen2"));
  // "qwen2" → "qwen9" in general.architecture (its value follows the key).
  const std::size_t key = bytes.find("general.architecture");
  ASSERT_NE(key, std::string::npos);
  const std::size_t value = bytes.find("qwen2", key);
  ASSERT_NE(value, std::string::npos);
  bytes[value + 4] = '9';
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("qkv-arch-" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  std::ofstream(path, std::ios::binary) << bytes;
  expect_one_line_error(run_qkv({"explain", "--model", path, "hello"}), 2,
                        "architecture \"qwen9\", which qkv does not run; expected one of llama, "
                        "qwen2, qwen3, gemma3");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace qkv

namespace qkv {
namespace {

// A limit the model alone passes: the refusal says the model is too large, not the text too long.
TEST(GgufFamilyCliErrors, AModelLargerThanTheLimitIsSaidToBe) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"explain", "--model", tiny("qwen3"), "hello", "--memory-limit",
                                 "1M"},
        std::vector<std::string>{"generate", "--model", tiny("qwen3"), "hello", "--memory-limit",
                                 "1M"}})
    expect_one_line_error(run_qkv(args), 2,
                          "over the limit of 1.0 MiB (--memory-limit); expected a smaller model: "
                          "the model alone needs about");
}

}  // namespace
}  // namespace qkv

namespace qkv {
namespace {

// A target is one token without the BOS a whole text starts with (Llama 3 and Gemma add one): the
// lens runs on a model whose tokenizer adds BOS, and its attribution sums.
TEST(GgufFamilyCliLens, TargetsAreTokensWithoutTheBos) {
  for (const std::string family : {"llama3", "gemma3"}) {
    const auto r = run_qkv({"explain", "--model", tiny(family), "the cat sat on the mat",
                            "--target", " the"});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_THAT(r.out, HasSubstr("The parts sum to the logit")) << family;
  }
}

}  // namespace
}  // namespace qkv
