// tests/cli/attend_limits_test.cpp — `qkv attend` at the edges of what it can compute: a head dim
// of 0, scores that overflow float32 or float64 (an error, never NaN printed as a result), NaN
// inputs (NaN in, NaN out, and said so), and memory: the fused path stays O(L·D) end to end, and
// what needs the L×S matrices says how much before it starts and refuses past --memory-limit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_runner.h"
#include "qkv/npy.h"

namespace {

namespace fs = std::filesystem;
using qkv::DType;
using qkv::Tensor;
using qkv::testing::run_qkv;
using ::testing::HasSubstr;
using ::testing::Not;

class AttendLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("qkv-attend-limits-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A [rows, cols] .npy of N(0, 1) values times `scale`, row `big_row` (if any) set to `big`.
  std::string npy(const std::string& name, int64_t rows, int64_t cols, DType dtype, uint32_t seed,
                  int64_t big_row = -1, double big = 0) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> d;
    Tensor t({rows, cols}, DType::f64);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<double>()[i] = i / cols == big_row ? big : d(rng);
    const std::string path = (dir_ / name).string();
    qkv::write_npy(path, t.to(dtype));
    return path;
  }
  fs::path dir_;
};

// A head dim of 0 used to divide by zero (SIGFPE). Every score is then 0: the plain average.
TEST_F(AttendLimits, HeadDimZeroIsThePlainAverage) {
  const std::string q = npy("q.npy", 3, 0, DType::f32, 1), k = npy("k.npy", 4, 0, DType::f32, 2);
  const std::string v = npy("v.npy", 4, 2, DType::f32, 3), out = (dir_ / "o.npy").string();
  const auto r = run_qkv({"attend", "--query", q, "--keys", k, "--values", v, "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const Tensor o = qkv::read_npy(out), vv = qkv::read_npy(v);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t c = 0; c < 2; ++c) {
      double mean = 0;
      for (int64_t j = 0; j < 4; ++j) mean += vv.value(j * 2 + c) / 4;
      EXPECT_NEAR(o.value(i * 2 + c), mean, 1e-6);
    }
}

// Finite inputs, NaN results: an overflow, reported as an error (exit 1) with nothing printed
// on stdout and no file written — on both paths for float32, and for float64 at 1e200.
TEST_F(AttendLimits, OverflowIsAnErrorNotNaNPrinted) {
  struct Case {
    DType dtype;
    double big;
    std::string path, precision;
  };
  for (const Case& c :
       {Case{DType::f64, 1e200, "auto", "float64"}, Case{DType::f32, 1e20, "fused", "float32"},
        Case{DType::f32, 1e20, "reference", "float32"}}) {
    SCOPED_TRACE(c.precision + " " + c.path);
    const std::string q = npy("q.npy", 3, 4, c.dtype, 1, 1, c.big);
    const std::string k = npy("k.npy", 5, 4, c.dtype, 2, 2, c.big);
    const std::string v = npy("v.npy", 5, 4, c.dtype, 3), out = (dir_ / "o.npy").string();
    const auto r = run_qkv(
        {"attend", "--query", q, "--keys", k, "--values", v, "--path", c.path, "--out", out});
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_EQ(r.out, "");
    EXPECT_THAT(r.err, HasSubstr("qkv: error: the scores overflow " + c.precision +
                                 ": output row [1] has a score or logit beyond"));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
    EXPECT_FALSE(fs::exists(out));
  }
}

// NaN in, NaN out is a result: shown, and said where it came from.
TEST_F(AttendLimits, NaNInputsAreNamedAndTheirRowsShownAsNaN) {
  const std::string q = npy("q.npy", 3, 4, DType::f32, 1, 2, NAN);
  const std::string k = npy("k.npy", 5, 4, DType::f32, 2), v = npy("v.npy", 5, 4, DType::f32, 3);
  const auto r = run_qkv({"attend", "--query", q, "--keys", k, "--values", v});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("note: NaN or ∞ in --query (first at [2, 0]): the rows that read "
                               "them are NaN (NaN in, NaN out)"));
}

// What needs every weight says how much before it starts, and refuses past the limit (exit 2,
// nothing written). L = S = 512: 262,144 weights, 36 bytes each.
TEST_F(AttendLimits, WholeMatrixOutputsSayWhatTheyNeedAndRefusePastTheLimit) {
  const std::string q = npy("q.npy", 512, 8, DType::f32, 1),
                    k = npy("k.npy", 512, 8, DType::f32, 2);
  const std::string v = npy("v.npy", 512, 8, DType::f32, 3);
  const std::string out = (dir_ / "o.npy").string(), w = (dir_ / "w.npy").string();
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--weights", w, "--out", out}, {"--json", "--out", out}}) {
    std::vector<std::string> args = {"attend", "--query",        q,   "--keys", k, "--values",
                                     v,        "--memory-limit", "1M"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_qkv(args);
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_THAT(r.err, HasSubstr("needs all 262,144 attention weights, scores and logits in "
                                 "memory: about "));
    EXPECT_THAT(r.err, HasSubstr(", over the limit of 1.0 MiB (--memory-limit)"));
    EXPECT_FALSE(fs::exists(out));
    EXPECT_FALSE(fs::exists(w));
  }
  // Within the limit it runs.
  const auto ok = run_qkv({"attend", "--query", q, "--keys", k, "--values", v, "--memory-limit",
                           "64M", "--weights", w});
  EXPECT_EQ(ok.exit_code, 0) << ok.describe();
  EXPECT_TRUE(fs::exists(w));
  const auto bad = run_qkv({"attend", "--query", q, "--keys", k, "--values", v, "--memory-limit",
                            "lots", "--weights", w});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--memory-limit: lots is not a size"));
}

