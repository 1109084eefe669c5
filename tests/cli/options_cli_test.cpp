// Numeric options of every subcommand (issue 11): a float option takes a finite number in its
// range — "nan", "inf" and out-of-range values are usage errors (exit 2) that name the option, the
// value and the range; no value means "the default" except leaving the option out; and an index
// out of range names the model's real range.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "cli/cli_runner.h"
#include "qkv/npy.h"

namespace qkv {
namespace {

using ::testing::HasSubstr;
using testing::run_qkv;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("qkv-options-cli-" + name)).string();
}

void expect_usage_error(const testing::CliResult& r, const std::string& what) {
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.describe();
  EXPECT_THAT(r.err, HasSubstr(what)) << r.describe();
  EXPECT_LT(r.err.size(), 200u) << r.describe();  // no 300-digit bounds
  EXPECT_TRUE(r.out.empty()) << r.describe();
}

TEST(FloatOptionsCli, SearchTemperatureMustBeAFiniteNumberInRange) {
  const std::string corpus = temp_path("corpus.txt");
  std::ofstream(corpus) << "a line\n";
  const std::string range = "; expected a number in [1e-06, 1e+06]";
  for (const char* nan : {"nan", "NaN", "-nan"})
    expect_usage_error(run_qkv({"search", "q", "--corpus", corpus, "--temperature", nan}),
                       std::string("--temperature: ") + nan + " is not a number" + range);
  expect_usage_error(run_qkv({"search", "q", "--corpus", corpus, "--temperature", "inf"}),
                     "--temperature: inf is not finite" + range);
  expect_usage_error(run_qkv({"search", "q", "--corpus", corpus, "--temperature", "0"}),
                     "--temperature: 0 is out of range" + range);
  expect_usage_error(run_qkv({"search", "q", "--corpus", corpus, "--temperature", "-1"}),
                     "--temperature: -1 is out of range" + range);
  expect_usage_error(run_qkv({"search", "q", "--corpus", corpus, "--temperature", "warm"}),
                     "--temperature: warm is not a number" + range);
}

TEST(FloatOptionsCli, TrainLrAndTargetMustBeFiniteNumbersInRange) {
  expect_usage_error(run_qkv({"train", "--task", "copy", "--lr", "nan"}),
                     "--lr: nan is not a number; expected a number in (0, 10)");
  expect_usage_error(run_qkv({"train", "--task", "copy", "--lr", "0"}),
                     "--lr: 0 is out of range; expected a number in (0, 10)");
  expect_usage_error(run_qkv({"train", "--task", "copy", "--target", "nan"}),
                     "--target: nan is not a number; expected a number in [0, 10]");
  expect_usage_error(run_qkv({"train", "--task", "copy", "--target", "-inf"}),
                     "--target: -inf is not finite; expected a number in [0, 10]");
}

// A seed is 0 to 2⁶⁴ − 1, as Python's qkv.train takes it: "-1" wrapped to 2⁶⁴ − 1 and
// "18446744073709551616" saturated to it without a word (generate's: generate_cli_test.cpp).
TEST(SeedOptionsCli, TrainSeedMustBeAnUnsignedInteger) {
  for (const char* seed : {"-1", "18446744073709551616", "1.5"})
    expect_usage_error(
        run_qkv({"train", "--task", "copy", "--seed", seed}),
        std::string("--seed: ") + seed + " is not an integer from 0 to 18446744073709551615");
}

// docs/CONVENTIONS.md §5: any finite scale, zero and negative included; NaN is an error.
TEST(FloatOptionsCli, AttendScaleMayBeAnyFiniteNumber) {
  const std::string q = temp_path("q.npy");
  write_npy(q, Tensor::from({2, 3}, {1.f, 0.f, 0.f, 0.f, 1.f, 0.f}));
  const std::vector<std::string> files = {"attend", "--query", q, "--keys", q, "--values", q};
  auto with = [&](const std::string& scale) {
    std::vector<std::string> args = files;
    args.insert(args.end(), {"--scale", scale});
    return run_qkv(args);
  };
  expect_usage_error(with("nan"), "--scale: nan is not a number; expected a finite number");
  expect_usage_error(with("-inf"), "--scale: -inf is not finite; expected a finite number");
  for (const char* fine : {"0", "-0.5", "1e3"}) {
    const auto r = with(fine);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_THAT(r.out,
                HasSubstr(std::string("scale ") + (fine == std::string("1e3") ? "1000" : fine)));
  }
}

