// tests/cli/attend_inline_test.cpp — `qkv attend` with matrices typed on the command line
// ("[[1, 0], [0, 1]]"): the result is the one of the same numbers in .npy files, worked out here
// by hand as well, and every malformed matrix is one usage error naming the option.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_expect.h"
#include "cli/cli_runner.h"

namespace {

namespace fs = std::filesystem;
using qkv::testing::CliResult;
using qkv::testing::expect_one_line_error;
using qkv::testing::run_qkv;
using ::testing::HasSubstr;

// A float64 .npy file (format 1.0, little-endian), written here rather than by src/core/npy.cpp.
std::string npy_f64(const std::vector<int64_t>& shape, const std::vector<double>& values) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (" + dims + "), }";
  const std::size_t unpadded = 6 + 2 + 2 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(dict.size() & 0xff);
  bytes += static_cast<char>(dict.size() >> 8);
  return bytes + dict +
         std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
}

class AttendInline : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "qkv-attend-inline-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

const char* const kQ = "[[1, 0], [0, 1]]";
const char* const kK = " [[1,0],[0,1],[1,1]]";  // leading spaces are allowed
const char* const kV = "[[1],[2],[3]]";

std::vector<double> json_out(const CliResult& r) {
  std::vector<double> out;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  for (const auto& row : doc.at("out"))
    for (const auto& x : row) out.push_back(x.get<double>());
  return out;
}

TEST_F(AttendInline, InlineMatricesGiveTheResultOfTheSameNpyFiles) {
  const CliResult inline_run =
      run_qkv({"attend", "--query", kQ, "--keys", kK, "--values", kV, "--json"});
  ASSERT_EQ(inline_run.exit_code, 0) << inline_run.describe();
  const std::string q = write("q.npy", npy_f64({2, 2}, {1, 0, 0, 1}));
  const std::string k = write("k.npy", npy_f64({3, 2}, {1, 0, 0, 1, 1, 1}));
  const std::string v = write("v.npy", npy_f64({3, 1}, {1, 2, 3}));
  const CliResult file_run =
      run_qkv({"attend", "--query", q, "--keys", k, "--values", v, "--json"});
  ASSERT_EQ(file_run.exit_code, 0) << file_run.describe();
  const std::vector<double> a = json_out(inline_run), b = json_out(file_run);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a, b);
  // By hand: row 0 scores (1, 0, 1)/√2, so weights ∝ (e^s, 1, e^s) with s = 1/√2, and the output
  // is (1·e^s + 2 + 3·e^s) / (2e^s + 1); row 1 scores (0, 1, 1)/√2 give (1 + 2e^s + 3e^s)/(2e^s +
  // 1).
  const double e = std::exp(1 / std::sqrt(2.0));
  EXPECT_NEAR(a[0], (4 * e + 2) / (2 * e + 1), 1e-12);
  EXPECT_NEAR(a[1], (5 * e + 1) / (2 * e + 1), 1e-12);
}

