// `qkv generate`: SmolLM2-135M continues a prompt. The expected continuation is transformers'
// most likely next token on the same file (tests/golden/smollm2/forward.json, made by
// tests/golden/make_smollm2_goldens.py): " Paris" (id 7042) after "The capital of France is".
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/cli_expect.h"
#include "cli/cli_runner.h"
#include "models/model_files.h"

namespace qkv::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(GenerateCli, GreedyContinuationIsTransformersMostLikelyToken) {
  const nlohmann::json golden = test::read_golden_json("forward.json", "smollm2");
  const nlohmann::json& last = golden["texts"][0]["positions"].back();
  ASSERT_EQ(golden["texts"][0]["text"], "The capital of France is");
  ASSERT_EQ(last["ids"][0], 7042);  // " Paris" in SmolLM2's vocabulary
  test::smollm2_gguf();             // a missing model fails here, saying how to fetch it
  const CliResult r = run_qkv({"generate", "The capital of France is", "--max-tokens", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out, "The capital of France is Paris\n");
  const CliResult more = run_qkv({"generate", "The capital of France is", "--max-tokens", "6"});
  ASSERT_EQ(more.exit_code, 0) << more.describe();
  EXPECT_THAT(more.out, StartsWith("The capital of France is Paris"));
}

TEST(GenerateCli, BadInputIsOneLineAndAnExitCode) {
  const CliResult empty = run_qkv({"generate", ""});
  EXPECT_EQ(empty.exit_code, 2) << empty.describe();
  EXPECT_THAT(empty.err, HasSubstr("the prompt is empty"));
  const CliResult device = run_qkv({"generate", "hi", "--model", "/dev/zero.gguf"});
  EXPECT_EQ(device.exit_code, 1) << device.describe();
  const CliResult zero = run_qkv({"generate", "hi", "--model", "/dev/zero"});
  EXPECT_NE(zero.exit_code, 0) << zero.describe();
  EXPECT_THAT(zero.err, HasSubstr("/dev/zero"));
  const CliResult tokens = run_qkv({"generate", "hi", "--max-tokens", "0"});
  EXPECT_EQ(tokens.exit_code, 2) << tokens.describe();
}

}  // namespace
}  // namespace qkv::testing