// 0 used to mean "the default" (4000 steps, d_model 64, all cores): a value given is checked.
TEST(TrainOptionsCli, ZeroIsAValueNotTheDefault) {
  expect_usage_error(
      run_qkv({"train", "--task", "copy", "--steps", "0"}),
      "--steps 0 is out of range; expected 1 to 10^8 (leave it out for the default)");
  expect_usage_error(run_qkv({"train", "--task", "copy", "--steps", "-5"}), "--steps -5");
  expect_usage_error(run_qkv({"train", "--task", "copy", "--d-model", "0"}),
                     "--d-model 0 is out of range; expected 1 to 4096");
  expect_usage_error(run_qkv({"train", "--task", "copy", "--eval-every", "0"}),
                     "--eval-every 0 is out of range; expected 1 to 10^8");
  expect_usage_error(run_qkv({"train", "--task", "copy", "--threads", "0"}),
                     "--threads: 0 is not a thread count; expected 1 to ");
  const auto help = run_qkv({"train", "--help"});
  EXPECT_THAT(help.out, HasSubstr("steps at most, ≥ 1 (default 4000; dates, lookup 6000)"));
}

// ---- thread counts (issue 26): `--threads 4096` was accepted by every command, and 50 threads
// under a memory limit never finished. A thread count is 1 to 4 × the cores, in every command's
// --threads and in $QKV_NUM_THREADS, and the help says so.

int cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

std::string thread_range() {
  return "expected 1 to " + std::to_string(4 * cores()) + " (4 × this machine's " +
         std::to_string(cores()) + (cores() == 1 ? " core)" : " cores)");
}

TEST(ThreadOptionsCli, EveryCommandTakesAtMostFourTimesTheCores) {
  const std::string more = std::to_string(4 * cores() + 1);
  const std::vector<std::vector<std::string>> commands = {
      {"train", "--task", "copy"},
      {"train", "--model", "perceiver", "--task", "count"},
      {"bench", "attention", "--quick"},
      {"bench", "model", "--quick"},
      {"bench", "perceiver", "--quick"}};
  for (std::vector<std::string> args : commands) {
    args.push_back("--threads");
    for (const std::string& n : {more, std::string("4096")}) {
      args.push_back(n);
      expect_usage_error(run_qkv(args), "qkv: error: --threads: " + n + " is more than " +
                                            std::to_string(4 * cores()) + "; " + thread_range() +
                                            " (see qkv --help)\n");
      args.pop_back();
    }
    args.push_back("two");
    expect_usage_error(run_qkv(args), "--threads: two is not an integer; " + thread_range());
    args.resize(args.size() - 2);
    args.push_back("--help");
    EXPECT_THAT(run_qkv(args).out, HasSubstr("threads, at most 4 × the cores")) << args[1];
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"embed", "one text"},
        std::vector<std::string>{"train", "--task", "copy", "--steps", "1"}})
    expect_usage_error(run_qkv(args, testing::RunOptions{.env = {"QKV_NUM_THREADS=4096"}}),
                       "qkv: error: $QKV_NUM_THREADS: 4096 is more than " +
                           std::to_string(4 * cores()) + "; " + thread_range() + "\n");
}

// Runs qkv under an address-space limit of `kib` KiB (ulimit -v), for at most 60 seconds.
testing::CliResult run_limited_to(uint64_t kib, const std::vector<std::string>& args) {
  std::vector<std::string> sh = {
      "-c", "ulimit -v " + std::to_string(kib) + " && exec \"$0\" \"$@\"", testing::qkv_binary()};
  sh.insert(sh.end(), args.begin(), args.end());
  return testing::run_program("/bin/sh", sh, testing::RunOptions{.timeout_s = 60});
}