TEST_F(AttendInline, AFlatListIsOneRow) {
  const CliResult r = run_qkv(
      {"attend", "--query", "[1, 0]", "--keys", kK, "--values", kV, "--json", "--score", "dot"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::vector<double> out = json_out(r);
  ASSERT_EQ(out.size(), 1u);  // [1, Dv]: one query row
  const double e = std::exp(1.0);
  EXPECT_NEAR(out[0], (4 * e + 2) / (2 * e + 1), 1e-12);
}

// A bool mask hides key 0 from query 0 and key 2 from query 1; general's W inline swaps the axes.
TEST_F(AttendInline, MaskAndParamsCanBeInline) {
  const CliResult r = run_qkv({"attend", "--query", kQ, "--keys", kK, "--values", kV, "--json",
                               "--mask", "[[false, true, true], [true, true, false]]", "--score",
                               "general", "--params", "[[0, 1], [1, 0]]"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::vector<double> out = json_out(r);
  ASSERT_EQ(out.size(), 2u);
  // q0 W = (0, 1): scores of keys 1, 2 are 1, 1 → the mean of 2 and 3.
  EXPECT_NEAR(out[0], 2.5, 1e-12);
  // q1 W = (1, 0): scores of keys 0, 1 are 1, 0 → (e·1 + 2) / (e + 1).
  EXPECT_NEAR(out[1], (std::exp(1.0) + 2) / (std::exp(1.0) + 1), 1e-12);
}

TEST_F(AttendInline, ThreeDeepIsHeadsRowsColumns) {
  const CliResult r = run_qkv({"attend", "--query", "[[[1, 0]], [[0, 1]]]", "--keys",
                               "[[[1, 0], [0, 1]], [[1, 0], [0, 1]]]", "--values",
                               "[[[1], [2]], [[1], [2]]]", "--json", "--score", "dot"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto out = nlohmann::json::parse(r.out).at("out");
  ASSERT_EQ(out.size(), 2u);  // [H, L, Dv] = [2, 1, 1]
  const double e = std::exp(1.0);
  EXPECT_NEAR(out[0][0][0].get<double>(), (e + 2) / (e + 1), 1e-12);
  EXPECT_NEAR(out[1][0][0].get<double>(), (1 + 2 * e) / (e + 1), 1e-12);
}

void expect_inline_error(const std::string& query, const std::string& what) {
  const CliResult r = run_qkv({"attend", "--query", query, "--keys", kK, "--values", kV});
  expect_one_line_error(r, 2, "--query inline matrix");
  EXPECT_THAT(r.err, HasSubstr(what)) << r.describe();
}

TEST_F(AttendInline, RaggedRowsAreAUsageError) {
  expect_inline_error("[[1, 0], [0]]", "ragged: [1] has 1 entries but the first has 2");
}

TEST_F(AttendInline, NonNumbersAreAUsageError) {
  expect_inline_error("[[1, \"a\"], [0, 1]]", "string at [0][1]");
  expect_inline_error("[[1, true], [0, 1]]", "boolean at [0][1]");
  expect_inline_error("[[1, 0], 5]", "number at [1] where a list of 2");
}

TEST_F(AttendInline, NanAndInfinityAreAUsageError) {
  expect_inline_error("[[NaN, 0], [0, 1]]", "NaN or Infinity");
  expect_inline_error("[[1, -Infinity]]", "NaN or Infinity");
  expect_inline_error("[[1e999, 0]]", "beyond float64's range");
}

TEST_F(AttendInline, EmptyMatricesAreAUsageError) {
  expect_inline_error("[]", "empty list");
  expect_inline_error("[[]]", "empty list at [0]");
}

TEST_F(AttendInline, InvalidJsonAndDeepNestingAreAUsageError) {
  expect_inline_error("[[1, 0], [0, 1]", "not valid JSON");
  expect_inline_error("[[[[1]]]]", "nests 4 lists deep");
}

// 20,000 nested empty lists gave a 60 KB line: "has an empty list at [0][0][0]…" (issue 26).
TEST_F(AttendInline, DeepNestingIsOneShortLine) {
  const std::string deep = std::string(20'000, '[') + std::string(20'000, ']');
  const CliResult r =
      run_qkv({"attend", "--query", kQ, "--keys", kK, "--values", kV, "--mask", deep});
  expect_one_line_error(r, 2,
                        "qkv: error: --mask inline matrix nests more than 64 lists deep; at most 3 "
                        "([H, L, D]; [B, H, L, D] needs a .npy file); expected rows of numbers in "
                        "JSON, e.g. \"[[1, 0], [0, 1]]\"\n");
  expect_inline_error("[[[[[[[[[[]]]]]]]]]]", "nests 10 lists deep; at most 3");
}

TEST_F(AttendInline, MoreThan64KiBIsAUsageError) {
  std::string big = "[[0";
  while (big.size() < 70'000) big += ",0";
  expect_inline_error(big + "]]", "over the limit of 65,536");
}

TEST_F(AttendInline, MixedBoolAndNumberMaskIsAUsageError) {
  const CliResult r = run_qkv({"attend", "--query", kQ, "--keys", kK, "--values", kV, "--mask",
                               "[[true, 0, 1], [1, 1, 1]]"});
  expect_one_line_error(r, 2, "--mask inline matrix mixes true/false with numbers");
}

// A shape error names the inline argument as it was typed.
TEST_F(AttendInline, ShapeErrorsNameTheInlineArgument) {
  const CliResult r = run_qkv({"attend", "--query", "[[1, 0, 0]]", "--keys", kK, "--values", kV});
  expect_one_line_error(r, 2, "--query [[1, 0, 0]]");
}

}  // namespace
