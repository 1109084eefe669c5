// Specification of qkv's .npy reading and writing (src/core/npy.cpp): what NumPy writes is read,
// what qkv writes NumPy reads, and every file qkv cannot represent is refused with a message that
// names the file, what was found and what was expected.
#include "qkv/npy.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/scratch_files.h"

namespace qkv {
namespace {

using namespace std::string_literals;

// A .npy file assembled by hand: magic, version `major`.0, the header length (2 bytes
// little-endian for 1.0, 4 for 2.0 and 3.0), the header exactly as given, then the data.
std::string npy_file(int major, const std::string& header, const std::string& data) {
  std::string out = "\x93NUMPY"s + static_cast<char>(major) + '\0';
  const std::size_t width = major == 1 ? 2 : 4;
  for (std::size_t i = 0; i < width; ++i) out += static_cast<char>(header.size() >> (8 * i));
  return out + header + data;
}

// A version 1.0 file with header `{<dict>}\n` and `data`.
std::string npy_v1(const std::string& dict, const std::string& data) {
  return npy_file(1, "{" + dict + "}\n", data);
}

// The little-endian bytes of float32 values.
std::string f32_bytes(std::initializer_list<float> values) {
  std::string out;
  for (float v : values) out.append(reinterpret_cast<const char*>(&v), sizeof v);
  return out;
}

// parse_npy must throw a qkv::Error of Kind::invalid_argument whose message starts with the file's
// name and contains each of `words`.
testing::AssertionResult Rejects(const std::string& bytes,
                                 std::initializer_list<std::string> words) {
  try {
    parse_npy(bytes, "Q.npy");
  } catch (const Error& e) {
    const std::string message = e.what();
    if (e.kind() != Error::Kind::invalid_argument)
      return testing::AssertionFailure() << "wrong kind for: " << message;
    if (!message.starts_with("Q.npy: "))
      return testing::AssertionFailure() << "does not start with the name: " << message;
    if (message.find('\n') != std::string::npos)
      return testing::AssertionFailure() << "not one line: " << message;
    for (const std::string& word : words)
      if (message.find(word) == std::string::npos)
        return testing::AssertionFailure() << "lacks \"" << word << "\": " << message;
    return testing::AssertionSuccess() << message;
  }
  return testing::AssertionFailure() << "accepted a file it should reject";
}

// The row-major values of any tensor, bit for bit (NaN payloads and -0 included).
std::vector<unsigned char> row_major_bytes(const Tensor& t) {
  Tensor c = t.contiguous();
  const std::size_t n = static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype());
  const void* p = c.dtype() == DType::f32   ? static_cast<const void*>(c.data<float>())
                  : c.dtype() == DType::f64 ? static_cast<const void*>(c.data<double>())
                                            : static_cast<const void*>(c.data<bool>());
  const auto* bytes = static_cast<const unsigned char*>(p);
  return std::vector<unsigned char>(bytes, bytes + n);
}

// A tensor of `shape` with distinct values, and NaN, -0 and ∞ among the first elements.
Tensor sample(const Shape& shape, DType dtype) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> values(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.37 * static_cast<double>(i) - 3.0;
  const double special[] = {std::numeric_limits<double>::quiet_NaN(), -0.0,
                            -std::numeric_limits<double>::infinity(), 1e-310};
  for (std::size_t i = 0; i < values.size() && i < 4; ++i) values[i] = special[i];
  if (dtype == DType::b8)
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = (i * 7 % 3) == 0;
  return Tensor::from(shape, values).to(dtype);
}

void expect_same(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.dtype(), want.dtype());
  EXPECT_EQ(got.shape(), want.shape());
  EXPECT_TRUE(got.is_contiguous());
  EXPECT_EQ(row_major_bytes(got), row_major_bytes(want));
}

TEST(NpyRoundTrip, EveryDTypeRankAndZeroSizeShape) {
  const Shape shapes[] = {{5}, {2, 3}, {2, 3, 4}, {2, 1, 3, 2},
                          {0}, {3, 0}, {2, 0, 4}, {1, 2, 0, 3}};
  for (DType dtype : {DType::f32, DType::f64, DType::b8}) {
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + shape_str(shape));
      const Tensor t = sample(shape, dtype);
      expect_same(parse_npy(encode_npy(t), "round trip"), t);
    }
  }
}

