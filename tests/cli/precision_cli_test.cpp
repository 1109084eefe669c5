// `--precision fp32 | bf16` on the commands that run attention or the sentence model: `qkv
// attend` (the reference and fused paths take it; JSON and the heading say it) and `qkv embed`
// (with --compare-fp32, the largest cosine distance of the bf16 embeddings to fp32's). A bad
// value is one line naming the option, exit 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_expect.h"
#include "cli/cli_runner.h"

namespace qkv {
namespace {

using testing::expect_one_line_error;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_qkv;

// q, k rows whose bf16 rounding is visible: 1 + 2⁻¹⁰ is not a bfloat16 (it rounds to 1).
const std::vector<std::string> kInline = {"--query",  "[[1.0009765625, 0.3], [0.2, 0.7]]",
                                          "--keys",   "[[1, 0], [0.5, 0.25], [0.1, 1.1]]",
                                          "--values", "[[1.0009765625], [2], [3]]"};

std::vector<std::string> attend(std::vector<std::string> extra) {
  std::vector<std::string> args = {"attend"};
  args.insert(args.end(), kInline.begin(), kInline.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(PrecisionCli, AttendTakesBf16AndSaysSo) {
  const auto fp32 = run_qkv(attend({"--json"}));
  ASSERT_EQ(fp32.exit_code, 0) << fp32.describe();
  const auto bf16 = run_qkv(attend({"--json", "--precision", "bf16"}));
  ASSERT_EQ(bf16.exit_code, 0) << bf16.describe();
  const nlohmann::json a = nlohmann::json::parse(fp32.out), b = nlohmann::json::parse(bf16.out);
  EXPECT_FALSE(a.contains("precision"));  // the default's JSON is what it was
  EXPECT_EQ(b["precision"], "bf16");
  // The scores are of the rounded inputs: q₀·k₀ = 1 exactly in bf16, 1.0009765625 in fp32.
  EXPECT_EQ(b["scores"][0][0].get<double>(), 1.0);
  EXPECT_EQ(a["scores"][0][0].get<double>(), 1.0009765625);
  EXPECT_NE(a["out"], b["out"]);
  const auto text = run_qkv(attend({"--precision", "bf16"}));
  ASSERT_EQ(text.exit_code, 0) << text.describe();
  EXPECT_THAT(text.out,
              HasSubstr(", precision bf16, output by the reference path\nnote: q, k and v "
                        "were rounded to bfloat16"));
  EXPECT_THAT(run_qkv(attend({})).out, Not(HasSubstr("precision")));
  // --precision fp32 is the default, bit for bit.
  EXPECT_EQ(run_qkv(attend({"--json", "--precision", "fp32"})).out, fp32.out);
}

TEST(PrecisionCli, AttendRefusesAnUnknownPrecision) {
  expect_one_line_error(run_qkv(attend({"--precision", "fp16"})), 2,
                        "--precision 'fp16' is unknown; expected fp32 or bf16");
  const auto help = run_qkv({"attend", "--help"});
  EXPECT_THAT(help.out, HasSubstr("--precision bf16"));
}

TEST(PrecisionCli, EmbedInBf16ComparesToFp32WhenAsked) {
  const std::vector<std::string> texts = {"This is an example sentence",
                                          "The quick brown fox jumps over the lazy dog"};
  std::vector<std::string> args = {"embed", "--json", "--precision", "bf16", "--compare-fp32"};
  args.insert(args.end(), texts.begin(), texts.end());
  const auto r = run_qkv(args);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("bf16 against fp32: largest cosine distance (1 − cos)"));
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["precision"], "bf16");
  const double distance = j["compare_fp32"]["max_cosine_distance"].get<double>();
  EXPECT_GT(distance, 0);
  EXPECT_LE(distance, 1e-2);
  // The same number from the embeddings of both runs.
  std::vector<std::string> plain = {"embed", "--json"};
  plain.insert(plain.end(), texts.begin(), texts.end());
  const nlohmann::json f = nlohmann::json::parse(run_qkv(plain).out);
  EXPECT_FALSE(f.contains("precision"));
  double worst = 0;
  for (int i = 0; i < 2; ++i) {
    double dot = 0, na = 0, nb = 0;
    for (int d = 0; d < 384; ++d) {
      const double x = j["embeddings"][i]["vector"][d], y = f["embeddings"][i]["vector"][d];
      dot += x * y, na += x * x, nb += y * y;
    }
    worst = std::max(worst, 1 - dot / std::sqrt(na * nb));
  }
  EXPECT_NEAR(distance, worst, 1e-6);
}

TEST(PrecisionCli, EmbedRefusesABadPrecisionAndACompareWithoutBf16) {
  expect_one_line_error(run_qkv({"embed", "ok", "--precision", "half"}), 2, "--precision");
  expect_one_line_error(run_qkv({"embed", "ok", "--compare-fp32"}), 2,
                        "--compare-fp32 compares bf16 embeddings with fp32 ones; expected it "
                        "with --precision bf16");
}

}  // namespace
}  // namespace qkv
