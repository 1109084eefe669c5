// `qkv explain --model FILE.safetensors --step N --target ...`: the causal lens of a trained
// encoder–decoder's output step end to end — the JSON (the lens's heads under "lens", beside the
// alignment's "heads"), the terminal's answer, and the errors (one line, exit 2). The numbers are
// checked against the model itself in tests/explain/step_lens_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_expect.h"
#include "cli/cli_runner.h"

namespace qkv {
namespace {

using testing::expect_one_line_error;
using ::testing::HasSubstr;
using testing::run_qkv;

// A 2-block reverse model trained a few steps, saved once for the suite.
class ExplainStepCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = (std::filesystem::temp_directory_path() /
             ("qkv-step-cli-" + std::to_string(::getpid()) + ".safetensors"))
                .string();
    const auto r = run_qkv({"train", "--task", "reverse", "--steps", "30", "--layers", "2",
                            "--heads", "2", "--d-model", "16", "--batch", "16", "--test-examples",
                            "20", "--threads", "1", "--out", path_});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
  }
  static void TearDownTestSuite() { std::filesystem::remove(path_); }
  static std::string path_;
};
std::string ExplainStepCli::path_;

TEST_F(ExplainStepCli, JsonLensesTheStepBesideTheAlignment) {
  const auto r = run_qkv({"explain", "--model", path_, "--input", "abcd", "--step", "2",
                          "--corrupt", "abcb", "--knockout", "1.*:1>3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["heads"].size(), 2u);  // the alignment of each cross-attention head, as before
  const auto& lens = j["lens"];
  EXPECT_EQ(lens["step"], 2);
  EXPECT_EQ(lens["layers"], nlohmann::json({"L0 self", "L0 cross", "L1 self", "L1 cross"}));
  ASSERT_EQ(lens["tokens"].size(), 2u);
  EXPECT_EQ(lens["tokens"][0], "<s>");
  EXPECT_EQ(lens["tokens"][1], j["steps"][0]);        // the output before step 2
  EXPECT_EQ(lens["target"]["token"], j["steps"][1]);  // by default, what it wrote there
  ASSERT_EQ(lens["heads"].size(), 8u);
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(lens["heads"][i]["layer"], i / 2);
    EXPECT_EQ(lens["heads"][i]["head"], i % 2);
    EXPECT_TRUE(lens["heads"][i].contains("patching_restored"));
  }
  const auto& a = lens["attribution"];
  double total = a["embedding"].get<double>() + a["constant"].get<double>();
  for (std::size_t l = 0; l < 4; ++l)
    total += a["attention"][l].get<double>() + a["mlp"][l].get<double>();
  const double metric = lens["clean"]["metric"].get<double>();
  EXPECT_NEAR(total, metric, 1e-4 * std::max(1.0, std::abs(metric)));
  EXPECT_EQ(lens["knockout"]["edges"].size(), 2u);  // 2 heads, query 1, key 3 (after it: a source)
  EXPECT_EQ(lens["patching"]["corrupt"], "abcb");
  EXPECT_EQ(lens["logit_lens"].size(), 4u);
}

TEST_F(ExplainStepCli, TerminalNamesEachAttentionOfTheStep) {
  const auto r = run_qkv({"explain", "--model", path_, "--input", "abcd", "--step", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("The token the model wrote at output step 1 (the"));
  EXPECT_THAT(r.out, HasSubstr("L1 cross h"));
  EXPECT_THAT(r.out, HasSubstr("The parts sum to the logit"));
  EXPECT_THAT(r.out, HasSubstr("Cross-attention of decoder layer"));  // the alignment, first
}

TEST_F(ExplainStepCli, BadStepTargetCorruptAndCircuitExit2OnOneLine) {
  expect_one_line_error(run_qkv({"explain", "--model", path_, "--input", "abcd", "--step", "40"}),
                        2, "--step: output step 40 of \"abcd\"; its decoding has steps 1 to");
  expect_one_line_error(run_qkv({"explain", "--model", path_, "--input", "abcd", "--target", "ab"}),
                        2, "--target \"ab\" is 2 tokens");
  expect_one_line_error(
      run_qkv({"explain", "--model", path_, "--input", "abcd", "--corrupt", "ab!d"}), 2,
      "--corrupt \"ab!d\": the character '!'");
  expect_one_line_error(
      run_qkv({"explain", "--model", path_, "--input", "abcd", "--circuit", "0.1"}), 2,
      "--circuit \"0.1\" reads a decoder's weights");
  expect_one_line_error(run_qkv({"explain", "--model", "smollm2", "Hi", "--step", "2"}), 2,
                        "--step 2 applies to a model qkv train made");
}

}  // namespace
}  // namespace qkv
