// --weights (a decoder's matrices as the file's blocks, or float32) and --decode (a new token's
// pass on blocks in int8 or float32), on generate, explain and bench model (issue 30).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_expect.h"
#include "cli/cli_runner.h"
#include "models/model_files.h"

namespace qkv::testing {
namespace {

using ::testing::HasSubstr;

TEST(WeightsCli, TheOptionsTakeTheirWordsOnly) {
  expect_one_line_error(run_qkv({"generate", "hi", "--weights", "f16"}), 2,
                        "--weights: 'f16' is not one of file, float32; expected one of them");
  expect_one_line_error(run_qkv({"generate", "hi", "--decode", "int4"}), 2,
                        "--decode: 'int4' is not one of int8, float32; expected one of them");
  expect_one_line_error(run_qkv({"explain", "--weights", "Float32"}), 2,
                        "--weights: 'Float32' is not one of file, float32");
  expect_one_line_error(run_qkv({"explain", "a sentence", "--weights", "float32"}), 2,
                        "--weights float32 is for a decoder's GGUF file; expected --model smollm2 "
                        "or a GGUF file");
  expect_one_line_error(run_qkv({"bench", "model", "--decode", ""}), 2,
                        "--decode: the value is empty; expected one of int8, float32");
}

// The chat example of the help: the same answer whichever way the matrices are kept and the new
// tokens multiplied (the first token is the prompt's float32 pass either way).
TEST(WeightsCli, TheChatExampleAnswersTheSameEveryWay) {
  test::smollm2_gguf();
  for (const std::vector<std::string>& way :
       {std::vector<std::string>{}, {"--decode", "float32"}, {"--weights", "float32"}}) {
    std::vector<std::string> args = {"generate", "--chat", "What is the capital of France?",
                                     "--max-tokens", "8"};
    args.insert(args.end(), way.begin(), way.end());
    const CliResult r = run_qkv(args);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(r.out, "The capital of France is Paris.\n") << r.describe();
  }
}

// explain says which path ran: the file's types, kept as blocks, every product float32 — or
// dequantized at load; the numbers are the same bits either way.
TEST(WeightsCli, ExplainSaysHowTheWeightsWereKeptAndTheNumbersAreTheSame) {
  test::smollm2_gguf();
  const CliResult blocks =
      run_qkv({"explain", "The capital of France is", "--model", "smollm2", "--json"});
  const CliResult dense = run_qkv({"explain", "The capital of France is", "--model", "smollm2",
                                   "--json", "--weights", "float32"});
  ASSERT_EQ(blocks.exit_code, 0) << blocks.describe();
  ASSERT_EQ(dense.exit_code, 0) << dense.describe();
  nlohmann::json a = nlohmann::json::parse(blocks.out), b = nlohmann::json::parse(dense.out);
  EXPECT_EQ(a["model"]["weights"],
            "Q4_1 (210 matrices), Q8_0 (1) as the file's blocks; every product in float32, the "
            "bits of --weights float32");
  EXPECT_EQ(b["model"]["weights"],
            "Q4_1 (210 matrices), Q8_0 (1) dequantized to float32 at load (--weights float32)");
  a["model"].erase("weights");
  b["model"].erase("weights");
  EXPECT_EQ(a, b);  // every score, weight, logit and lens reading
  const CliResult text = run_qkv({"explain", "The capital of France is", "--model", "smollm2"});
  EXPECT_THAT(text.out, HasSubstr("weights: Q4_1 (210 matrices), Q8_0 (1) as the file's blocks"));
  expect_fits_80_columns(text.out);
}

}  // namespace
}  // namespace qkv::testing
