// tests/cli/attend_cli_test.cpp — `qkv attend` as a user meets it: every error path gives one
// line "qkv: error: ..." naming the option or file, what was found and what was expected, with
// exit code 2 (usage or input) or 1 (runtime), and leaves no file behind; the happy paths print
// what they promise. Input .npy files are written byte by byte here (format v1.0), independently
// of src/core/npy.cpp, so a bug there cannot hide a bug in the command.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli_runner.h"

namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Matcher;
using ::testing::StartsWith;
using Shape = std::vector<int64_t>;
using qkv::testing::CliResult;
using qkv::testing::run_qkv;

// ---- .npy bytes by hand (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html)

std::string shape_tuple(const Shape& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += std::to_string(shape[i]) + ", ";
  if (shape.size() > 1) text.resize(text.size() - 2);  // (2, 3); a 1-tuple keeps its comma: (8,)
  if (shape.size() == 1) text.resize(text.size() - 1);
  return text + ")";
}

// Magic, version 1.0, little-endian uint16 header length, the header dict padded with spaces and
// ended by '\n' so that the data starts at a multiple of 64 bytes.
std::string npy_header(std::string_view descr, const Shape& shape, bool fortran_order = false,
                       std::string_view magic = "\x93NUMPY") {
  std::string dict = "{'descr': '" + std::string(descr) +
                     "', 'fortran_order': " + (fortran_order ? "True" : "False") +
                     ", 'shape': " + shape_tuple(shape) + ", }";
  const size_t unpadded = magic.size() + 2 + 2 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string bytes(magic);
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(dict.size() & 0xff);
  bytes += static_cast<char>(dict.size() >> 8);
  return bytes + dict;
}

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Deterministic, varied values: element i of a file with seed s.
double pattern_value(int64_t i, int seed) { return std::sin(0.7 * static_cast<double>(i) + seed); }

template <class T>
std::string raw_bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