TEST(NpyRoundTrip, TransposedViewIsWrittenInCOrder) {
  for (DType dtype : {DType::f32, DType::f64, DType::b8}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor view = sample({2, 3, 4}, dtype).transpose(0, 2);  // [4, 3, 2], strides (1, 4, 12)
    ASSERT_FALSE(view.is_contiguous());
    const Tensor back = parse_npy(encode_npy(view), "transposed");
    EXPECT_EQ(back.shape(), (Shape{4, 3, 2}));
    for (int64_t i = 0; i < view.numel(); ++i)
      if (!std::isnan(view.value(i))) {
        EXPECT_EQ(back.value(i), view.value(i)) << "element " << i;
      }
    expect_same(back, view);
  }
}

TEST(NpyEncode, DataStartsAtAMultipleOf64Bytes) {
  // Zero-size shapes with dims of 1 to 13 digits give the header many different lengths, each
  // padded with spaces to end, '\n' included, on a multiple of 64. (Tensor bounds the product of
  // the non-zero dims by 2^40, so that strides cannot overflow.)
  constexpr int64_t kMax = int64_t{1} << 40;
  std::vector<int64_t> dims = {1};
  while (dims.back() * 10 <= kMax) dims.push_back(dims.back() * 10);
  std::vector<Shape> shapes = {{0}};
  for (int64_t a : dims) {
    shapes.push_back({a, 0});
    for (int64_t b : dims) {
      if (a > kMax / b) continue;
      shapes.push_back({a, 0, b});
      for (int64_t c : dims)
        if (a * b <= kMax / c) shapes.push_back({a, 0, b, c});
    }
  }
  std::vector<bool> seen_padding(65, false);
  for (const Shape& shape : shapes) {
    SCOPED_TRACE(shape_str(shape));
    const std::string bytes = encode_npy(Tensor(shape, DType::f32));
    const std::size_t length = static_cast<unsigned char>(bytes[8]) +
                               256 * static_cast<std::size_t>(static_cast<unsigned char>(bytes[9]));
    ASSERT_EQ(bytes.size(), 10 + length);
    ASSERT_EQ(bytes.size() % 64, 0u);
    ASSERT_EQ(bytes.back(), '\n');
    const std::size_t dict_end = bytes.find('}') + 1;
    ASSERT_EQ(bytes.find_first_not_of(' ', dict_end), bytes.size() - 1);  // only spaces, then \n
    const std::size_t padding = bytes.size() - 1 - dict_end;
    ASSERT_TRUE(padding >= 1 && padding <= 64) << padding;
    seen_padding[padding] = true;
  }
  // Coverage of the padding rule: the shapes above reach 20 distinct padding lengths.
  EXPECT_GE(std::count(seen_padding.begin(), seen_padding.end(), true), 20);
}

TEST(NpyEncode, HeaderIsByteForByteWhatNumpySaveWrites) {
  // np.save(f, np.array([1, 2], np.float32)): a 57-character dict, 60 spaces, '\n', the data.
  const std::string numpy_bytes = "\x93NUMPY\x01\x00\x76\x00"s +
                                  "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }" +
                                  std::string(60, ' ') + "\n" + f32_bytes({1.0f, 2.0f});
  EXPECT_EQ(encode_npy(Tensor::from({2}, std::vector<float>{1.0f, 2.0f})), numpy_bytes);

  const std::string header = encode_npy(Tensor(Shape{2, 3}, DType::f64)).substr(10);
  EXPECT_TRUE(header.starts_with("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }  "));
  EXPECT_TRUE(
      encode_npy(Tensor(Shape{1, 0, 2, 3}, DType::b8))
          .substr(10)
          .starts_with("{'descr': '|b1', 'fortran_order': False, 'shape': (1, 0, 2, 3), }"));
}

TEST(NpyEncode, UndefinedTensorIsAnError) { EXPECT_THROW(encode_npy(Tensor()), Error); }

