// tests/cli/bench_cli_test.cpp — `qkv bench attention` as a smoke test: --quick runs every default
// case on small shapes, validates each path against the float64 reference and reports positive
// rates under the keys issue 3 names; --list prints the case registry's cases (shapes, FLOPs) that
// bench/compare_torch.py reads; usage errors are one line with exit code 2. Speed itself is never
// asserted: this machine may be shared.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_runner.h"
#include "qkv/threads.h"

namespace {

using qkv::testing::CliResult;
using qkv::testing::run_qkv;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));  // throws if not JSON
  return lines;
}

// The terminal columns of a line of text: its UTF-8 characters (the tables' are one column each).
int columns(const std::string& line) {
  return static_cast<int>(std::count_if(line.begin(), line.end(), [](char ch) {
    return (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
  }));
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

// Each case once, by name, in the registry's order.
std::map<std::string, nlohmann::json> by_name(const std::vector<nlohmann::json>& rows,
                                              std::vector<std::string>& order) {
  std::map<std::string, nlohmann::json> cases;
  for (const nlohmann::json& row : rows) {
    const std::string name = row.at("case").get<std::string>();
    EXPECT_TRUE(cases.emplace(name, row).second) << "twice: " << name;
    order.push_back(name);
  }
  return cases;
}

// --list --json: every case of the registry, the default set and `long`, with its shape and its
// FLOPs, computed here from the shape (4·B·Hq·L·S·D, half when causal; backward 2.5×); nothing
// runs.
TEST(BenchCli, ListJsonHasEveryCaseWithItsShapeAndFlops) {
  const CliResult r = run_qkv({"bench", "attention", "--list", "--json"}, {.timeout_s = 30});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err, "") << r.describe();
  std::vector<std::string> order;
  const std::map<std::string, nlohmann::json> cases = by_name(json_lines(r.out), order);
  EXPECT_EQ(order, (std::vector<std::string>{"1k", "1k-causal", "4k", "4k-causal", "16k",
                                             "16k-causal", "4k-d128", "4k-gqa", "decode", "long"}));
  ASSERT_EQ(cases.size(), 10u) << r.describe();

  const nlohmann::json& gqa = cases.at("4k-gqa");
  EXPECT_EQ(gqa.at("shape"), "H8/2 L4096 S4096 D64");
  EXPECT_EQ(gqa.at("B"), 1);
  EXPECT_EQ(gqa.at("Hq"), 8);
  EXPECT_EQ(gqa.at("Hkv"), 2);
  EXPECT_EQ(gqa.at("L"), 4096);
  EXPECT_EQ(gqa.at("S"), 4096);
  EXPECT_EQ(gqa.at("D"), 64);
  EXPECT_EQ(gqa.at("causal"), false);
  EXPECT_EQ(gqa.at("mask"), "none");
  EXPECT_EQ(gqa.at("default"), true);
  EXPECT_EQ(gqa.at("quick"), false);
  const double gqa_flops = 4.0 * 1 * 8 * 4096 * 4096 * 64;  // 34.4 GFLOP
  EXPECT_EQ(gqa.at("fwd_flops").get<double>(), gqa_flops);
  EXPECT_EQ(gqa.at("bwd_flops").get<double>(), 2.5 * gqa_flops);

  const nlohmann::json& causal = cases.at("1k-causal");
  EXPECT_EQ(causal.at("causal"), true);
  EXPECT_EQ(causal.at("L"), 1024);
  EXPECT_EQ(causal.at("fwd_flops").get<double>(), 4.0 * 8 * 1024 * 1024 * 64 / 2);

  const nlohmann::json& decode = cases.at("decode");
  EXPECT_EQ(decode.at("shape"), "H32/8 L1 S8192 D128");
  EXPECT_EQ(decode.at("fwd_flops").get<double>(), 4.0 * 32 * 1 * 8192 * 128);

  // long: forward only, and only by name.
  const nlohmann::json& long_case = cases.at("long");
  EXPECT_EQ(long_case.at("L"), 65536);
  EXPECT_EQ(long_case.at("default"), false);
  EXPECT_TRUE(long_case.at("bwd_flops").is_null());
  EXPECT_EQ(long_case.at("fwd_flops").get<double>(), 4.0 * 65536 * 65536 * 64);
  for (const auto& [name, row] : cases)
    if (name != "long") EXPECT_EQ(row.at("default"), true) << name;
}

// --quick divides L and S by 16, and a decode step keeps its one query; --case picks.
TEST(BenchCli, ListQuickHasTheQuickShapes) {
  const CliResult r =
      run_qkv({"bench", "attention", "--list", "--json", "--quick", "--case", "decode,4k-d128"},
              {.timeout_s = 30});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::vector<std::string> order;
  const std::map<std::string, nlohmann::json> cases = by_name(json_lines(r.out), order);
  EXPECT_EQ(order, (std::vector<std::string>{"decode", "4k-d128"}));
  ASSERT_EQ(cases.size(), 2u) << r.describe();
  const nlohmann::json& decode = cases.at("decode");
  EXPECT_EQ(decode.at("L"), 1);
  EXPECT_EQ(decode.at("S"), 512);
  EXPECT_EQ(decode.at("quick"), true);
  EXPECT_EQ(decode.at("fwd_flops").get<double>(), 4.0 * 32 * 1 * 512 * 128);
  const nlohmann::json& d128 = cases.at("4k-d128");
  EXPECT_EQ(d128.at("shape"), "H4 L256 S256 D128");
  EXPECT_EQ(d128.at("fwd_flops").get<double>(), 4.0 * 4 * 256 * 256 * 128);
  EXPECT_EQ(d128.at("bwd_flops").get<double>(), 2.5 * 4.0 * 4 * 256 * 256 * 128);
}

// The table: one line a case with its shape and GFLOP; `long` marked as outside the default set.
TEST(BenchCli, ListTableShowsEveryCase) {
  const CliResult r = run_qkv({"bench", "attention", "--list"}, {.timeout_s = 30});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("10 cases")) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("\n4k-gqa      H8/2 L4096 S4096 D64 none ")) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("\n1k-causal   H8 L1024 S1024 D64   top-left ")) << r.describe();
  EXPECT_THAT(r.out, HasSubstr(" 34.360 ")) << r.describe();  // 4k-gqa's forward GFLOP
  EXPECT_THAT(r.out, HasSubstr("\nlong*       H1 L65536 S65536 D64")) << r.describe();
  EXPECT_THAT(r.out, Not(HasSubstr("sgemm"))) << r.describe();  // nothing ran
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
  expect_usage_error(run_qkv({"bench", "attention", "--list", "--case", "nope"}),
                     "--case 'nope' is unknown; expected one of: 1k, 1k-causal");
  // A list ending in ',' took the next argument as more of it: `--case , --json` lost --json.
  for (const char* list : {",", "4k,", ",4k", "4k,,decode"})
    expect_usage_error(
        run_qkv({"bench", "attention", "--case", list, "--json", "--list"}),
        std::string("--case: '") + list + "' has an empty name; expected NAME,... e.g. 4k,decode");
  const CliResult two =
      run_qkv({"bench", "attention", "--case", "4k", "--case", "decode", "--list"});
  EXPECT_EQ(two.exit_code, 0) << two.describe();
  EXPECT_THAT(two.out, HasSubstr("qkv bench attention: 2 cases")) << two.describe();
  expect_usage_error(run_qkv({"bench", "attention", "--repeats", "0"}), "--repeats");
  expect_usage_error(run_qkv({"bench", "attention", "--threads", "x"}), "--threads");
  expect_usage_error(run_qkv({"bench", "attention", "--bogus"}), "--bogus");
  expect_usage_error(run_qkv({"bench", "--json", "attention"}), "options go after the target");
  expect_usage_error(run_qkv({"bench"}), "expected a target: attention");
  expect_usage_error(run_qkv({"bench", "matmul"}), "'matmul' is not a target; expected attention");
}

