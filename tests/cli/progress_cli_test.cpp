// Long jobs say how far they are (issue 26: `qkv search --corpus` over 1,000,000 lines printed
// nothing for 36 minutes). As training does: on a terminal one line rewritten in place, else one
// line at each tenth of the job on stderr — after two quiet seconds, so a short job says nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

#include "cli/cli_runner.h"
#include "core/scratch_files.h"

namespace qkv {
namespace {

using testing::CliResult;
using ::testing::HasSubstr;
using testing::run_qkv;
using testing::RunOptions;

// A corpus of `lines` lines in `dir`: each test writes its own, as ctest runs tests side by side.
std::string corpus_of(const test::ScratchDir& dir, int lines) {
  const std::string path = dir.path("corpus-" + std::to_string(lines) + ".txt");
  static const char* pool[] = {"a",   "bank", "river", "money", "loan", "water", "boat",  "cash",
                               "the", "of",   "on",    "sat",   "I",    "we",    "rates", "rose"};
  std::mt19937 rng(5);
  std::ofstream out(path);
  for (int i = 0; i < lines; ++i) {
    const int n = 20 + static_cast<int>(rng() % 40);
    for (int w = 0; w < n; ++w) out << pool[rng() % 16] << ' ';
    out << i << "\n";
  }
  return path;
}

// Lines "embedding 1,234/4,000 lines  567.8 lines/s  ETA 5s" in a log (stderr not a terminal).
std::vector<std::string> progress_lines(const std::string& err, const std::string& unit) {
  std::vector<std::string> lines;
  std::istringstream in(err);
  const std::regex line("embedding [0-9,]+/[0-9,]+ " + unit + "  [0-9.]+ " + unit +
                        "/s  ETA [0-9hms—]+");
  for (std::string l; std::getline(in, l);)
    if (std::regex_match(l, line)) lines.push_back(l);
  return lines;
}

// `args` on one thread (1,000 lines of 20–60 words: ~5 s of one core here), timed. A machine fast
// enough to finish within the quiet two seconds (and a margin) has nothing to show: skipped.
CliResult run_long(const std::vector<std::string>& args, const std::string& input = {}) {
  const auto start = std::chrono::steady_clock::now();
  CliResult r = run_qkv(args, RunOptions{.input = input, .env = {"QKV_NUM_THREADS=1"}});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (seconds < 3) r.command += "  [took " + std::to_string(seconds) + " s]";
  return r;
}
bool too_quick(const CliResult& r) { return r.command.find("  [took ") != std::string::npos; }

TEST(ProgressCli, SearchOverALargeCorpusSaysHowFarItIs) {
  const test::ScratchDir dir("qkv-progress-cli");
  const auto r = run_long({"search", "money", "--corpus", corpus_of(dir, 1000), "--top", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  if (too_quick(r)) GTEST_SKIP() << "no progress is due on a job this short: " << r.command;
  const std::vector<std::string> lines = progress_lines(r.err, "lines");
  ASSERT_FALSE(lines.empty()) << r.err;
  EXPECT_LE(lines.size(), 11u) << r.err;  // a line a tenth at most (and the first)
  EXPECT_THAT(lines.back(), HasSubstr("embedding 1,000/1,000 lines"));  // not the query (1,001)
  EXPECT_THAT(r.out, HasSubstr("keys:  1000 lines of"));
}

TEST(ProgressCli, EmbedOnALargeStdinSaysHowFarItIs) {
  const test::ScratchDir dir("qkv-progress-cli");
  std::ifstream in(corpus_of(dir, 1000));
  std::stringstream text;
  text << in.rdbuf();
  const auto r = run_long({"embed", "--npy", dir.path("embeddings.npy")}, text.str());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  if (too_quick(r)) GTEST_SKIP() << "no progress is due on a job this short: " << r.command;
  const std::vector<std::string> lines = progress_lines(r.err, "texts");
  ASSERT_FALSE(lines.empty()) << r.err;
  EXPECT_THAT(lines.back(), HasSubstr("embedding 1,000/1,000 texts"));
}

TEST(ProgressCli, AShortJobSaysNothing) {
  const test::ScratchDir dir("qkv-progress-cli");
  const auto r = run_qkv({"search", "money", "--corpus", corpus_of(dir, 3)});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err, "");
}

}  // namespace
}  // namespace qkv