std::string npy_f32(const Shape& shape, int seed = 0) {
  std::vector<float> values(static_cast<size_t>(numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(pattern_value(i, seed));
  return npy_header("<f4", shape) + raw_bytes(values);
}

std::string npy_f64(const Shape& shape, const std::vector<double>& values) {
  return npy_header("<f8", shape) + raw_bytes(values);
}

std::string npy_f64(const Shape& shape, int seed = 0) {
  std::vector<double> values(static_cast<size_t>(numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = pattern_value(i, seed);
  return npy_f64(shape, values);
}

std::string npy_bool(const Shape& shape, const std::vector<bool>& values) {
  std::string data;
  for (bool b : values) data += b ? '\x01' : '\x00';
  return npy_header("|b1", shape) + data;
}

std::string npy_i64(const Shape& shape) {
  std::vector<int64_t> values(static_cast<size_t>(numel(shape)), 1);
  return npy_header("<i8", shape) + raw_bytes(values);
}

// A .npy file read back: its dtype string, shape and values as doubles ('<f4' or '<f8' only).
struct NpyFile {
  std::string descr;
  Shape shape;
  std::vector<double> values;
};

NpyFile read_npy_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  NpyFile file;
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) {
    ADD_FAILURE() << path << " is not a .npy file";
    return file;
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  const size_t length_bytes = major == 1 ? 2 : 4;
  size_t header_len = 0;
  for (size_t i = 0; i < length_bytes; ++i)
    header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
  const size_t data_start = 8 + length_bytes + header_len;
  const std::string header = bytes.substr(8 + length_bytes, header_len);
  const size_t d = header.find("'descr': '") + 10;
  file.descr = header.substr(d, header.find('\'', d) - d);
  EXPECT_THAT(header, HasSubstr("'fortran_order': False")) << path;
  size_t s = header.find('(', header.find("'shape'")) + 1;
  const size_t end = header.find(')', s);
  while (s < end) {
    size_t next = header.find(',', s);
    if (next == std::string::npos || next > end) next = end;
    const std::string dim = header.substr(s, next - s);
    if (dim.find_first_not_of(' ') != std::string::npos) file.shape.push_back(std::stoll(dim));
    s = next + 1;
  }
  const size_t count = static_cast<size_t>(numel(file.shape));
  const char* data = bytes.data() + data_start;
  const size_t item = file.descr == "<f8" ? 8 : file.descr == "<f4" ? 4 : 0;
  if (item == 0 || bytes.size() != data_start + count * item) {
    ADD_FAILURE() << path << ": dtype " << file.descr << ", " << bytes.size() - data_start
                  << " data bytes for " << count << " elements";
    return file;
  }
  for (size_t i = 0; i < count; ++i) {
    if (item == 8) {
      double x;
      std::memcpy(&x, data + 8 * i, 8);
      file.values.push_back(x);
    } else {
      float x;
      std::memcpy(&x, data + 4 * i, 4);
      file.values.push_back(x);
    }
  }
  return file;
}

// ---- matchers on the error line

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// `n` stands alone in the text as a number (not as a digit of another number). A plain class, not
// MATCHER_P: the test program links gtest only, and MATCHER_P needs libgmock.
class HasNumberMatcher {
 public:
  explicit HasNumberMatcher(int64_t n) : digits_(std::to_string(n)) {}
  bool MatchAndExplain(const std::string& text, ::testing::MatchResultListener*) const {
    for (size_t at = text.find(digits_); at != std::string::npos; at = text.find(digits_, at + 1)) {
      const size_t after = at + digits_.size();
      const bool left_ok = at == 0 || !std::isdigit(static_cast<unsigned char>(text[at - 1]));
      const bool right_ok =
          after == text.size() || !std::isdigit(static_cast<unsigned char>(text[after]));
      if (left_ok && right_ok) return true;
    }
    return false;
  }
  void DescribeTo(std::ostream* os) const { *os << "contains the number " << digits_; }
  void DescribeNegationTo(std::ostream* os) const { *os << "lacks the number " << digits_; }

 private:
  std::string digits_;
};

::testing::PolymorphicMatcher<HasNumberMatcher> HasNumber(int64_t n) {
  return ::testing::MakePolymorphicMatcher(HasNumberMatcher(n));
}

// ---- the fixture: a fresh temp dir with valid inputs q [2,4,3,8], k/v [2,4,5,8] (float32)

constexpr int64_t kB = 2, kH = 4, kL = 3, kS = 5, kD = 8;

class AttendCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "qkv-attend-cli-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    q_ = write("q.npy", npy_f32({kB, kH, kL, kD}, 1));
    k_ = write("k.npy", npy_f32({kB, kH, kS, kD}, 2));
    v_ = write("v.npy", npy_f32({kB, kH, kS, kD}, 3));
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return path(name);
  }
  std::set<std::string> listing() const {
    std::set<std::string> names;
    for (const auto& entry : fs::recursive_directory_iterator(dir_))
      names.insert(entry.path().string());
    return names;
  }

  // `qkv attend --query q --keys k --values v` followed by `extra`.
  std::vector<std::string> attend(std::initializer_list<std::string> extra = {}) const {
    std::vector<std::string> args{"attend", "--query", q_, "--keys", k_, "--values", v_};
    args.insert(args.end(), extra);
    return args;
  }

  // Runs `args` (adding --out and --weights into the temp dir unless `add_outputs` is false) and
  // checks the error contract: the exit code, one line on stderr "qkv: error: ..." matching every
  // matcher in `words` (on the lower-cased line), nothing new in the temp dir.
  CliResult expect_error(std::vector<std::string> args, int exit_code,
                         std::vector<Matcher<std::string>> words, bool add_outputs = true) {
    if (add_outputs) {
      args.insert(args.end(), {"--out", path("out.npy"), "--weights", path("weights.npy")});
    }
    const std::set<std::string> before = listing();
    const CliResult r = run_qkv(args);
    EXPECT_EQ(r.exit_code, exit_code) << r.describe();
    EXPECT_THAT(r.err, StartsWith("qkv: error: ")) << r.describe();
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "not one line: " << r.describe();
    EXPECT_TRUE(!r.err.empty() && r.err.back() == '\n') << r.describe();
    const std::string line = lower(r.err);
    for (const auto& word : words) EXPECT_THAT(line, word) << r.describe();
    EXPECT_FALSE(fs::exists(path("out.npy"))) << r.describe();
    EXPECT_FALSE(fs::exists(path("weights.npy"))) << r.describe();
    EXPECT_EQ(listing(), before) << "files left behind by " << r.describe();
    return r;
  }

  fs::path dir_;
  std::string q_, k_, v_;
};

Matcher<std::string> Has(const std::string& word) { return HasSubstr(lower(word)); }

// ---- input files that cannot be read

TEST_F(AttendCli, MissingQueryFileIsAnInputError) {
  const std::string missing = path("no_such_query.npy");
  expect_error({"attend", "--query", missing, "--keys", k_, "--values", v_}, 2,
               {Has("no_such_query.npy")});
}

// The library's messages name fields ({keys}), the command shows its options; what the user typed
// is shown as typed, braces and all.
TEST_F(AttendCli, TypedBracesAreShownAsTyped) {
  const std::string keys = path("{keys}.npy");
  expect_error({"attend", "--query", q_, "--keys", keys, "--values", v_}, 2,
               {Has("--keys " + keys + ": cannot open")});
  expect_error(attend({"--score", "{query}"}), 2, {Has("--score '{query}' is unknown")});
}

TEST_F(AttendCli, MissingValuesFileIsAnInputError) {
  expect_error({"attend", "--query", q_, "--keys", k_, "--values", path("gone_values.npy")}, 2,
               {Has("gone_values.npy")});
}

TEST_F(AttendCli, BadMagicIsAnInputError) {
  std::string bytes = npy_f32({kB, kH, kS, kD}, 2);
  bytes[5] = 'X';  // \x93NUMPX
  const std::string keys = write("bad_magic.npy", bytes);
  expect_error({"attend", "--query", q_, "--keys", keys, "--values", v_}, 2,
               {Has("bad_magic.npy")});
}

TEST_F(AttendCli, TextFileIsAnInputError) {
  const std::string keys = write("notes.npy", "keys, values and queries\n");
  expect_error({"attend", "--query", q_, "--keys", keys, "--values", v_}, 2, {Has("notes.npy")});
}

TEST_F(AttendCli, TruncatedDataIsAnInputError) {
  std::string bytes = npy_f32({kB, kH, kL, kD}, 1);
  bytes.resize(bytes.size() - 4 * 10);  // ten floats short
  const std::string query = write("short_data.npy", bytes);
  expect_error({"attend", "--query", query, "--keys", k_, "--values", v_}, 2,
               {Has("short_data.npy")});
}

TEST_F(AttendCli, TruncatedHeaderIsAnInputError) {
  const std::string query = write("short_header.npy", npy_f32({kB, kH, kL, kD}, 1).substr(0, 30));
  expect_error({"attend", "--query", query, "--keys", k_, "--values", v_}, 2,
               {Has("short_header.npy")});
}

TEST_F(AttendCli, EmptyFileIsAnInputError) {
  const std::string query = write("empty.npy", "");
  expect_error({"attend", "--query", query, "--keys", k_, "--values", v_}, 2, {Has("empty.npy")});
}

TEST_F(AttendCli, FortranOrderIsAnInputError) {
  std::vector<float> values(static_cast<size_t>(kB * kH * kL * kD), 0.5f);
  const std::string query =
      write("fortran.npy", npy_header("<f4", {kB, kH, kL, kD}, true) + raw_bytes(values));
  expect_error({"attend", "--query", query, "--keys", k_, "--values", v_}, 2,
               {Has("fortran.npy"), Has("fortran")});
}

TEST_F(AttendCli, BigEndianIsAnInputError) {
  std::vector<float> values(static_cast<size_t>(kB * kH * kS * kD), 0.5f);
  const std::string values_path =
      write("big_endian.npy", npy_header(">f4", {kB, kH, kS, kD}) + raw_bytes(values));
  expect_error({"attend", "--query", q_, "--keys", k_, "--values", values_path}, 2,
               {Has("big_endian.npy"), AnyOf(Has(">f4"), Has("big"))});
}

TEST_F(AttendCli, Int64IsAnInputError) {
  const std::string keys = write("int64.npy", npy_i64({kB, kH, kS, kD}));
  expect_error({"attend", "--query", q_, "--keys", keys, "--values", v_}, 2,
               {Has("int64.npy"), AnyOf(Has("<i8"), Has("int64"))});
}

// ---- readable files with the wrong dtype, rank or shape

TEST_F(AttendCli, BoolQueryIsADtypeError) {
  const std::string query =
      write("q_bool.npy", npy_bool({kB, kH, kL, kD}, std::vector<bool>(kB * kH * kL * kD, true)));
  expect_error({"attend", "--query", query, "--keys", k_, "--values", v_}, 2,
               {AnyOf(Has("--query"), Has("q_bool.npy")), Has("bool"), Has("float")});
}

TEST_F(AttendCli, Rank1QueryIsARankError) {
  const std::string query = write("q_rank1.npy", npy_f32({kD}, 1));
  expect_error({"attend", "--query", query, "--keys", k_, "--values", v_}, 2,
               {AnyOf(Has("--query"), Has("q_rank1.npy")), AnyOf(Has("[8]"), Has("rank 1"))});
}

TEST_F(AttendCli, KeysHeadDimDifferentFromQueryIsAShapeError) {
  const std::string keys = write("k_d7.npy", npy_f32({kB, kH, kS, 7}, 2));
  expect_error({"attend", "--query", q_, "--keys", keys, "--values", v_}, 2,
               {AnyOf(Has("--keys"), Has("k_d7.npy")), HasNumber(7), HasNumber(8)});
}

TEST_F(AttendCli, ValuesLengthDifferentFromKeysIsAShapeError) {
  const std::string values = write("v_s6.npy", npy_f32({kB, kH, 6, kD}, 3));
  expect_error({"attend", "--query", q_, "--keys", k_, "--values", values}, 2,
               {AnyOf(Has("--values"), Has("v_s6.npy")), HasNumber(6), HasNumber(5)});
}

TEST_F(AttendCli, BatchMismatchIsAShapeError) {
  const std::string keys = write("k_b6.npy", npy_f32({6, kH, kS, kD}, 2));
  const std::string values = write("v_b6.npy", npy_f32({6, kH, kS, kD}, 3));
  expect_error({"attend", "--query", q_, "--keys", keys, "--values", values}, 2,
               {AnyOf(Has("--keys"), Has("k_b6.npy")), HasNumber(6), HasNumber(2)});
}

TEST_F(AttendCli, QueryHeadsNotAMultipleOfKeyHeadsIsAShapeError) {
  const std::string keys = write("k_h3.npy", npy_f32({kB, 3, kS, kD}, 2));
  const std::string values = write("v_h3.npy", npy_f32({kB, 3, kS, kD}, 3));
  expect_error({"attend", "--query", q_, "--keys", keys, "--values", values}, 2,
               {AnyOf(Has("--keys"), Has("k_h3.npy")), HasNumber(3), HasNumber(4)});
}

TEST_F(AttendCli, ValuesHeadsDifferentFromKeysIsAShapeError) {
  const std::string values = write("v_h2.npy", npy_f32({kB, 2, kS, kD}, 3));
  expect_error({"attend", "--query", q_, "--keys", k_, "--values", values}, 2,
               {AnyOf(Has("--values"), Has("v_h2.npy")), HasNumber(2), HasNumber(4)});
}

TEST_F(AttendCli, QueryLabelsCountDifferentFromRowsIsAnError) {
  expect_error(attend({"--query-labels", "a,b"}), 2,
               {Has("--query-labels"), HasNumber(2), HasNumber(kL)});
}

TEST_F(AttendCli, KeyLabelsCountDifferentFromRowsIsAnError) {
  expect_error(attend({"--key-labels", "x,y,z"}), 2,
               {Has("--key-labels"), HasNumber(3), HasNumber(kS)});
}

// ---- options with wrong values

TEST_F(AttendCli, UnknownScoreIsAUsageError) {
  expect_error(attend({"--score", "softmaxx"}), 2, {Has("--score"), Has("softmaxx")});
}

TEST_F(AttendCli, UnknownCausalIsAUsageError) {
  expect_error(attend({"--causal", "diagonal"}), 2, {Has("--causal"), Has("diagonal")});
}

TEST_F(AttendCli, UnknownNormalizeIsAUsageError) {
  expect_error(attend({"--normalize", "sparsemax"}), 2, {Has("--normalize"), Has("sparsemax")});
}

TEST_F(AttendCli, NanScaleIsAUsageError) {
  expect_error(attend({"--scale", "nan"}), 2, {Has("--scale"), Has("nan")});
}

TEST_F(AttendCli, NonNumericScaleIsAUsageError) {
  expect_error(attend({"--scale", "big"}), 2, {Has("--scale"), Has("big")});
}

TEST_F(AttendCli, InfiniteScaleIsAUsageError) {
  // docs/CONVENTIONS.md §5: any finite scale is allowed.
  expect_error(attend({"--scale", "inf"}), 2, {Has("--scale"), Has("inf")});
}

TEST_F(AttendCli, MaskThatCannotBroadcastIsAShapeError) {
  const std::string mask = write("mask_2x7.npy", npy_f32({2, 7}, 4));
  expect_error(attend({"--mask", mask}), 2,
               {AnyOf(Has("--mask"), Has("mask_2x7.npy")), HasNumber(7)});
}

TEST_F(AttendCli, BoolMaskWithWrongHeadsIsAShapeError) {
  const std::string mask =
      write("mask_h3.npy", npy_bool({kB, 3, kL, kS}, std::vector<bool>(kB * 3 * kL * kS, true)));
  expect_error(attend({"--mask", mask}), 2,
               {AnyOf(Has("--mask"), Has("mask_h3.npy")), HasNumber(3)});
}

TEST_F(AttendCli, Int64MaskIsAnInputError) {
  const std::string mask = write("mask_i8.npy", npy_i64({kL, kS}));
  expect_error(attend({"--mask", mask}), 2,
               {AnyOf(Has("--mask"), Has("mask_i8.npy")), AnyOf(Has("<i8"), Has("int64"))});
}

TEST_F(AttendCli, KeyLengthsWithWrongCountIsAnError) {
  expect_error(attend({"--key-lengths", "3,4,5"}), 2, {Has("--key-lengths"), HasNumber(kB)});
}

TEST_F(AttendCli, KeyLengthsThatAreNotNumbersIsAnError) {
  expect_error(attend({"--key-lengths", "3,four"}), 2, {Has("--key-lengths"), Has("four")});
}

TEST_F(AttendCli, HtmlWritesOneSelfContainedReport) {
  const CliResult r = run_qkv(attend({"--html", path("r.html")}));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("wrote " + path("r.html")));
  std::ifstream in(path("r.html"));
  const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(page, HasSubstr("<script id=\"data\" type=\"application/json\">"));
  EXPECT_EQ(page.find("http"), std::string::npos);
  // Two batch entries: a block each, with every head's logits and weights.
  size_t blocks = 0;
  for (size_t at = page.find("\"logits\""); at != std::string::npos;
       at = page.find("\"logits\"", at + 1))
    ++blocks;
  EXPECT_EQ(blocks, static_cast<size_t>(kB));
}