TEST(NpyParse, Version1FileWrittenByNumpy) {
  const std::string bytes = "\x93NUMPY\x01\x00\x76\x00"s +
                            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }" +
                            std::string(60, ' ') + "\n" + "\x00\x00\x80\x3f\x00\x00\x00\x40"s;
  const Tensor t = parse_npy(bytes, "v1.npy");
  EXPECT_EQ(t.dtype(), DType::f32);
  EXPECT_EQ(t.shape(), (Shape{2}));
  EXPECT_EQ(t.at<float>(0), 1.0f);
  EXPECT_EQ(t.at<float>(1), 2.0f);
}

TEST(NpyParse, Version2HasAFourByteHeaderLength) {
  const std::string header =
      "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2), }" + std::string(52, ' ') + "\n";
  const double values[] = {-1.5, 1e300};
  const std::string data(reinterpret_cast<const char*>(values), sizeof values);
  const std::string bytes =
      "\x93NUMPY\x02\x00"s + static_cast<char>(header.size()) + "\0\0\0"s + header + data;
  ASSERT_EQ(bytes.size() - data.size(), 124u);  // 12-byte preamble + 112-byte header
  const Tensor t = parse_npy(bytes, "v2.npy");
  EXPECT_EQ(t.dtype(), DType::f64);
  EXPECT_EQ(t.shape(), (Shape{1, 2}));
  EXPECT_EQ(t.at<double>(0, 0), -1.5);
  EXPECT_EQ(t.at<double>(0, 1), 1e300);
  // A 2.0 header longer than 65535 bytes: what the 4-byte length field is for.
  const std::string long_header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}" + std::string(70000, ' ') + "\n";
  EXPECT_EQ(parse_npy(npy_file(2, long_header, f32_bytes({4.0f})), "long.npy").at<float>(0), 4.0f);
}

TEST(NpyParse, Version3HasAUtf8Header) {
  const std::string header = "{'descr': '|b1', 'fortran_order': False, 'shape': (2, 2), }\n";
  const std::string bytes = "\x93NUMPY\x03\x00"s + static_cast<char>(header.size()) + "\0\0\0"s +
                            header + "\x01\x00\x00\x01"s;
  const Tensor t = parse_npy(bytes, "v3.npy");
  EXPECT_EQ(t.dtype(), DType::b8);
  EXPECT_EQ(t.shape(), (Shape{2, 2}));
  EXPECT_TRUE(t.at<bool>(0, 0));
  EXPECT_FALSE(t.at<bool>(0, 1));
  EXPECT_FALSE(t.at<bool>(1, 0));
  EXPECT_TRUE(t.at<bool>(1, 1));
}

TEST(NpyParse, HeaderDictIsParsedNotPatternMatched) {
  const std::string data = f32_bytes({1, 2, 3, 4, 5, 6});
  const std::string dicts[] = {
      "'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'",  // any key order
      "'descr':'<f4','fortran_order':False,'shape':(2,3)",        // no spaces, no trailing ,
      "  \"descr\" : \"<f4\" ,\t'fortran_order' : False ,\n 'shape' : ( 2 , 3 , ) , ",  // odd space
      "'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), ",  // Python 2's longs
      "'descr': '<f4', 'fortran_order': False, 'shape': (+2, 3), ",
  };
  for (const std::string& dict : dicts) {
    SCOPED_TRACE(dict);
    const Tensor t = parse_npy(npy_v1(dict, data), "Q.npy");
    EXPECT_EQ(t.shape(), (Shape{2, 3}));
    EXPECT_EQ(t.at<float>(1, 2), 6.0f);
  }
  // No padding, no '\n', 16-byte alignment as NumPy < 1.14 wrote: all fine.
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}";
  EXPECT_EQ(parse_npy(npy_file(1, header, data), "Q.npy").numel(), 6);
  EXPECT_EQ(parse_npy(npy_file(1, header + "    \n", data), "Q.npy").numel(), 6);
}

