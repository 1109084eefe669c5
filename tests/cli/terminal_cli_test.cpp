// What the user typed comes back to the terminal as text, never as terminal commands (issue 11):
// texts, corpus lines, tokens, labels and file names show their control characters escaped
// (\x1b, \n, \u009b, and bytes that are not UTF-8 as \xNN), on stdout and in error messages, and
// the output still fits 80 columns. JSON stays JSON.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_expect.h"
#include "cli/cli_runner.h"
#include "qkv/explain.h"
#include "qkv/npy.h"

namespace qkv {
namespace {

using testing::expect_fits_80_columns;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_qkv;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("qkv-terminal-cli-" + name)).string();
}

// No byte that a terminal acts on: C0 controls but \n, DEL, and the C1 controls in UTF-8.
void expect_inert(const std::string& text, const std::string& context) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = text[i];
    ASSERT_TRUE(c == '\n' || (c >= 0x20 && c != 0x7f))
        << "byte " << int(c) << " at " << i << " of " << context << ":\n"
        << text;
    if (c == 0xc2 && i + 1 < text.size())
      ASSERT_FALSE(static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                   static_cast<unsigned char>(text[i + 1]) <= 0x9f)
          << "a C1 control at " << i << " of " << context;
  }
}

const std::string kClear = "clear\x1b[2J\x1b[Hscreen";
const std::string kTitle = "title\x1b]0;pwned\x07 set";
const std::string kC1 =
    "eight-bit \xc2\x9b"
    "31m csi";

TEST(TerminalCli, SearchShowsCorpusLinesAndTheQueryEscaped) {
  const std::string corpus = temp_path("corpus.txt");
  std::ofstream(corpus) << kClear << "\n" << kTitle << "\n" << kC1 << "\nplain line\n";
  const auto r = run_qkv({"search", "where is the \x1b[31mcash", "--corpus", corpus});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  expect_inert(r.out, "search");
  EXPECT_THAT(r.out, HasSubstr("query: where is the \\x1b[31mcash"));
  EXPECT_THAT(r.out, HasSubstr("clear\\x1b[2J\\x1b[Hscreen"));
  EXPECT_THAT(r.out, HasSubstr("title\\x1b]0;pwned\\x07 set"));
  EXPECT_THAT(r.out, HasSubstr("eight-bit \\u009b31m csi"));
  expect_fits_80_columns(r.out);
  // JSON keeps the text itself (JSON escapes it its own way).
  const auto json = run_qkv({"search", "cash", "--corpus", corpus, "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.describe();
  const nlohmann::json j = nlohmann::json::parse(json.out);
  bool found = false;
  for (const auto& x : j["results"]) found |= x["text"] == kClear;
  EXPECT_TRUE(found) << json.out;
}

TEST(TerminalCli, ExplainEmbedAndSimilarityShowTextsEscaped) {
  const std::string text = "The animal\x1b[2J was\ttired\nbecause it\xc2\x85 slept";
  const auto explain = run_qkv({"explain", text});
  ASSERT_EQ(explain.exit_code, 0) << explain.describe();
  expect_inert(explain.out, "explain");
  EXPECT_THAT(explain.out,
              HasSubstr("\"The animal\\x1b[2J was\\ttired\\nbecause it\\u0085 slept\""));
  expect_fits_80_columns(explain.out);
  const auto zoom = run_qkv({"explain", text, "--layer", "5", "--head", "11", "--color"});
  ASSERT_EQ(zoom.exit_code, 0) << zoom.describe();
  EXPECT_THAT(zoom.out, Not(HasSubstr("\x1b[2J")));  // colours yes, the user's codes no
  EXPECT_THAT(zoom.out, HasSubstr("\\x1b[2J"));

  const auto embed = run_qkv({"embed", text, "tab\there"});
  ASSERT_EQ(embed.exit_code, 0) << embed.describe();
  expect_inert(embed.out, "embed");
  EXPECT_THAT(embed.out, HasSubstr("\"tab\\there\""));
  expect_fits_80_columns(embed.out);

  const auto similarity = run_qkv({"similarity", text, "ok\x1b]0;t\x07"});
  ASSERT_EQ(similarity.exit_code, 0) << similarity.describe();
  expect_inert(similarity.out, "similarity");
  EXPECT_THAT(similarity.out, HasSubstr("  b: ok\\x1b]0;t\\x07\n"));
}

TEST(TerminalCli, AttendLabelsAreEscapedAndStayAligned) {
  const std::string q = temp_path("q.npy");
  write_npy(q, Tensor::from({2, 3}, {1.f, 0.f, 0.f, 0.f, 1.f, 0.f}));
  const auto r = run_qkv({"attend", "--query", q, "--keys", q, "--values", q, "--query-labels",
                          "a\x1b[2Jb,c", "--key-labels", "x\ny,z"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  expect_inert(r.out, "attend");
  // The table's rows line up: the escaped label counts as the columns it takes.
  EXPECT_THAT(r.out, HasSubstr("  a\\x1b[2Jb  1.00  0.00  0.00\n  c          0.00  1.00  0.00\n"));
  EXPECT_THAT(r.out, HasSubstr("x\\ny"));
}

TEST(TerminalCli, ErrorMessagesShowWhatWasTypedEscaped) {
  const auto corpus = run_qkv({"search", "q", "--corpus", "/nonexistent/\x1b[2Jfile\n.txt"});
  EXPECT_EQ(corpus.exit_code, 2) << corpus.describe();
  expect_inert(corpus.err, "the --corpus error");
  EXPECT_EQ(corpus.err,
            "qkv: error: --corpus /nonexistent/\\x1b[2Jfile\\n.txt: cannot open the file: No such "
            "file or "
            "directory\n");
  const auto token = run_qkv({"explain", "--token", "\x1b]0;x\x07"});
  EXPECT_EQ(token.exit_code, 2) << token.describe();
  expect_inert(token.err, "the --token error");
  EXPECT_THAT(token.err, HasSubstr("--token '\\x1b]0;x\\x07' is not a token of the text"));
  const auto utf8 = run_qkv({"explain", "caf\xc3"});
  EXPECT_EQ(utf8.exit_code, 2) << utf8.describe();
  EXPECT_THAT(utf8.err, Not(HasSubstr("\xc3"))) << "a byte that is not UTF-8 went to the terminal";
  const auto subcommand = run_qkv({"\x1b[2Jexplain"});
  EXPECT_EQ(subcommand.exit_code, 2) << subcommand.describe();
  EXPECT_THAT(subcommand.err, HasSubstr("unknown subcommand '\\x1b[2Jexplain'"));
}

}  // namespace
}  // namespace qkv