TEST_F(AttendCli, HtmlOfTooManyWeightsIsAUsageErrorBeforeAnyFile) {
  const std::string q = write("big_q.npy", npy_f32({2048, 2}, 1));
  const std::string k = write("big_k.npy", npy_f32({1025, 2}, 2));
  const std::string v = write("big_v.npy", npy_f32({1025, 2}, 3));
  expect_error({"attend", "--query", q, "--keys", k, "--values", v, "--html", path("r.html")}, 2,
               {Has("--html"), Has("2099200"), Has("at most 2097152")});
  EXPECT_FALSE(fs::exists(path("r.html")));
}

TEST_F(AttendCli, KeyLengthLongerThanTheKeysIsAnError) {
  expect_error(attend({"--key-lengths", "3,9"}), 2, {Has("--key-lengths"), HasNumber(9)});
}

TEST_F(AttendCli, NegativeKeyLengthIsAnError) {
  expect_error(attend({"--key-lengths", "-1,2"}), 2, {Has("--key-lengths"), Has("-1")});
}

TEST_F(AttendCli, ParamsForAScoreWithoutParamsIsAnError) {
  const std::string w = write("w.npy", npy_f32({kD, kD}, 5));
  expect_error(attend({"--score", "dot", "--params", w}), 2, {Has("--params"), Has("dot")});
}