TEST(NpyReject, NotANpyFile) {
  EXPECT_TRUE(Rejects("PK\x03\x04 a zip file", {"not a .npy file", "\\x93NUMPY"}));
  EXPECT_TRUE(Rejects("\x93NUMPX\x01\x00\x00\x00", {"not a .npy file"}));
  EXPECT_TRUE(Rejects("", {"truncated", "0 bytes"}));
  EXPECT_TRUE(Rejects("\x93NUM", {"truncated", "4 bytes"}));
}

TEST(NpyReject, UnsupportedVersion) {
  EXPECT_TRUE(Rejects("\x93NUMPY\x04\x00\x00\x00"s, {"version 4.0", "expected 1.0, 2.0 or 3.0"}));
  EXPECT_TRUE(Rejects("\x93NUMPY\x01\x01\x00\x00"s, {"version 1.1", "expected 1.0, 2.0 or 3.0"}));
  EXPECT_TRUE(Rejects("\x93NUMPY\x00\x00\x00\x00"s, {"version 0.0"}));
}

TEST(NpyReject, TruncatedPreambleOrHeader) {
  EXPECT_TRUE(Rejects("\x93NUMPY\x01\x00\x10"s, {"truncated", "9 bytes", "10"}));
  EXPECT_TRUE(Rejects("\x93NUMPY\x02\x00\x10\x00\x00"s, {"truncated", "11 bytes", "12"}));
  // The header length says 0x76 = 118 bytes but only 19 follow.
  EXPECT_TRUE(Rejects("\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'f"s,
                      {"truncated", "header length is 118 bytes", "only 19 bytes"}));
  EXPECT_TRUE(Rejects("\x93NUMPY\x02\x00\xff\xff\xff\xff{}"s, {"header length is 4294967295"}));
  // A header cut short inside the dict.
  EXPECT_TRUE(Rejects(npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,", ""),
                      {"malformed header", "the end of the header"}));
}

TEST(NpyReject, MalformedHeaderDict) {
  const std::string data = f32_bytes({1, 2});
  EXPECT_TRUE(Rejects(npy_file(1, "['descr', '<f4']\n", data), {"malformed header", "'{'"}));
  EXPECT_TRUE(Rejects(npy_v1("'descr' '<f4', 'fortran_order': False, 'shape': (2,)", data),
                      {"malformed header", "expected ':' at byte 9"}));
  EXPECT_TRUE(Rejects(npy_v1("'descr': '<f4 , 'fortran_order': False, 'shape': (2,)", data),
                      {"malformed header"}));
  EXPECT_TRUE(Rejects(npy_v1("'descr': '<f4', 'fortran_order': False, 'shape': (2,) 'x'", data),
                      {"malformed header", "expected ','"}));
  EXPECT_TRUE(Rejects(npy_v1("'descr': '<f4', 'fortran_order': false, 'shape': (2,)", data),
                      {"malformed header", "'false, 'shap'"}));
  EXPECT_TRUE(Rejects(npy_v1("1: '<f4'", data), {"malformed header", "a string key"}));
  EXPECT_TRUE(
      Rejects(npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x\n", data),
              {"only spaces and '\\n' after the header dict"}));
  EXPECT_TRUE(
      Rejects(npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}\0\n"s, data),
              {"after the header dict", "'?"}));
  EXPECT_TRUE(
      Rejects(npy_v1("'descr': '<f4', 'fortran_order': False, 'shape': ((((((2,),),),),),)", data),
              {"nested"}));
}

TEST(NpyReject, MissingDuplicateOrUnexpectedKeys) {
  const std::string data = f32_bytes({1, 2});
  EXPECT_TRUE(Rejects(npy_v1("'descr': '<f4', 'shape': (2,)", data), {"no 'fortran_order' key"}));
  EXPECT_TRUE(Rejects(npy_v1("'fortran_order': False, 'shape': (2,)", data), {"no 'descr' key"}));
  EXPECT_TRUE(
      Rejects(npy_v1("'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (2,)", data),
              {"'shape' twice"}));
  EXPECT_TRUE(Rejects(npy_v1("'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1", data),
                      {"unexpected header key 'x'"}));
  EXPECT_TRUE(Rejects(npy_v1("'descr': '<f4', 'fortran_order': 0, 'shape': (2,)", data),
                      {"'fortran_order' is not True or False"}));
}

