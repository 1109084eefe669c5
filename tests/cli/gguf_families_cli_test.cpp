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

// A GGUF file of another architecture: its name and the ones qkv runs, on one line, exit 2.
TEST(GgufFamilyCliErrors, AnUnknownArchitectureIsNamed) {
  std::ifstream in(tiny("qwen2"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
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