TEST_F(AttendCli, GeneralWithoutParamsIsAnError) {
  expect_error(attend({"--score", "general"}), 2, {Has("--params"), Has("general")});
}

TEST_F(AttendCli, GeneralWithTwoParamsIsAnError) {
  const std::string w = write("w.npy", npy_f32({kD, kD}, 5));
  expect_error(attend({"--score", "general", "--params", w, w}), 2,
               {Has("--params"), Has("general")});
}

TEST_F(AttendCli, GeneralWithWrongShapeParamIsAnError) {
  const std::string w = write("w_5x5.npy", npy_f32({5, 5}, 5));
  expect_error(attend({"--score", "general", "--params", w}), 2,
               {AnyOf(Has("--params"), Has("w_5x5.npy")), HasNumber(5)});
}

TEST_F(AttendCli, AdditiveWithOneParamIsAnError) {
  const std::string w_q = write("w_q.npy", npy_f32({6, kD}, 5));
  expect_error(attend({"--score", "additive", "--params", w_q}), 2,
               {Has("--params"), Has("additive"), AnyOf(HasNumber(3), Has("three"))});
}

TEST_F(AttendCli, AdditiveWithoutParamsIsAnError) {
  expect_error(attend({"--score", "additive"}), 2, {Has("--params"), Has("additive")});
}