// --threads takes a list; a bad item is named with the list it came from, and the message says
// what a count must be, as a single --threads does.
TEST(BenchCli, ThreadListItemsAreCheckedOneByOne) {
  expect_usage_error(run_qkv({"bench", "attention", "--threads", "1,x", "--list"}),
                     "--threads: 'x' in '1,x': x is not a decimal integer; expected 1 to ");
  const std::string too_many = std::to_string(qkv::max_num_threads() + 1);
  expect_usage_error(run_qkv({"bench", "attention", "--threads", "2," + too_many, "--list"}),
                     "--threads: '" + too_many + "' in '2," + too_many + "': " + too_many +
                         " is out of range; expected 1 to ");
  expect_usage_error(run_qkv({"bench", "attention", "--threads", "0,1", "--list"}),
                     "--threads: '0' in '0,1': ");
  for (const char* list : {"1,,2", ",1", "1,"})
    expect_usage_error(run_qkv({"bench", "attention", "--threads", list, "--json", "--list"}),
                       std::string("--threads: '") + list +
                           "' has an empty item; expected N or N,N,... e.g. 1,2,4,8,16");
  // One count keeps its old message.
  expect_usage_error(run_qkv({"bench", "attention", "--threads", "x", "--list"}),
                     "--threads: x is not a decimal integer");
  const CliResult help = run_qkv({"bench", "attention", "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.describe();
  EXPECT_THAT(help.out, HasSubstr("qkv bench attention --threads 1,2,4,8,16")) << help.describe();
}

// A sweep: one JSON row per (case, count), the counts in increasing order; per-thread rates and
// speed-ups over the smallest count (exactly 1 for it), and each SGEMM ceiling on min(threads,
// cores) OpenBLAS threads, seen working and with its CPU share.
TEST(BenchCli, ThreadSweepJsonHasPerThreadRatesAndSpeedups) {
  const CliResult r =
      run_qkv({"bench", "attention", "--quick", "--case", "1k", "--threads", "2,1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::vector<nlohmann::json> rows = json_lines(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.describe();
  const int cores = qkv::num_cores();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& row = rows[i];
    SCOPED_TRACE(row.dump());
    const int threads = static_cast<int>(i) + 1;
    EXPECT_EQ(row.at("case"), "1k");
    EXPECT_EQ(row.at("threads"), threads);
    EXPECT_EQ(row.at("cores"), cores);
    EXPECT_EQ(row.at("speedup_base_threads"), 1);
    EXPECT_EQ(row.at("sgemm_blas_threads"), std::min(threads, cores));
    EXPECT_EQ(row.at("openblas_threading"), "pthreads");
    ASSERT_TRUE(row.at("sgemm_cpu_share").is_number());
    EXPECT_GT(row.at("sgemm_cpu_share").get<double>(), 0);
    if (!row.at("sgemm_threads_working").is_null()) {
      EXPECT_GE(row.at("sgemm_threads_working").get<int>(), 1);
    }
    for (const char* path : {"fwd", "bwd", "sgemm"}) {
      const double rate =
          row.at(std::string(path) == "sgemm" ? "sgemm_gflops" : std::string(path) + "_gflops")
              .get<double>();
      const double per_thread = row.at("gflops_per_thread").at(path).get<double>();
      EXPECT_NEAR(per_thread, rate / threads, 1e-9 * rate) << path;
      const double speedup = row.at("speedup").at(path).get<double>();
      if (threads == 1) {
        EXPECT_EQ(speedup, 1.0) << path;  // the base against itself, exactly
      } else {
        const double base =
            rows[0]
                .at(std::string(path) == "sgemm" ? "sgemm_gflops" : std::string(path) + "_gflops")
                .get<double>();
        EXPECT_NEAR(speedup, rate / base, 1e-9 * speedup) << path;
      }
    }
  }
}

// One count is today's run: no sweep fields. Asked for more threads than cores, the SGEMM ceiling
// runs on the cores (more would only wait for one another), and says so.
TEST(BenchCli, CeilingRunsOnAtMostTheCores) {
  const int cores = qkv::num_cores();
  const CliResult r = run_qkv({"bench", "attention", "--quick", "--case", "decode", "--threads",
                               std::to_string(cores + 1), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::vector<nlohmann::json> rows = json_lines(r.out);
  ASSERT_EQ(rows.size(), 1u) << r.describe();
  EXPECT_EQ(rows[0].at("threads"), cores + 1);
  EXPECT_EQ(rows[0].at("sgemm_blas_threads"), cores);
  EXPECT_FALSE(rows[0].contains("speedup")) << rows[0].dump();
  EXPECT_FALSE(rows[0].contains("gflops_per_thread")) << rows[0].dump();
}

// The table of a sweep: one table a count, each followed by its ceiling's threads, then the
// scaling table, all within 80 columns.
TEST(BenchCli, ThreadSweepTableFitsIn80Columns) {
  const CliResult r =
      run_qkv({"bench", "attention", "--quick", "--case", "1k", "--threads", "1,2"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("threads 1, 2 (a sweep)")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\n1 thread:\n")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\n2 threads:\n")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("sgemm at 1 thread: 1 OpenBLAS thread in force (min(1, ")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\nScaling: GFLOP/s, per thread, and the speed-up over 1 thread\n"))
      << r.out;
  std::istringstream lines(r.out.substr(r.out.find("\nScaling:")));
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("1k ", 0) != 0) continue;
    ++rows;
    EXPECT_LE(columns(line), 80) << line;
    if (rows == 1) EXPECT_THAT(line, HasSubstr("1.00×")) << line;
  }
  EXPECT_EQ(rows, 2) << r.out;
}

}  // namespace

// A one-token ring is too short to time: its efficiencies were ratios of 0.003 ms timings ("140%
// and 176%", issue 26). They show as "—", said so below the table, and as null in JSON.
TEST(BenchCli, RingTooShortToTimeShowsNoEfficiency) {
  const CliResult table = run_qkv({"bench", "ring", "--quick", "--length", "1"});
  if (table.err.find("built without MPI") != std::string::npos) GTEST_SKIP() << table.err;
  ASSERT_EQ(table.exit_code, 0) << table.describe();
  EXPECT_THAT(table.out, HasSubstr("—: too short to time (under 0.1 ms"));
  std::istringstream lines(table.out);
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("full ", 0) != 0 && line.rfind("causal ", 0) != 0) continue;
    ++rows;
    EXPECT_THAT(line, Not(HasSubstr("%"))) << line;  // no efficiency from 0.0 ms
    EXPECT_THAT(line, HasSubstr("—")) << line;
  }
  EXPECT_EQ(rows, 2) << table.out;
  const CliResult json = run_qkv({"bench", "ring", "--quick", "--length", "1", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.describe();
  for (const nlohmann::json& row : json_lines(json.out)) {
    EXPECT_TRUE(row.at("efficiency_fwd").is_null()) << row.dump();
    EXPECT_TRUE(row.at("efficiency_bwd").is_null()) << row.dump();
  }
}