TEST(NpyReject, FortranOrder) {
  EXPECT_TRUE(
      Rejects(npy_v1("'descr': '<f4', 'fortran_order': True, 'shape': (2, 1), ", f32_bytes({1, 2})),
              {"Fortran order", "expected C order"}));
}

TEST(NpyReject, UnsupportedDTypesAreNamed) {
  const std::string expected = "is not supported; expected '<f4', '<f8' or '|b1'";
  auto with_descr = [](const std::string& descr) {
    return npy_v1("'descr': " + descr + ", 'fortran_order': False, 'shape': (1,), ",
                  std::string(16, '\0'));
  };
  EXPECT_TRUE(Rejects(with_descr("'<i8'"), {"Q.npy: dtype '<i8' (int64) " + expected}));
  EXPECT_TRUE(Rejects(with_descr("'>f4'"), {"dtype '>f4' (big-endian float32)", expected}));
  EXPECT_TRUE(Rejects(with_descr("'>f8'"), {"dtype '>f8' (big-endian float64)", expected}));
  EXPECT_TRUE(Rejects(with_descr("'=f4'"), {"dtype '=f4' (native-order float32)", expected}));
  EXPECT_TRUE(Rejects(with_descr("'<f2'"), {"dtype '<f2' (float16)", expected}));
  EXPECT_TRUE(Rejects(with_descr("'<c16'"), {"dtype '<c16' (complex128)", expected}));
  EXPECT_TRUE(Rejects(with_descr("'|u1'"), {"dtype '|u1' (uint8)", expected}));
  EXPECT_TRUE(Rejects(with_descr("'<U3'"), {"dtype '<U3' (unicode string)", expected}));
  EXPECT_TRUE(Rejects(with_descr("'<b1'"), {"dtype '<b1' (bool)", expected}));
  EXPECT_TRUE(Rejects(with_descr("'|O'"), {"dtype '|O' " + expected}));
  EXPECT_TRUE(Rejects(with_descr("'<i99999999999999999999'"), {"dtype '<i9999", expected}));
  EXPECT_TRUE(Rejects(with_descr("[('x', '<f4')]"), {"structured dtype", expected}));
  EXPECT_TRUE(Rejects(with_descr("4"), {"'descr' is not a string"}));
}

TEST(NpyReject, RankOutsideOneToFour) {
  EXPECT_TRUE(Rejects(
      npy_v1("'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1), ", f32_bytes({1})),
      {"shape [1, 1, 1, 1, 1] has rank 5", "expected an array of rank 1 to 4"}));
  EXPECT_TRUE(
      Rejects(npy_v1("'descr': '<f4', 'fortran_order': False, 'shape': (), ", f32_bytes({1})),
              {"shape [] has rank 0", "expected an array of rank 1 to 4"}));
}

TEST(NpyReject, BadDimensions) {
  auto with_shape = [](const std::string& shape) {
    return npy_v1("'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", ",
                  f32_bytes({1, 2}));
  };
  EXPECT_TRUE(Rejects(with_shape("(-2,)"), {"shape [-2] has a negative dimension"}));
  EXPECT_TRUE(Rejects(with_shape("(2, -1)"), {"negative dimension"}));
  // No elements is not "too large" (issue 26's last sweep): what is too large is said.
  EXPECT_TRUE(Rejects(npy_v1("'descr': '<f4', 'fortran_order': False, 'shape': (0, "
                             "9223372036854775807), ",
                             ""),
                      {"shape [0, 9223372036854775807] has no elements, but its other dimensions "
                       "multiply past 2^40; expected at most 2^40"}));
  EXPECT_TRUE(Rejects(with_shape("(2.0,)"), {"malformed header", "an integer", "'2.0,)"}));
  EXPECT_TRUE(Rejects(with_shape("(2e0,)"), {"malformed header", "an integer"}));
  EXPECT_TRUE(Rejects(with_shape("('2',)"), {"'shape' holds a value that is not an integer"}));
  EXPECT_TRUE(Rejects(with_shape("(True,)"), {"not an integer"}));
  EXPECT_TRUE(Rejects(with_shape("[2]"), {"'shape' is not a tuple"}));
  EXPECT_TRUE(Rejects(with_shape("(2)"), {"'shape' is not a tuple"}));  // Python's (2) is just 2
  EXPECT_TRUE(Rejects(with_shape("(99999999999999999999,)"), {"fits in 64 bits"}));
  EXPECT_TRUE(Rejects(with_shape("(-,)"), {"a digit"}));
}

