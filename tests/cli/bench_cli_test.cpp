// tests/cli/bench_cli_test.cpp — `qkv bench attention` as a smoke test: --quick runs every default
// case on small shapes, validates each path against the float64 reference and reports positive
// rates under the keys issue 3 names; usage errors are one line with exit code 2. Speed itself is
// never asserted: this machine may be shared.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_runner.h"

namespace {

using qkv::testing::CliResult;
using qkv::testing::run_qkv;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));  // throws if not JSON
  return lines;
}

// One line on stderr, "qkv: error: ...", and nothing on stdout.
void expect_usage_error(const CliResult& r, const std::string& mentions) {
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, StartsWith("qkv: error: ")) << r.describe();
  EXPECT_THAT(r.err, HasSubstr(mentions)) << r.describe();
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.describe();
  EXPECT_EQ(r.out, "") << r.describe();
}

TEST(BenchCli, QuickJsonHasEveryCaseWithPositiveRates) {
  const CliResult r = run_qkv({"bench", "attention", "--quick", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::vector<nlohmann::json> rows = json_lines(r.out);
  const std::set<std::string> expected{"1k",         "1k-causal", "4k",     "4k-causal", "16k",
                                       "16k-causal", "4k-d128",   "4k-gqa", "decode"};
  std::set<std::string> seen;
  for (const nlohmann::json& row : rows) {
    const std::string name = row.at("case").get<std::string>();
    SCOPED_TRACE("case " + name + ": " + row.dump());
    seen.insert(name);
    for (const char* key : {"B", "Hq", "Hkv", "L", "S", "D"}) {
      ASSERT_TRUE(row.at(key).is_number_integer()) << key;
      EXPECT_GE(row.at(key).get<int64_t>(), 1) << key;
    }
    EXPECT_EQ(row.at("Hq").get<int64_t>() % row.at("Hkv").get<int64_t>(), 0);
    EXPECT_TRUE(row.at("causal").is_boolean());
    // Every path runs on --quick's shapes (the reference too: L·S ≤ 4096²).
    for (const char* key :
         {"fwd_gflops", "bwd_gflops", "sgemm_gflops", "ref_gflops", "unfused_gflops",
          "unfused_bwd_gflops", "fwd_sgemm_ratio", "bwd_sgemm_ratio", "fwd_ref_speedup",
          "fwd_unfused_speedup", "bwd_unfused_speedup"}) {
      ASSERT_TRUE(row.at(key).is_number()) << key;
      EXPECT_GT(row.at(key).get<double>(), 0) << key;
    }
    for (const char* key : {"peak_extra_mib", "unfused_peak_extra_mib"}) {
      ASSERT_TRUE(row.at(key).is_number()) << key;
      EXPECT_GE(row.at(key).get<double>(), 0) << key;
    }
  }
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(rows.size(), expected.size());
}

TEST(BenchCli, TablePrintsTheSgemmRateAndTheCase) {
  const CliResult r = run_qkv({"bench", "attention", "--quick", "--case", "decode"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("sgemm: OpenBLAS SGEMM 2048³")) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("\ndecode ")) << r.describe();
  EXPECT_THAT(r.out, HasSubstr(" H32/8 L1 S512 D128 ")) << r.describe();
}

TEST(BenchCli, HelpHasAnExample) {
  const CliResult r = run_qkv({"bench", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("qkv bench attention")) << r.describe();
  const CliResult a = run_qkv({"bench", "attention", "--help"});
  EXPECT_EQ(a.exit_code, 0) << a.describe();
  EXPECT_THAT(a.out, HasSubstr("--case")) << a.describe();
  EXPECT_THAT(a.out, HasSubstr("decode")) << a.describe();
}

TEST(BenchCli, UsageErrorsAreOneLineWithExitCode2) {
  expect_usage_error(run_qkv({"bench", "attention", "--case", "nope"}),
                     "--case 'nope' is unknown; expected one of: 1k, 1k-causal");
  expect_usage_error(run_qkv({"bench", "attention", "--repeats", "0"}), "--repeats");
  expect_usage_error(run_qkv({"bench", "attention", "--threads", "x"}), "--threads");
  expect_usage_error(run_qkv({"bench", "attention", "--bogus"}), "--bogus");
  expect_usage_error(run_qkv({"bench", "--json", "attention"}), "options go after the target");
  expect_usage_error(run_qkv({"bench"}), "expected a target: attention");
  expect_usage_error(run_qkv({"bench", "matmul"}), "'matmul' is not a target; expected attention");
}

}  // namespace