TEST_F(AttendCli, UnknownExampleIsAnError) {
  expect_error({"attend", "--example", "nonesuch"}, 2, {Has("--example"), Has("nonesuch")},
               /*add_outputs=*/false);
}

// An example sets its own inputs and options; one it would ignore is refused by name, even when
// its value is the default (--score scaled-dot), and nothing is printed.
TEST_F(AttendCli, ExampleWithAnOptionItIgnoresIsAUsageError) {
  for (const std::vector<std::string>& option : {std::vector<std::string>{"--score", "additive"},
                                                 {"--score", "scaled-dot"},
                                                 {"--scale", "2"},
                                                 {"--normalize", "none"},
                                                 {"--causal", "top-left"},
                                                 {"--key-lengths", "1"},
                                                 {"--path", "reference"},
                                                 {"--top", "5"},
                                                 {"--query-labels", "a"},
                                                 {"--memory-limit", "1G"},
                                                 {"--query", "q.npy"},
                                                 {"--out", "o.npy"}}) {
    std::vector<std::string> args = {"attend", "--example", "phonebook"};
    args.insert(args.end(), option.begin(), option.end());
    const CliResult r =
        expect_error(args, 2, {Has(option[0]), Has("--example"), Has("--digits")}, false);
    EXPECT_TRUE(r.out.empty()) << r.describe();
  }
}

