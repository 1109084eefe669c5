// `qkv generate`: SmolLM2-135M continues a prompt. The expected continuation is transformers'
// most likely next token on the same file (tests/golden/smollm2/forward.json, made by
// tests/golden/make_smollm2_goldens.py): " Paris" (id 7042) after "The capital of France is".
// With --chat, the answers are transformers' greedy ones to the same chat prompts
// (tests/golden/smollm2/chat_prompts.json, tests/golden/make_smollm2_chat_goldens.py).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/cli_expect.h"
#include "cli/cli_runner.h"
#include "models/model_files.h"
#include "models/smollm2.h"
#include "models/smollm2_copy.h"

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

// Our logits are within 1e-3 of transformers' relative to each step's largest |logit|
// (models/llama_test.cpp), so where the golden's top two differ by more than twice that, the
// greedy choice cannot differ; the answer is compared up to the first step that is closer.
TEST(GenerateCli, ChatAnswersAsTransformersGreedyRun) {
  const nlohmann::json golden = test::read_golden_json("chat_prompts.json", "smollm2");
  test::smollm2_gguf();
  for (const nlohmann::json& c : golden.at("cases")) {
    const nlohmann::json& messages = c.at("messages");
    const auto answer = c.at("greedy_ids").get<std::vector<int32_t>>();
    const auto margins = c.at("greedy_margins").get<std::vector<double>>();
    std::size_t sure = 0;
    while (sure < margins.size() && margins[sure] > 2e-3) ++sure;
    // sure > answer.size(): the step after the answer, its end (<|im_end|>), is sure too.
    const bool whole = sure > answer.size();
    const std::vector<int32_t> expected(answer.begin(),
                                        answer.begin() + std::min(sure, answer.size()));
    ASSERT_GE(expected.size(), 2u) << c.at("text");
    std::vector<std::string> args = {"generate", "--chat",
                                     messages.back().at("content").get<std::string>()};
    if (messages.size() == 2)
      args.insert(args.end(), {"--system", messages[0].at("content").get<std::string>()});
    args.insert(args.end(), {"--max-tokens", std::to_string(whole ? 8 : expected.size())});
    const CliResult r = run_qkv(args);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(r.out, test::smollm2_tokenizer().decode(expected) + "\n") << r.describe();
  }
  // The first answer is whole: "The capital of France is Paris." and the end of the turn.
  EXPECT_EQ(golden["cases"][0]["greedy_text"], "The capital of France is Paris.");
}

TEST(GenerateCli, SystemNeedsChatAndAChatMLTemplate) {
  const CliResult alone = run_qkv({"generate", "hi", "--system", "Be brief."});
  EXPECT_EQ(alone.exit_code, 2) << alone.describe();
  EXPECT_THAT(alone.err, HasSubstr("--system requires --chat"));
  const CliResult empty = run_qkv({"generate", "--chat", "--system", "", "hi"});
  EXPECT_EQ(empty.exit_code, 2) << empty.describe();
  EXPECT_THAT(empty.err, HasSubstr("--system is empty"));
  // A model whose template is not ChatML: --chat is refused, plain text still continues.
  const std::string other = test::smollm2_with_other_template();
  const CliResult chat = run_qkv({"generate", "--chat", "hi", "--model", other});
  EXPECT_EQ(chat.exit_code, 1) << chat.describe();
  EXPECT_EQ(chat.err, "qkv: error: " + other +
                          ": its chat template is not ChatML (<|im_start|>role … <|im_end|>); qkv "
                          "knows only that family\n");
  const CliResult plain =
      run_qkv({"generate", "The capital of France is", "--max-tokens", "1", "--model", other});
  ASSERT_EQ(plain.exit_code, 0) << plain.describe();
  EXPECT_EQ(plain.out, "The capital of France is Paris\n");
}

}  // namespace
}  // namespace qkv::testing