// Each thread that calls OpenBLAS maps a 128 MiB buffer, and OpenBLAS 0.3.21 retries a failed map
// forever: under `ulimit -v` too small for them, `qkv train --threads 50` spun without end. The
// room is now checked before the threads call it, and the command fails with one line.
TEST(ThreadOptionsCli, ThreadsWithoutRoomForOpenBlasBuffersFailInsteadOfSpinning) {
  const int threads = std::min(8, 4 * cores());
  auto train = [](int n) {
    return std::vector<std::string>{"train",
                                    "--task",
                                    "copy",
                                    "--steps",
                                    "1",
                                    "--layers",
                                    "1",
                                    "--heads",
                                    "1",
                                    "--d-model",
                                    "128",
                                    "--batch",
                                    "64",
                                    "--test-examples",
                                    "4",
                                    "--threads",
                                    std::to_string(n)};
  };
  // The least address space (in 64 MiB steps) one thread trains in; the extra threads need
  // (threads − 1) × 128 MiB more for their buffers, far beyond the 64 MiB given on top.
  uint64_t enough = 0;
  for (uint64_t kib = 256 << 10; kib <= uint64_t{8} << 20 && enough == 0; kib += 64 << 10)
    if (run_limited_to(kib, train(1)).exit_code == 0) enough = kib;
  ASSERT_GT(enough, 0u) << "one thread did not train in 8 GiB";
  const testing::CliResult r = run_limited_to(enough + (64 << 10), train(threads));
  EXPECT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("qkv: error: cannot map the OpenBLAS buffers of ")) << r.describe();
  EXPECT_THAT(r.err, HasSubstr(" MiB (ulimit -v); expected fewer threads, or more memory\n"))
      << r.describe();
  // With the room, the same run trains.
  const testing::CliResult roomy =
      run_limited_to(enough + uint64_t(threads) * (160 << 10), train(threads));
  EXPECT_EQ(roomy.exit_code, 0) << roomy.describe();
}

// The threads OpenBLAS starts as it loads each map their buffer before main runs; under a limit
// with no room for one (ulimit -v 150000 on 2 cores), such a thread retried forever, and even
// `qkv --version` printed its line and then never exited (OpenBLAS's shutdown waits for it). The
// command now says so first thing, and ends without that wait. 64 MiB steps from 64 MiB find such
// a limit on any core count; a hang is the failure.
TEST(ThreadOptionsCli, AnAddressSpaceWithoutRoomForOpenBlasIsOneLineNotAHang) {
  bool refused = false;
  for (uint64_t kib = 64 << 10; kib <= uint64_t{4} << 20 && !refused; kib += 64 << 10) {
    const testing::CliResult r = run_limited_to(kib, {"--version"});
    ASSERT_FALSE(r.timed_out) << r.describe();
    if (r.exit_code == 0) break;  // room enough from here on
    refused = true;
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.describe();
    EXPECT_THAT(r.err, HasSubstr("qkv: error: qkv cannot run under an address-space limit of "))
        << r.describe();
    EXPECT_THAT(r.err, HasSubstr(" MiB (ulimit -v): OpenBLAS maps 128 MiB a thread"))
        << r.describe();
  }
  EXPECT_TRUE(refused) << "even 64 MiB of address space ran qkv --version";
}

// A message quoting a long argument quoted all of it (a 60 KB line for an inline matrix, issue
// 26): an error line is cut at 1,000 bytes, and says how much was cut.
TEST(MessagesCli, AnErrorQuotingALongArgumentIsCut) {
  const std::string name(20'000, 'x');
  const testing::CliResult r = run_qkv({"attend", "--example", name});
  EXPECT_EQ(r.exit_code, 2) << r.describe().substr(0, 300);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
  EXPECT_EQ(r.err.substr(0, 27), "qkv: error: --example 'xxxx");
  const std::string tail = r.err.substr(r.err.rfind("… ("));
  EXPECT_LE(r.err.size(), std::string("qkv: error: ").size() + 1000 + tail.size());
  EXPECT_THAT(tail, ::testing::MatchesRegex("… \\([0-9]+ more bytes\\)\n"));
}

TEST(ExplainOptionsCli, LayerAndHeadOutOfRangeNameTheModelsRange) {
  expect_usage_error(run_qkv({"explain", "--layer", "-1", "--head", "0"}),
                     "qkv: error: --layer -1 is out of range; this model has layers 0–5\n");
  expect_usage_error(run_qkv({"explain", "--layer", "9", "--head", "0"}),
                     "qkv: error: --layer 9 is out of range; this model has layers 0–5\n");
  expect_usage_error(run_qkv({"explain", "--layer", "0", "--head", "-3"}),
                     "qkv: error: --head -3 is out of range; this model has heads 0–11\n");
}

}  // namespace
}  // namespace qkv