TEST_F(AttendCli, ExampleTakesJsonAndDigits) {
  const CliResult r = run_qkv({"attend", "--example", "phonebook", "--json", "--digits", "4"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(nlohmann::json::parse(r.out).at("example"), "phonebook");
}

TEST_F(AttendCli, MissingKeysOptionIsAUsageError) {
  expect_error({"attend", "--query", q_, "--values", v_}, 2, {Has("--keys")});
}

TEST_F(AttendCli, UnknownOptionIsAUsageError) {
  expect_error(attend({"--bogus-option", "1"}), 2, {Has("--bogus-option")});
}

// ---- runtime failures while writing: exit 1, and no file left behind

TEST_F(AttendCli, OutIntoMissingDirectoryIsARuntimeError) {
  const std::string out = path("no_such_dir/out.npy");
  expect_error(attend({"--out", out}), 1, {AnyOf(Has("--out"), Has("no_such_dir"))},
               /*add_outputs=*/false);
  EXPECT_FALSE(fs::exists(path("no_such_dir")));
}

TEST_F(AttendCli, OutUnderARegularFileIsARuntimeError) {
  // Not a permission test: the tests may run as root, who can write anywhere.
  write("plain_file", "not a directory");
  expect_error(attend({"--out", path("plain_file/out.npy")}), 1,
               {AnyOf(Has("--out"), Has("plain_file"))}, /*add_outputs=*/false);
}

TEST_F(AttendCli, WeightsFailingRemovesTheOutFile) {
  expect_error(attend({"--out", path("out.npy"), "--weights", path("missing_dir/w.npy")}), 1,
               {AnyOf(Has("--weights"), Has("missing_dir"))}, /*add_outputs=*/false);
}

TEST_F(AttendCli, LseFailingRemovesOutAndWeights) {
  expect_error(attend({"--out", path("out.npy"), "--weights", path("weights.npy"), "--lse",
                       path("missing_dir/lse.npy")}),
               1, {AnyOf(Has("--lse"), Has("missing_dir"))}, /*add_outputs=*/false);
  EXPECT_FALSE(fs::exists(path("lse.npy")));
}

// ---- the command itself

TEST(QkvCli, NoArgumentsIsAUsageError) {
  const CliResult r = run_qkv({});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
}

TEST(QkvCli, UnknownSubcommandIsAUsageError) {
  const CliResult r = run_qkv({"frobnicate"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("frobnicate")) << r.describe();
}

TEST(QkvCli, AttendWithoutArgumentsIsAUsageError) {
  const CliResult r = run_qkv({"attend"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
}

TEST(QkvCli, AttendHelpShowsAnExample) {
  const CliResult r = run_qkv({"attend", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("qkv attend --")) << r.describe();
  EXPECT_THAT(r.out, AllOf(HasSubstr("--query"), HasSubstr("--score"), HasSubstr("--causal")));
}

TEST(QkvCli, ExampleListNamesTheEightExamples) {
  const CliResult r = run_qkv({"attend", "--example", "list"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 8) << r.describe();
  for (const char* name :
       {"phonebook", "search", "pronoun", "bank", "laplace", "lsi", "recommend", "tied"})
    EXPECT_THAT(r.out, HasSubstr(name)) << r.describe();
}

TEST(QkvCli, PhonebookExampleExplainsSoftmaxAndOut) {
  const CliResult r = run_qkv({"attend", "--example", "phonebook"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("softmax")) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("out(")) << r.describe();
  EXPECT_TRUE(r.err.empty()) << r.describe();
}

TEST(QkvCli, EveryExampleRuns) {
  for (const char* name :
       {"phonebook", "search", "pronoun", "bank", "laplace", "lsi", "recommend", "tied"}) {
    const CliResult r = run_qkv({"attend", "--example", name});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_FALSE(r.out.empty()) << r.describe();
  }
}

// ---- results

double json_number(const nlohmann::json& x) {
  if (x.is_number()) return x.get<double>();
  const std::string s = x.get<std::string>();
  if (s == "Infinity") return INFINITY;
  if (s == "-Infinity") return -INFINITY;
  EXPECT_EQ(s, "NaN");
  return NAN;
}

TEST_F(AttendCli, JsonParsesAndWeightRowsSumToOne) {
  const CliResult r = run_qkv(attend({"--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json doc = nlohmann::json::parse(r.out);  // throws (and fails) if not JSON
  EXPECT_EQ(doc.at("score"), "scaled-dot");
  EXPECT_EQ(doc.at("normalize"), "softmax");
  EXPECT_DOUBLE_EQ(doc.at("scale").get<double>(), 1 / std::sqrt(8.0));
  EXPECT_TRUE(doc.contains("causal"));
  EXPECT_EQ(doc.at("shapes").at("query"), nlohmann::json({kB, kH, kL, kD}));
  EXPECT_EQ(doc.at("shapes").at("keys"), nlohmann::json({kB, kH, kS, kD}));
  EXPECT_EQ(doc.at("shapes").at("values"), nlohmann::json({kB, kH, kS, kD}));
  EXPECT_EQ(doc.at("shapes").at("out"), nlohmann::json({kB, kH, kL, kD}));
  const nlohmann::json& weights = doc.at("weights");
  ASSERT_EQ(weights.size(), static_cast<size_t>(kB));
  for (const auto& batch : weights) {
    ASSERT_EQ(batch.size(), static_cast<size_t>(kH));
    for (const auto& head : batch) {
      ASSERT_EQ(head.size(), static_cast<size_t>(kL));
      for (const auto& row : head) {
        ASSERT_EQ(row.size(), static_cast<size_t>(kS));
        double sum = 0;
        for (const auto& w : row) sum += json_number(w);
        EXPECT_NEAR(sum, 1.0, 1e-6);  // float32 weights: a few ulps of 1
      }
    }
  }
  EXPECT_EQ(doc.at("out").size(), static_cast<size_t>(kB));
  EXPECT_EQ(doc.at("logsumexp").at(0).at(0).size(), static_cast<size_t>(kL));
}

TEST_F(AttendCli, JsonShowsAFullyMaskedRowAsZerosAndMinusInfinity) {
  // Query row 1 may see no key: out 0, weights 0, logsumexp −∞, never NaN
  // (docs/CONVENTIONS.md §1.4).
  std::vector<bool> visible(kL * kS, true);
  for (int64_t j = 0; j < kS; ++j) visible[1 * kS + j] = false;
  const std::string mask = write("mask.npy", npy_bool({kL, kS}, visible));
  const CliResult r = run_qkv(attend({"--mask", mask, "--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  for (int64_t b = 0; b < kB; ++b) {
    for (int64_t h = 0; h < kH; ++h) {
      EXPECT_EQ(doc["logsumexp"][b][h][1], "-Infinity");
      EXPECT_TRUE(doc["logsumexp"][b][h][0].is_number());
      for (const auto& w : doc["weights"][b][h][1]) EXPECT_EQ(json_number(w), 0.0);
      for (const auto& o : doc["out"][b][h][1]) EXPECT_EQ(json_number(o), 0.0);
    }
  }
}

TEST_F(AttendCli, OutFileHoldsTheUniformAverageOfVisibleValues) {
  // uniform + top-left causal: out[b,h,i] = mean of v[b,h,0..i] — checkable by hand.
  const CliResult r =
      run_qkv(attend({"--score", "uniform", "--causal", "top-left", "--out", path("out.npy"),
                      "--weights", path("weights.npy"), "--lse", path("lse.npy")}));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const NpyFile out = read_npy_file(path("out.npy"));
  EXPECT_EQ(out.descr, "<f4");
  ASSERT_EQ(out.shape, (Shape{kB, kH, kL, kD}));
  std::vector<double> v(static_cast<size_t>(kB * kH * kS * kD));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(pattern_value(i, 3));
  for (int64_t bh = 0; bh < kB * kH; ++bh) {
    for (int64_t i = 0; i < kL; ++i) {
      for (int64_t d = 0; d < kD; ++d) {
        double mean = 0;
        for (int64_t j = 0; j <= i; ++j) mean += v[(bh * kS + j) * kD + d] / (i + 1);
        EXPECT_NEAR(out.values[(bh * kL + i) * kD + d], mean, 1e-6)
            << "bh " << bh << " i " << i << " d " << d;
      }
    }
  }
  const NpyFile weights = read_npy_file(path("weights.npy"));
  ASSERT_EQ(weights.shape, (Shape{kB, kH, kL, kS}));
  EXPECT_FLOAT_EQ(weights.values[2 * kS + 0], 1.0f / 3);  // [0,0,2,0]: row 2 sees 3 keys
  EXPECT_EQ(weights.values[0 * kS + 1], 0.0);             // [0,0,0,1]: masked
  const NpyFile lse = read_npy_file(path("lse.npy"));
  ASSERT_EQ(lse.shape, (Shape{kB, kH, kL}));
  EXPECT_NEAR(lse.values[2], std::log(3.0), 1e-6);  // log Σ exp(0) over 3 keys
}

TEST_F(AttendCli, Float64InputGivesFloat64OutThatMatchesJson) {
  const std::string q64 = write("q64.npy", npy_f64({kB, kH, kL, kD}, 1));
  const std::vector<std::string> args{"attend", "--query", q64, "--keys", k_, "--values", v_};
  std::vector<std::string> with_out = args;
  with_out.insert(with_out.end(), {"--out", path("out.npy")});
  const CliResult r = run_qkv(with_out);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const NpyFile out = read_npy_file(path("out.npy"));
  EXPECT_EQ(out.descr, "<f8");  // float64 when any input is float64
  ASSERT_EQ(out.shape, (Shape{kB, kH, kL, kD}));

  std::vector<std::string> with_json = args;
  with_json.push_back("--json");
  const CliResult j = run_qkv(with_json);
  ASSERT_EQ(j.exit_code, 0) << j.describe();
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  // 17 significant digits round-trip a double exactly: the JSON and the file agree bit for bit.
  size_t n = 0;
  for (const auto& batch : doc.at("out"))
    for (const auto& head : batch)
      for (const auto& row : head)
        for (const auto& x : row) EXPECT_EQ(json_number(x), out.values.at(n++)) << "element " << n;
  EXPECT_EQ(n, out.values.size());
}

TEST_F(AttendCli, Rank2InputsGiveRank2Out) {
  const std::string q2 = write("q2.npy", npy_f32({kL, kD}, 1));
  const std::string k2 = write("k2.npy", npy_f32({kS, kD}, 2));
  const std::string v2 = write("v2.npy", npy_f32({kS, 3}, 3));
  const CliResult r =
      run_qkv({"attend", "--query", q2, "--keys", k2, "--values", v2, "--out", path("out.npy")});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_npy_file(path("out.npy")).shape, (Shape{kL, 3}));
}

TEST_F(AttendCli, LabelsAppearInTheExplanation) {
  const CliResult r = run_qkv(attend(
      {"--query-labels", "alpha,beta,gamma", "--key-labels", "k_one,k_two,k_three,k_four,k_five"}));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, AllOf(HasSubstr("gamma"), HasSubstr("k_five"))) << r.describe();
}

TEST_F(AttendCli, NothingIsWrittenUnlessAsked) {
  const std::set<std::string> before = listing();
  const CliResult r = run_qkv(attend({"--causal", "bottom-right"}));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(listing(), before);
}

}  // namespace

// ---- --path: which kernel writes --out and --lse

TEST_F(AttendCli, PathFusedForAScoreItDoesNotCoverIsAUsageError) {
  expect_error(attend({"--score", "laplace", "--path", "fused"}), 2,
               {Has("fused"), Has("laplace")});
}

TEST_F(AttendCli, UnknownPathIsAUsageError) {
  expect_error(attend({"--path", "gpu"}), 2, {Has("--path"), Has("gpu")});
}

TEST_F(AttendCli, FusedAndReferenceOutputsAgreeWithinFloat32Rounding) {
  // float32 inputs: auto picks the fused kernel, and says so; the reference rounds float64
  // results to float32. Outputs are convex combinations of values in [-1, 1], so a few float32
  // ulps of 1 bound their difference.
  const CliResult fused = run_qkv(attend(
      {"--causal", "bottom-right", "--out", path("fused.npy"), "--lse", path("fused_lse.npy")}));
  ASSERT_EQ(fused.exit_code, 0) << fused.describe();
  EXPECT_THAT(fused.out, HasSubstr("fused path"));
  const CliResult ref = run_qkv(attend({"--causal", "bottom-right", "--path", "reference", "--out",
                                        path("ref.npy"), "--lse", path("ref_lse.npy")}));
  ASSERT_EQ(ref.exit_code, 0) << ref.describe();
  EXPECT_THAT(ref.out, HasSubstr("reference path"));
  for (const auto& [a, b] : {std::pair{"fused.npy", "ref.npy"}, {"fused_lse.npy", "ref_lse.npy"}}) {
    const NpyFile x = read_npy_file(path(a)), r = read_npy_file(path(b));
    ASSERT_EQ(x.shape, r.shape);
    double worst = 0;
    for (size_t i = 0; i < x.values.size(); ++i)
      worst = std::max(worst, std::abs(x.values[i] - r.values[i]));
    EXPECT_LE(worst, 4e-7) << a;
    EXPECT_GT(x.values.size(), 0u);
  }
}
