// `qkv explain --model smollm2 --target`: the causal lens through the command — the JSON contract
// scripts rely on ("heads": one entry per layer and head with ablation_logit_change and
// direct_logit_attribution), checked against transformers' numbers (tests/golden/smollm2/lens.json,
// tests/golden/make_smollm2_lens_goldens.py); the terminal's answer in 80 columns; the report's
// lens section; bad input named in one line, exit 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/cli_runner.h"
#include "models/model_files.h"
#include "qkv/explain.h"

namespace qkv::testing {
namespace {

using ::testing::HasSubstr;

constexpr const char* kText = "The capital of France is";

TEST(ExplainLensCli, JsonHeadsAreTransformersAblationsAndAttributionSumsToTheMetric) {
  const nlohmann::json golden = test::read_golden_json("lens.json", "smollm2")["pairs"][0];
  ASSERT_EQ(golden["clean_text"], kText);
  const CliResult r = run_qkv(
      {"explain", "--model", "smollm2", kText, "--target", " Paris", "--versus", " Rome", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["heads"].size(), 270u);
  const double clean = golden["clean"]["logit"].get<double>();
  EXPECT_NEAR(j["lens"]["clean"]["logit"].get<double>(), clean, 1e-3 * std::abs(clean));
  int checked = 0;
  for (const nlohmann::json& g : golden["ablation"]) {
    const nlohmann::json& e = j["heads"][g["layer"].get<std::size_t>() * 9 + g["head"].get<std::size_t>()];
    ASSERT_EQ(e["layer"], g["layer"]);
    ASSERT_EQ(e["head"], g["head"]);
    // zero-ablated − clean logit of the target, transformers' against qkv's (CONVENTIONS §1.5).
    const double expected = g["zero"][0].get<double>() - clean;
    EXPECT_NEAR(e["ablation_logit_change"].get<double>(), expected, 1e-3 * std::abs(clean))
        << "L" << g["layer"] << "h" << g["head"];
    ++checked;
  }
  EXPECT_GE(checked, 12);
  // The attribution's parts — every head, every MLP, the embedding — sum to the metric.
  double sum = j["lens"]["attribution"]["embedding"].get<double>();
  for (const nlohmann::json& e : j["heads"]) sum += e["direct_logit_attribution"].get<double>();
  for (const nlohmann::json& m : j["lens"]["attribution"]["mlp"]) sum += m.get<double>();
  const double metric = j["lens"]["clean"]["metric"].get<double>();
  EXPECT_NEAR(sum, metric, 1e-3 * std::abs(metric));
  EXPECT_EQ(j["lens"]["logit_lens"].size(), 30u);
  EXPECT_EQ(j["lens"]["logit_lens"][29]["top"][0]["token"], " Paris");
}

TEST(ExplainLensCli, TerminalNamesTheHeadThatCarriedParis) {
  const CliResult r = run_qkv({"explain", "--model", "smollm2", kText, "--target", " Paris",
                               "--versus", " Rome", "--knockout", "23.4:4>3"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("Which heads carried \" Paris\"?"));
  // L23h4 first by ablation: zeroed −5.40 (transformers: 1.914 − 7.313), looking at "France".
  EXPECT_THAT(r.out, HasSubstr("  L23h4       −5.40    (−3.61)     +3.01           \"France\" 0.90"));
  EXPECT_THAT(r.out, HasSubstr("Knockout of 1 edge (23.4:4>3;"));
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    EXPECT_LE(explain::display_width(line), 80) << line;
  const std::string html = std::filesystem::temp_directory_path() / "qkv-lens-report.html";
  const CliResult report =
      run_qkv({"explain", "--model", "smollm2", kText, "--target", " Paris", "--html", html});
  ASSERT_EQ(report.exit_code, 0) << report.describe();
  std::ifstream in(html);
  const std::string page{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::filesystem::remove(html);
  EXPECT_THAT(page, HasSubstr("\"lens\":{\"heads\":[{\"ablation_log_prob_change\""));
  EXPECT_THAT(page, HasSubstr("id=\"lens-grid\""));
}

TEST(ExplainLensCli, BadLensInputIsNamedInOneLine) {
  const auto expect_usage = [](std::vector<std::string> args, const std::string& message) {
    const CliResult r = run_qkv(args);
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_THAT(r.err, HasSubstr(message)) << r.describe();
  };
  expect_usage({"explain", "--model", "smollm2", kText, "--target", " Parisian capital"},
               "--target \" Parisian capital\" is 3 tokens (\" Paris\" + \"ian\" + \" capital\"); "
               "expected one token of the model's vocabulary");
  expect_usage({"explain", "--model", "smollm2", kText, "--corrupt", "The capital of Italy is not"},
               "is 6 tokens and the text 5; expected prompts of equal token length");
  expect_usage({"explain", "--model", "smollm2", kText, "--knockout", "1.9:4>0"},
               "--knockout item \"1.9:4>0\": head \"9\"; expected 0 to 8 or *");
  expect_usage({"explain", "--model", "smollm2", kText, "--circuit", "30.0"},
               "--circuit's layer 30 is out of range; this model has layers 0–29");
  expect_usage({"explain", "a sentence", "--target", " x"},
               "--target needs a decoder, which predicts a next token");
  expect_usage({"explain", "--model", "smollm2", kText, "--target", " Paris", "--versus", " Paris"},
               "--versus is the target itself");
}

}  // namespace
}  // namespace qkv::testing
