// What a command prints on standard output reaches it, or the command fails (issue 26):
// `qkv explain --json > /dev/full` exited 0 having written nothing, as did generate and attend,
// and on a full disk explain --json wrote 48 KiB of 4.5 MB and exited 0. Every command that prints
// results, run with its standard output on /dev/full, now exits 1 with one line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/cli_runner.h"

namespace qkv {
namespace {

using testing::CliResult;
using testing::run_qkv;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("qkv-stdout-cli-" + name)).string();
}

// qkv `args` with its standard output on `path` (through sh, which opens it), at most 5 minutes.
CliResult run_with_stdout(const std::string& path, const std::vector<std::string>& args) {
  std::vector<std::string> sh = {"-c", "exec \"$0\" \"$@\" > " + path, testing::qkv_binary()};
  sh.insert(sh.end(), args.begin(), args.end());
  return testing::run_program("/bin/sh", sh, testing::RunOptions{.timeout_s = 300});
}

const std::string kFull = "qkv: error: cannot write to standard output: No space left on device\n";

class StdoutCli : public ::testing::Test {
 protected:
  void SetUp() override {
    struct stat st {};
    if (::stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode)) GTEST_SKIP() << "no /dev/full";
  }
  static void expect_full(const std::vector<std::string>& args) {
    const CliResult r = run_with_stdout("/dev/full", args);
    EXPECT_FALSE(r.timed_out) << r.describe();
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_EQ(r.err.substr(r.err.rfind('\n', r.err.size() - 2) + 1), kFull) << r.describe();
  }
};

TEST_F(StdoutCli, AttendOnAFullDeviceFails) {
  expect_full({"attend", "--example", "phonebook"});
  expect_full({"attend", "--example", "phonebook", "--json"});
  expect_full({"attend", "--query", "[[1, 0]]", "--keys", "[[1, 0], [0, 1]]", "--values",
               "[[1, 2], [3, 4]]"});
}

TEST_F(StdoutCli, ModelCommandsOnAFullDeviceFail) {
  const std::string corpus = temp_path("corpus.txt");
  std::ofstream(corpus) << "The bank raised its rates.\nI sat on the river bank.\n";
  expect_full({"explain", "The cat sat on the mat"});
  expect_full({"explain", "The cat sat on the mat", "--json"});
  expect_full({"embed", "The cat sat on the mat"});
  expect_full({"embed", "The cat sat on the mat", "--json"});
  expect_full({"similarity", "a cat", "a dog"});
  expect_full({"search", "money", "--corpus", corpus});
  expect_full({"search", "money", "--corpus", corpus, "--json"});
}

TEST_F(StdoutCli, TrainAndItsModelsExplainedOnAFullDeviceFail) {
  const std::string model = temp_path("copy.safetensors");
  const std::vector<std::string> train = {
      "train",   "--task",    "copy",      "--steps", "2",       "--layers", "1",
      "--heads", "1",         "--d-model", "8",       "--batch", "4",        "--test-examples",
      "4",       "--threads", "1",         "--out",   model};
  expect_full(train);  // the summary; the model itself is written before it
  expect_full({"explain", "--model", model, "--input", "abc"});
  const std::string counter = temp_path("count.safetensors");
  const CliResult trained = run_qkv(
      {"train", "--model", "perceiver", "--task",          "count", "--length",  "32", "--latents",
       "4",     "--steps", "2",         "--layers",        "1",     "--heads",   "2",  "--d-model",
       "16",    "--batch", "8",         "--test-examples", "4",     "--threads", "1",  "--out",
       counter});
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  expect_full({"explain", "--model", counter});
  expect_full({"explain", "--model", counter, "--json"});
}

// generate streams its tokens: the first flush fails, and it stops there.
TEST_F(StdoutCli, GenerateOnAFullDeviceFails) {
  expect_full({"generate", "--max-tokens", "2", "The capital of France is"});
  expect_full({"generate", "--chat", "--max-tokens", "2", "Hi"});
}

// bench streams its rows; help and the version are printed as results are.
TEST_F(StdoutCli, BenchHelpAndVersionOnAFullDeviceFail) {
  expect_full({"bench", "perceiver", "--quick", "--threads", "1"});
  expect_full({"bench", "perceiver", "--quick", "--threads", "1", "--json"});
  expect_full({"--version"});
  expect_full({"--help"});
  expect_full({"experiment", "--help"});
}

// The same commands with a writable standard output still exit 0: the check does not misfire.
TEST_F(StdoutCli, AWritableOutputStillSucceeds) {
  const std::string out = temp_path("out.txt");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"attend", "--example", "phonebook", "--json"},
        std::vector<std::string>{"explain", "The cat sat on the mat", "--json"},
        std::vector<std::string>{"--version"}}) {
    const CliResult r = run_with_stdout(out, args);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    std::ifstream in(out);
    const std::string first((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(first.empty()) << args[0];
    EXPECT_EQ(first[0], args[0] == "--version" ? 'q' : '{') << first.substr(0, 80);
    EXPECT_EQ(first.back(), '\n');
  }
}

}  // namespace
}  // namespace qkv
