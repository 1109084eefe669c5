// `qkv train --model rnnsearch` and `qkv explain --model` on what it saved: the options it refuses,
// a tiny run, the query/key/value walkthrough with numbers that add up, and the report's one block.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "cli/cli_expect.h"
#include "cli/cli_runner.h"
#include "cli/report_data.h"

namespace qkv {
namespace {

using testing::expect_one_line_error;
using ::testing::HasSubstr;
using testing::run_qkv;

std::vector<std::string> tiny_rnn(std::vector<std::string> more) {
  std::vector<std::string> args = {
      "train", "--task",  "copy", "--model",         "rnnsearch", "--steps",   "20", "--d-model",
      "16",    "--batch", "16",   "--test-examples", "20",        "--threads", "1"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(TrainRnnSearchCli, RefusesTransformerOptionsAndUnknownModels) {
  expect_one_line_error(
      run_qkv({"train", "--task", "copy", "--model", "rnnsearch", "--layers", "2"}), 2,
      "--layers does not apply to --model rnnsearch");
  expect_one_line_error(
      run_qkv({"train", "--task", "copy", "--model", "rnnsearch", "--heads", "2"}), 2,
      "--heads does not apply to --model rnnsearch");
  expect_one_line_error(
      run_qkv({"train", "--task", "copy", "--model", "lstm"}), 2,
      "--model lstm is not a model qkv trains; expected transformer, rnnsearch or perceiver");
  expect_one_line_error(
      run_qkv({"train", "--task", "copy", "--model", "rnnsearch", "--d-model", "15"}), 2,
      "expected an even width");
}

TEST(TrainRnnSearchCli, TinyRunExplainsItsQueryKeysAndValues) {
  const std::string out =
      (std::filesystem::temp_directory_path() / "qkv-train-rnnsearch-cli.safetensors").string();
  std::filesystem::remove(out);
  const auto train = run_qkv(tiny_rnn({"--json", "--out", out}));
  ASSERT_EQ(train.exit_code, 0) << train.describe();
  const auto j = nlohmann::json::parse(train.out);
  EXPECT_EQ(j["model"]["architecture"], "rnnsearch");
  EXPECT_EQ(j["training"]["steps"], 20);

  const auto text = run_qkv({"explain", "--model", out, "--input", "abcdef"});
  ASSERT_EQ(text.exit_code, 0) << text.describe();
  EXPECT_THAT(
      text.out,
      HasSubstr("RNNsearch (Bahdanau et al. 2014)\n  bidirectional GRU encoder 8 + 8 units"));
  EXPECT_THAT(text.out, HasSubstr("│a b c d e f"));
  EXPECT_THAT(text.out, HasSubstr("query   s_{i-1}"));
  EXPECT_THAT(text.out, HasSubstr("values  h_j      the same vectors"));
  EXPECT_THAT(text.out, HasSubstr("There is no W_V"));
  // The worked step counts from 1, as the paper does, and says so (the HTML report counts from 0).
  EXPECT_THAT(text.out, HasSubstr("i and j count from 1, as in the paper"));
  // The worked step's five keys and the rest: their weights add up to 1 (two decimals each).
  const std::regex row(R"(\n +\d+  '.' +\[[^\]]*\] +-?\d+\.\d+ +(\d?\.\d\d) )");
  double sum = 0;
  int rows = 0;
  for (std::sregex_iterator it(text.out.begin(), text.out.end(), row), end; it != end; ++it, ++rows)
    sum += std::stod((*it)[1]);
  const std::smatch rest = [&] {
    std::smatch m;
    std::regex_search(text.out, m, std::regex(R"(\((\d+) more keys?, together α (\d?\.\d\d)\))"));
    return m;
  }();
  ASSERT_EQ(rows, 5) << text.out;
  ASSERT_EQ(rest.size(), 3u) << text.out;
  EXPECT_EQ(rest[1], "1");
  sum += std::stod(rest[2]);
  EXPECT_NEAR(sum, 1.0, 0.031);

  const std::string html_path = out + ".html";
  const auto html = run_qkv({"explain", "--model", out, "--input", "abc", "--html", html_path});
  ASSERT_EQ(html.exit_code, 0) << html.describe();
  const nlohmann::json data = testing::report_data(testing::read_text(html_path));
  ASSERT_EQ(data["blocks"].size(), 1u);
  EXPECT_EQ(data["blocks"][0]["name"], "additive attention (RNNsearch)");
  EXPECT_EQ(data["blocks"][0]["score"], "additive");
  EXPECT_EQ(data["blocks"][0]["keys"].size(), 3u);
  EXPECT_EQ(data["blocks"][0]["d"], 16);
  EXPECT_EQ(data["source"], "rnnsearch");  // the page's box explains additive attention
  std::filesystem::remove(html_path);
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace qkv