TEST(NpyReject, ElementCountOverflow) {
  // 2^31 · 2^31 · 2^3 · 4 bytes = 2^67: the product must not wrap to a small number.
  EXPECT_TRUE(Rejects(npy_v1("'descr': '<f4', 'fortran_order': False, 'shape': "
                             "(2147483648, 2147483648, 8), ",
                             ""),
                      {"too many elements", "overflows"}));
  // 2^62 · 4 bytes wraps to exactly 0, which would match an empty data section.
  EXPECT_TRUE(Rejects(npy_v1("'descr': '<f4', 'fortran_order': False, 'shape': "
                             "(4611686018427387904,), ",
                             ""),
                      {"too many elements"}));
}

TEST(NpyReject, DataShorterOrLongerThanTheShape) {
  const std::string dict = "'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), ";
  EXPECT_TRUE(Rejects(npy_v1(dict, f32_bytes({1, 2, 3})),
                      {"the data has 12 bytes but shape [2, 2] of float32 needs 16"}));
  EXPECT_TRUE(Rejects(npy_v1(dict, f32_bytes({1, 2, 3, 4, 5})), {"has 20 bytes", "needs 16"}));
  EXPECT_TRUE(Rejects(npy_v1(dict, ""), {"has 0 bytes", "needs 16"}));
  EXPECT_TRUE(Rejects(npy_v1("'descr': '<f8', 'fortran_order': False, 'shape': (0, 3), ", "x"),
                      {"has 1 bytes but shape [0, 3] of float64 needs 0"}));
}

TEST(NpyReject, BoolBytesOtherThanZeroOrOne) {
  EXPECT_TRUE(
      Rejects(npy_v1("'descr': '|b1', 'fortran_order': False, 'shape': (3,), ", "\x01\x02\x00"s),
              {"bool element 1 holds the byte 2; expected 0 or 1"}));
  EXPECT_TRUE(Rejects(npy_v1("'descr': '|b1', 'fortran_order': False, 'shape': (1,), ", "\xff"s),
                      {"byte 255"}));
}

// A fresh empty directory for the file tests, removed with its contents afterwards.
class NpyFile : public testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = testing::TempDir() + "qkv_npy_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    dir_ = pattern + "/";
  }
  void TearDown() override {
    for (const std::string& name : entries()) ::unlink((dir_ + name).c_str());
    ::rmdir(dir_.c_str());
  }
  // The names in the directory, "." and ".." aside.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    if (DIR* d = ::opendir(dir_.c_str())) {
      while (const dirent* e = ::readdir(d))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
          names.emplace_back(e->d_name);
      ::closedir(d);
    }
    return names;
  }
  std::string dir_;
};

TEST_F(NpyFile, WriteThenReadLeavesOnlyTheFile) {
  const Tensor t = sample({2, 3, 4}, DType::f32);
  write_npy(dir_ + "Q.npy", t);
  expect_same(read_npy(dir_ + "Q.npy"), t);
  EXPECT_EQ(entries(), std::vector<std::string>{"Q.npy"});
  // Overwriting replaces the file whole; no temporary stays behind.
  const Tensor u = sample({3}, DType::b8);
  write_npy(dir_ + "Q.npy", u);
  expect_same(read_npy(dir_ + "Q.npy"), u);
  EXPECT_EQ(entries(), std::vector<std::string>{"Q.npy"});
}

