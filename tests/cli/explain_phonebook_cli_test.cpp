// `qkv explain --model lookup.safetensors --input "? b a3 b7 c1"`: the phonebook read off a lookup
// model's attention (explain::phonebook, src/explain/readings/phonebook.cpp) in the terminal and
// in the HTML report. The model here is trained for 20 steps only, so the lines' structure is asserted, not a learned lookup.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "cli/cli_runner.h"

namespace qkv {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_qkv;

TEST(ExplainPhonebookCli, ALookupModelIsReadAsAPhonebook) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string model = dir + "/qkv-phonebook-lookup.safetensors";
  const std::string html = dir + "/qkv-phonebook-report.html";
  std::filesystem::remove(model);
  const auto train =
      run_qkv({"train", "--task", "lookup", "--steps", "20", "--d-model", "16", "--batch", "16",
               "--test-examples", "10", "--threads", "1", "--out", model});
  ASSERT_EQ(train.exit_code, 0) << train.describe();

  const auto r = run_qkv({"explain", "--model", model, "--input", "? b a3 b7 c1", "--html", html});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("The phonebook, read off the attention:"));
  // The binding: each number against the key before it, a weight in [0, 1].
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("bind +encoder layer [01], head [0-3]: each number attends to the key "
                        "before it\n +3→a [01]\\.[0-9]{2} +7→b [01]\\.[0-9]{2} +1→c "
                        "[01]\\.[0-9]{2}\n")))
      << r.out;
  // The match: the query 'b' against the three entries, the asked one marked.
  EXPECT_THAT(r.out, HasSubstr("match  decoder layer "));
  EXPECT_THAT(r.out, HasSubstr(": the query 'b' against each entry"));
  // Each entry's weight, and in brackets the one number named in the line above: the logit of
  // the entry's number.
  EXPECT_THAT(r.out, HasSubstr("(its weight on name + number, and the number's logit q·k/√d_k)"));
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("\n +a3 [01]\\.[0-9]{2} \\(logit -?[0-9.]+\\) +b7 [01]\\.[0-9]{2} "
                        "\\(logit -?[0-9.]+\\) ← +c1 ")))
      << r.out;
  EXPECT_THAT(r.out, HasSubstr("of what that head reads back (Σ weight·‖v‖) is the entry \"b7\""));
  EXPECT_THAT(r.out, HasSubstr("the model answers \""));
  EXPECT_THAT(r.out, HasSubstr("SQL    SELECT number FROM book WHERE name = 'b'"));
  EXPECT_THAT(r.out, HasSubstr("softmax over the logits q·k/√d_k makes the WHERE soft"));
  std::ifstream in(html);
  std::stringstream page;
  page << in.rdbuf();
  EXPECT_THAT(page.str(), HasSubstr("SELECT number FROM book WHERE name = 'b'"));

  // A source that is not a phonebook (no "? key" first) gets the alignment only.
  const auto plain = run_qkv({"explain", "--model", model, "--input", "a3 b7 c1"});
  ASSERT_EQ(plain.exit_code, 0) << plain.describe();
  EXPECT_THAT(plain.out, Not(HasSubstr("The phonebook")));
  std::filesystem::remove(model);
  std::filesystem::remove(html);
}

// RNNsearch learns the lookup (the question first): after a short training run its attention
// puts most of its weight on the asked entry, and the reading says what binds names to numbers.
TEST(ExplainPhonebookCli, RnnSearchLearnsThePhonebook) {
  const std::string model =
      std::filesystem::temp_directory_path().string() + "/qkv-phonebook-rnnsearch.safetensors";
  std::filesystem::remove(model);
  const auto train =
      run_qkv({"train", "--task", "lookup", "--model", "rnnsearch", "--steps", "1500",
               "--test-examples", "200", "--threads", "1", "--json", "--out", model});
  ASSERT_EQ(train.exit_code, 0) << train.describe();
  EXPECT_GE(nlohmann::json::parse(train.out)["test_accuracy"].get<double>(), 0.95) << train.out;
  const auto r = run_qkv({"explain", "--model", model, "--input", "? b a3 b7 c1"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("output  \"7\""));
  EXPECT_THAT(r.out, HasSubstr("bind   the forward GRU reads each number right after its name"));
  EXPECT_THAT(r.out, HasSubstr("match  the additive attention: the query 'b'"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("value  ([0-9]+)% of what it reads back")))
      << r.out;
  EXPECT_GE(std::stoi(m[1]), 50) << r.out;
  EXPECT_THAT(r.out, HasSubstr("the model answers \"7\": its number"));
  // The number in brackets is named as the worked step names it, e (the additive score), and is
  // the worked step's e_1j of that number (the source's only '7').
  EXPECT_THAT(r.out, HasSubstr("(its weight on name + number, and e, the number's score\n"
                               "         v_a·tanh(W_a s_0 + U_a h_j) before the softmax)"));
  std::smatch match, worked;
  ASSERT_TRUE(
      std::regex_search(r.out, match, std::regex(" b7 [01]\\.[0-9]{2} \\(e (-?[0-9.]+)\\) ←")))
      << r.out;
  ASSERT_TRUE(
      std::regex_search(r.out, worked, std::regex("\n +[0-9]+  '7' +\\[[^\\]]*\\] +(-?[0-9.]+) ")))
      << r.out;
  EXPECT_NEAR(std::stod(match[1]), std::stod(worked[1]), 0.05) << r.out;
  // The SQL reading is true of additive attention: no QKᵀ/√d_k, keys and values the same h_j.
  EXPECT_THAT(r.out, Not(HasSubstr("QKᵀ")));
  EXPECT_THAT(r.out, HasSubstr("keys and values: the same h_j"));
  EXPECT_THAT(r.out, HasSubstr("softmax over the additive scores e"));
  std::filesystem::remove(model);
}

}  // namespace
}  // namespace qkv
