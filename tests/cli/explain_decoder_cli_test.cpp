// `qkv explain --model smollm2`: a decoder LLM's attention through the same views as MiniLM's.
// --json's weights are checked against transformers' run of the same GGUF file
// (tests/golden/smollm2/forward.json, tests/golden/make_smollm2_goldens.py), and its predicted next
// token against transformers' most likely one (" to").
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/cli_runner.h"
#include "core/gguf.h"
#include "models/model_files.h"
#include "qkv/explain.h"

namespace qkv::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kText = "The animal didn't cross the street because it was too tired";

TEST(ExplainDecoderCli, JsonWeightsAndNextTokenMatchTransformers) {
  const nlohmann::json golden = test::read_golden_json("forward.json", "smollm2")["texts"][1];
  ASSERT_EQ(golden["text"], kText);
  test::smollm2_gguf();  // a missing model fails here, saying how to fetch it
  const CliResult r = run_qkv({"explain", "--model", "smollm2", "--json", kText});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"]["kv_heads"], 3);
  EXPECT_EQ(j["causal"], true);
  const auto n = golden["ids"].size();
  ASSERT_EQ(j["tokens"].size(), n);
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(j["tokens"][i]["id"], golden["ids"][i]) << i;
  double worst = 0;
  for (const auto& [layer, heads] : golden["attention"].items()) {
    const nlohmann::json& w = j["layers"][std::stoul(layer)]["weights"];
    for (std::size_t h = 0; h < 9; ++h)
      for (std::size_t a = 0; a < n; ++a)
        for (std::size_t b = 0; b < n; ++b)
          worst =
              std::max(worst, std::abs(w[h][a][b].get<double>() - heads[h][a][b].get<double>()));
  }
  EXPECT_LE(worst, 1e-4);
  const nlohmann::json& last = golden["positions"].back();
  const int64_t top = last["ids"][0].get<int64_t>();  // transformers' most likely next token
  const GgufFile file = GgufFile::open(test::smollm2_gguf());
  const nlohmann::json& vocab = file.meta("tokenizer.ggml.tokens");
  EXPECT_EQ(vocab[static_cast<std::size_t>(top)], "Ġto");  // byte-level BPE: Ġ is the space
  EXPECT_EQ(j["next_tokens"][0]["token"], " to");
  // Induction scores: one per layer and head, each a mean of weights, and this model has heads
  // that copy what followed a repeated token (a model without them would score near 1/position).
  ASSERT_EQ(j["induction"].size(), 30u);
  double best = 0;
  for (const nlohmann::json& layer : j["induction"])
    for (const nlohmann::json& h : layer) {
      EXPECT_GE(h.get<double>(), 0.0);
      EXPECT_LE(h.get<double>(), 1.0);
      best = std::max(best, h.get<double>());
    }
  EXPECT_GT(best, 0.5);
}

// "🙂" is three byte-level tokens, none a whole character: --json failed with the JSON library's
// "[json.exception.type_error.316] incomplete UTF-8 string" (exit 1, issue 26's last sweep). A
// partial character is U+FFFD, as in the HTML report and Python.
TEST(ExplainDecoderCli, JsonShowsTokensThatHoldPartOfACharacter) {
  const auto r = testing::run_qkv({"explain", "--model", "smollm2", "a 🙂 ✓", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json j = nlohmann::json::parse(r.out);
  std::string joined;
  for (const auto& t : j["tokens"]) joined += t["text"].get<std::string>();
  EXPECT_NE(joined.find("\xEF\xBF\xBD"), std::string::npos) << joined;  // U+FFFD
  EXPECT_EQ(joined.rfind("a", 0), 0u) << joined;
}

TEST(ExplainDecoderCli, TerminalShowsGroupedHeadsSinksAndTheNextToken) {
  test::smollm2_gguf();
  const CliResult r = run_qkv({"explain", "--model", "smollm2", kText});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("30 layers × 9 heads, head dim 64"));
  EXPECT_THAT(r.out, HasSubstr("focus \"it\" (token 8)"));
  EXPECT_THAT(r.out, HasSubstr("h0–h2 read kv 0, h3–h5 read kv 1, h6–h8 read kv 2"));
  EXPECT_THAT(r.out, HasSubstr("Attention sinks"));
  EXPECT_THAT(r.out, HasSubstr("Induction heads"));
  EXPECT_THAT(r.out, HasSubstr("\" to\""));
  // The first token is the sink, not a word "it" chose: the heads that look first at another
  // word are grouped under real words, "because" first (61 of 270 heads, 38 of them), each
  // group at most three lines of 80 columns.
  EXPECT_THAT(r.out, HasSubstr("61 of 270 heads look first at another word than \"it\":\n"
                               "  because    ← L1h2 .96, L11h0 .92,"));
  EXPECT_THAT(r.out, HasSubstr("… 21 more\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("  The        ←")));
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    EXPECT_LE(explain::display_width(line), 80) << line;
  // The report is given the 3 shared key/value heads, not 9 copies, and names the grouping.
  const std::string html = std::filesystem::temp_directory_path() / "qkv-decoder-report.html";
  const CliResult report = run_qkv({"explain", "--model", "smollm2", "--html", html, kText});
  ASSERT_EQ(report.exit_code, 0) << report.describe();
  std::ifstream in(html);
  const std::string page{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::filesystem::remove(html);
  EXPECT_THAT(page, HasSubstr("\"H\":9,\"Hk\":3"));
  EXPECT_THAT(page, HasSubstr("the 9 query heads of a layer share 3 key/value heads (grouped-query "
                              "attention): h0–h2 read kv 0, h3–h5 read kv 1, h6–h8 read kv 2"));
  const CliResult pair = run_qkv({"explain", "--model", "smollm2", "A", "B"});
  EXPECT_EQ(pair.exit_code, 2) << pair.describe();
  EXPECT_THAT(pair.err, HasSubstr("a decoder reads one text"));
  // The step view lists the keys "it" (token 8) may see and names the later ones masked.
  const CliResult step =
      run_qkv({"explain", "--model", "smollm2", "--layer", "17", "--head", "3", kText});
  ASSERT_EQ(step.exit_code, 0) << step.describe();
  EXPECT_THAT(step.out, HasSubstr("     8 it  "));
  EXPECT_THAT(step.out, Not(HasSubstr("     9 was  ")));
  EXPECT_THAT(step.out, HasSubstr("tokens 9–11 come later: masked (−∞ before the softmax)"));
  const CliResult head =
      run_qkv({"explain", "--model", "smollm2", "--layer", "30", "--head", "0", kText});
  EXPECT_EQ(head.exit_code, 2) << head.describe();
}

}  // namespace
}  // namespace qkv::testing