TEST_F(NpyFile, WrittenFileGetsTheUmaskModeNotMkstemps0600) {
  const mode_t mask = ::umask(022);
  write_npy(dir_ + "Q.npy", sample({2}, DType::f64));
  ::umask(mask);
  struct stat info {};
  ASSERT_EQ(::stat((dir_ + "Q.npy").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0644u);
}

TEST_F(NpyFile, WriteIntoAMissingDirectoryIsARuntimeErrorAndLeavesNothing) {
  const std::string path = dir_ + "no/such/dir/Q.npy";
  try {
    write_npy(path, sample({2}, DType::f32));
    FAIL() << "write_npy into a missing directory did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::runtime);
    EXPECT_TRUE(std::string(e.what()).starts_with(path + ": cannot write")) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(entries().empty());
}

TEST_F(NpyFile, DirectoryAsTheOutputIsAUsageErrorAndNothingIsWritten) {
  // Once a runtime error after the data was written (the rename onto a directory failed); now
  // refused before any temporary exists (core/files.h).
  ASSERT_EQ(::mkdir((dir_ + "Q.npy").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((dir_ + "Q.npy/keep").c_str(), 0755), 0);
  try {
    write_npy(dir_ + "Q.npy", sample({2}, DType::f32));
    FAIL() << "write_npy over a directory did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    EXPECT_EQ(std::string(e.what()), dir_ + "Q.npy: is a directory; expected a file name");
  }
  EXPECT_EQ(entries(), std::vector<std::string>{"Q.npy"});
  ::rmdir((dir_ + "Q.npy/keep").c_str());
  ::rmdir((dir_ + "Q.npy").c_str());
}

TEST_F(NpyFile, MissingFileIsAnInvalidArgumentNamingIt) {
  try {
    read_npy(dir_ + "Q.npy");
    FAIL() << "read_npy of a missing file did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    EXPECT_EQ(std::string(e.what()), dir_ + "Q.npy: cannot open: No such file or directory");
  }
  try {
    read_npy(dir_);
    FAIL() << "read_npy of a directory did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    EXPECT_EQ(std::string(e.what()), dir_ + ": is a directory; expected a regular .npy file");
  }
}

// The message read_npy throws for `path`; "" when it reads it.
std::string read_error(const std::string& path) {
  try {
    read_npy(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << e.what();
    return e.what();
  }
  return "";
}

TEST_F(NpyFile, FifoIsRefusedWithoutBlocking) {
  // fopen of a FIFO with no writer blocked forever.
  const std::string fifo = dir_ + "Q.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const test::Watchdog watchdog(20);
  EXPECT_EQ(read_error(fifo), fifo + ": is a FIFO (named pipe); expected a regular .npy file");
}

TEST_F(NpyFile, DeviceIsRefusedNotReadUntilMemoryRunsOut) {
  // /dev/zero was read into one string until the allocation failed.
  const test::Watchdog watchdog(20);
  EXPECT_EQ(read_error("/dev/zero"),
            "/dev/zero: is a character device; expected a regular .npy file");
}

TEST_F(NpyFile, HeaderLengthBeyondTheLimitIsRefusedBeforeTheHeaderIsRead) {
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}" +
                             std::string((1 << 20) - 55, ' ') + "\n";
  ASSERT_EQ(header.size(), (1u << 20) + 1);
  const std::string path = dir_ + "Q.npy";
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  const std::string bytes = npy_file(2, header, f32_bytes({1}));
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  EXPECT_EQ(read_error(path),
            path + ": the header length is 1048577 bytes; expected at most 1 MiB");
}

TEST_F(NpyFile, ShapeLargerThanTheFileIsRefusedBeforeAllocating) {
  // [2^20, 2^20] float32 would be 4 TiB; the file holds 4 bytes of data.
  const std::string path = dir_ + "Q.npy";
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  const std::string bytes =
      npy_v1("'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576)", f32_bytes({1}));
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  EXPECT_EQ(read_error(path), path +
                                  ": the data has 4 bytes but shape [1048576, 1048576] of float32 "
                                  "needs 4398046511104");
}

TEST_F(NpyFile, ReadErrorsNameThePath) {
  const std::string path = dir_ + "K.npy";
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite("\x93NUMPY\x09\x00\x00\x00", 1, 10, f);
  std::fclose(f);
  try {
    read_npy(path);
    FAIL() << "read_npy accepted version 9.0";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              path + ": format version 9.0 is not supported; expected 1.0, 2.0 or 3.0");
  }
}

}  // namespace
}  // namespace qkv