// The fused path with --out keeps O(L·D) memory: from L = S = 1024 to 4096 its peak grows by a few
// MiB (Q, K, V and the output), never by an L×S matrix (64 MiB in float32 at 4096; the float64
// reference with every weight took 16.8M × 36 bytes = 604 MB before issue 11). The growth, not the
// peak, is asserted: a sanitizer's shadow memory adds ~150 MiB that does not grow with L.
TEST_F(AttendLimits, FusedPathStaysLinearInMemory) {
  double peak_mib[2] = {0, 0};
  const int64_t sizes[2] = {1024, 4096};
  for (int i = 0; i < 2; ++i) {
    const int64_t n = sizes[i];
    const std::string q = npy("q.npy", n, 64, DType::f32, 1),
                      k = npy("k.npy", n, 64, DType::f32, 2);
    const std::string v = npy("v.npy", n, 64, DType::f32, 3), out = (dir_ / "o.npy").string();
    const auto r = run_qkv(
        {"attend", "--query", q, "--keys", k, "--values", v, "--path", "fused", "--out", out});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_THAT(r.out, HasSubstr("top 3 keys of the first 8 queries:"));
    rusage usage{};
    ::getrusage(RUSAGE_CHILDREN, &usage);  // the largest child so far: the larger run, 4096 last
    peak_mib[i] = usage.ru_maxrss / 1024.0;
  }
  RecordProperty("peak_rss_mib_1024", std::to_string(peak_mib[0]));
  RecordProperty("peak_rss_mib_4096", std::to_string(peak_mib[1]));
  EXPECT_LT(peak_mib[1] - peak_mib[0], 32)
      << "growth of the peak resident memory of qkv attend --path fused from L = S = 1024 ("
      << peak_mib[0] << " MiB) to 4096 (" << peak_mib[1] << " MiB)";
}

// The summary of a large case runs the reference on its first rows alone: their weights must be
// those of the whole problem, masks and causal alignment included.
TEST_F(AttendLimits, SummaryRowsMatchTheWholeProblem) {
  // [B=2, H=2, L=20, D=4] queries, [2, 1, 30, 4] keys (GQA), bottom-right causal, key lengths.
  Tensor q({2, 2, 20, 4}, DType::f64), k({2, 1, 30, 4}, DType::f64), v({2, 1, 30, 3}, DType::f64);
  std::mt19937 rng(7);
  std::normal_distribution<double> d;
  for (Tensor* t : {&q, &k, &v})
    for (int64_t i = 0; i < t->numel(); ++i) t->data<double>()[i] = 2 * d(rng);
  const std::string qp = (dir_ / "q.npy").string(), kp = (dir_ / "k.npy").string(),
                    vp = (dir_ / "v.npy").string();
  qkv::write_npy(qp, q), qkv::write_npy(kp, k), qkv::write_npy(vp, v);
  const std::vector<std::string> args = {
      "attend",       "--query",       qp,      "--keys",   kp,  "--values", vp, "--causal",
      "bottom-right", "--key-lengths", "30,25", "--digits", "6", "--top",    "2"};
  const auto text = run_qkv(args);
  ASSERT_EQ(text.exit_code, 0) << text.describe();
  std::vector<std::string> with_json = args;
  with_json.push_back("--json");
  const auto json = run_qkv(with_json);
  ASSERT_EQ(json.exit_code, 0) << json.describe();
  const auto weights = nlohmann::json::parse(json.out)["weights"];
  // "    q3 →  k14 0.512345  k12 0.2..." for pair 0 (batch 0, head 0): check every listed weight.
  std::istringstream lines(text.out);
  std::string line;
  int checked = 0;
  int64_t pair = -1;
  while (std::getline(lines, line)) {
    if (line.rfind("  batch ", 0) == 0) ++pair;
    const auto arrow = line.find(" →");
    if (pair < 0 || arrow == std::string::npos) continue;
    const int64_t i = std::stoll(line.substr(line.find('q') + 1));
    std::istringstream rest(line.substr(arrow + 4));
    std::string key;
    double w = 0;
    while (rest >> key >> w) {
      const int64_t j = std::stoll(key.substr(1));
      const double want = weights[pair / 2][pair % 2][i][j].get<double>();
      EXPECT_NEAR(w, want, 5e-7) << line;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * 8 * 2) << text.out;  // 2 pairs × 8 queries × top 2
}

}  // namespace
