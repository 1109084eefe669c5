// Numeric options of every subcommand (issue 11): a float option takes a finite number in its
// range — "nan", "inf" and out-of-range values are usage errors (exit 2) that name the option, the
// value and the range; no value means "the default" except leaving the option out; and an index
// out of range names the model's real range.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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
                     "--threads 0 is out of range; expected 1 to 4096");
  const auto help = run_qkv({"train", "--help"});
  EXPECT_THAT(help.out, HasSubstr("steps at most, ≥ 1 (default 4000; dates, lookup 6000)"));
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
