// NumPy .npy files. Format: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
//
//   "\x93NUMPY" major minor | header length (u16 LE in 1.0, u32 LE in 2.0/3.0) | header | data
//
// The header is a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and ended by '\n'. We parse it with a small literal parser rather than by
// pattern matching, so key order, whitespace and trailing commas do not matter, and anything that
// is not the literal NumPy would accept is rejected with the byte where it went wrong.
#include "qkv/npy.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "qkv/files.h"

namespace qkv {
namespace {

// Data bytes are copied straight into and out of tensor storage: this needs a little-endian host
// and a one-byte bool holding 0 or 1, as on every platform qkv targets.
static_assert(std::endian::native == std::endian::little, "qkv's .npy I/O assumes little-endian");
static_assert(sizeof(bool) == 1, "qkv's .npy I/O copies bool bytes as they are");

constexpr std::string_view kMagic = "\x93NUMPY";
// NumPy pads the header so that the data starts at a multiple of 64 bytes (numpy.lib.format's
// ARRAY_ALIGN), which lets a reader map the data with any alignment it may need.
constexpr std::size_t kDataAlign = 64;
// NumPy's own reader refuses headers over 10000 bytes unless told otherwise (max_header_size);
// ours, written for rank <= 4, are under 200. Far above both, and a bound on what is read before
// the header is parsed.
constexpr std::size_t kMaxHeaderLength = std::size_t{1} << 20;
// A .npy input is read whole into memory; larger inputs are refused before anything is read.
constexpr InputSpec kNpyInput{.expected = "a regular .npy file", .max_bytes = uint64_t{16} << 30};

[[noreturn]] void fail(std::string_view name, const std::string& what) {
  throw Error(std::string(name) + ": " + what, Error::Kind::invalid_argument);
}

// Like std::strchr(set, c) but false for '\0', which a corrupt header may well contain.
bool one_of(char c, std::string_view set) { return set.find(c) != std::string_view::npos; }

// One value of the header's Python literal; only the kinds a .npy header can hold.
struct Literal {
  enum class Kind { string, boolean, integer, tuple, list };
  explicit Literal(Kind k, int64_t n = 0) : kind(k), number(n) {}
  Kind kind;
  int64_t number;              // integer; boolean as 0 or 1
  std::string text;            // string
  std::vector<Literal> items;  // tuple, list
};

// A recursive-descent parser for the subset of Python literals NumPy writes in headers.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view name) : text_(text), name_(name) {}

  std::map<std::string, Literal> parse_dict() {
    std::map<std::string, Literal> dict;
    expect('{');
    while (skip_space() != '}') {
      Literal key = parse_value();
      if (key.kind != Literal::Kind::string) error("a string key");
      expect(':');
      if (!dict.emplace(key.text, parse_value()).second)
        fail(name_, "the header has the key '" + key.text + "' twice");
      if (skip_space() != '}') expect(',');  // a trailing comma before '}' is allowed
    }
    ++pos_;
    // After the dict only NumPy's padding may follow: spaces and the closing '\n'.
    skip_space();
    if (pos_ != text_.size()) error("only spaces and '\\n' after the header dict");
    return dict;
  }

 private:
  // Skips whitespace; returns the next character, or '\0' at the end of the header.
  char skip_space() {
    while (pos_ < text_.size() && one_of(text_[pos_], " \t\r\n")) ++pos_;
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }

  void expect(char c) {
    if (skip_space() != c) error(std::string("'") + c + "'");
    ++pos_;
  }

  [[noreturn]] void error(const std::string& expected) const {
    std::string found = "the end of the header";
    if (pos_ < text_.size()) {
      found = "'" + std::string(text_.substr(pos_, 12)) + "'";
      // Keep the message one printable line, whatever bytes a corrupt header holds.
      for (char& c : found) c = (c >= 0 && c < ' ') || c == 0x7f ? '?' : c;
    }
    fail(name_, "malformed header: expected " + expected + " at byte " + std::to_string(pos_) +
                    " but found " + found);
  }

  Literal parse_value() {
    const char c = skip_space();
    if (c == '\'' || c == '"') return parse_string(c);
    if (c == '(' || c == '[') return parse_sequence(c);
    if (c == '-' || c == '+' || (c >= '0' && c <= '9')) return parse_integer();
    for (std::string_view word : {"False", "True"}) {
      if (text_.substr(pos_).starts_with(word)) {
        pos_ += word.size();
        return Literal(Literal::Kind::boolean, word == "True");
      }
    }
    error("a value (a string, True, False, an integer or a tuple)");
  }

  Literal parse_string(char quote) {
    Literal s(Literal::Kind::string);
    for (++pos_; pos_ < text_.size() && text_[pos_] != quote; ++pos_) {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;  // \' and \\ stand for themselves
      s.text += text_[pos_];
    }
    if (pos_ >= text_.size()) error(std::string("a closing ") + quote);
    ++pos_;
    return s;
  }

  Literal parse_integer() {
    const std::size_t start = pos_;
    const bool negative = text_[pos_] == '-';
    if (text_[pos_] == '-' || text_[pos_] == '+') ++pos_;
    if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') error("a digit");
    int64_t magnitude = 0;
    for (; pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9'; ++pos_) {
      const int digit = text_[pos_] - '0';
      if (magnitude > (INT64_MAX - digit) / 10) {
        pos_ = start;
        error("an integer that fits in 64 bits");
      }
      magnitude = magnitude * 10 + digit;
    }
    if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2 NumPy wrote longs as 3L
    if (pos_ < text_.size() && one_of(text_[pos_], ".eEjJ_")) {
      pos_ = start;
      error("an integer");
    }
    return Literal(Literal::Kind::integer, negative ? -magnitude : magnitude);
  }

  // "(a, b)", "(a,)", "()" are tuples; "(a)" is just a (Python's grouping parentheses).
  Literal parse_sequence(char open) {
    const char close = open == '(' ? ')' : ']';
    Literal seq(open == '(' ? Literal::Kind::tuple : Literal::Kind::list);
    bool comma = false;
    // A header holds at most a list of tuples; deeper nesting is corrupt, and unbounded recursion
    // on a hostile file would overflow the stack.
    if (++depth_ > 4) error("at most 4 nested brackets");
    ++pos_;
    while (skip_space() != close) {
      seq.items.push_back(parse_value());
      comma = skip_space() != close;
      if (comma) expect(',');
    }
    ++pos_;
    --depth_;
    if (open == '(' && seq.items.size() == 1 && !comma) return seq.items.front();
    return seq;
  }

  std::string_view text_;
  std::string_view name_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

// What a descr names, for error messages: "<i8" → "int64", ">f4" → "big-endian float32".
std::string describe_dtype(const std::string& descr) {
  static const std::map<char, std::string> kinds = {
      {'b', "bool"},        {'i', "int"},        {'u', "uint"},
      {'f', "float"},       {'c', "complex"},    {'U', "unicode string"},
      {'S', "byte string"}, {'O', "object"},     {'V', "void"},
      {'M', "datetime64"},  {'m', "timedelta64"}};
  if (descr.size() < 3 || !kinds.contains(descr[1]) || !one_of(descr[0], "<>|=")) return "";
  std::string name = kinds.at(descr[1]);
  const std::string size = descr.substr(2);
  if (one_of(descr[1], "iufc") && size.size() <= 2 &&
      size.find_first_not_of("0123456789") == std::string::npos)
    name += std::to_string(std::stoi(size) * 8);
  if (descr[0] == '>') name = "big-endian " + name;
  if (descr[0] == '=') name = "native-order " + name;
  return " (" + name + ")";
}

DType dtype_from_descr(const Literal& descr, std::string_view name) {
  if (descr.kind == Literal::Kind::list)
    fail(name,
         "a structured dtype (a list of fields) is not supported; expected '<f4', '<f8' or "
         "'|b1'");
  if (descr.kind != Literal::Kind::string) fail(name, "'descr' is not a string");
  if (descr.text == "<f4") return DType::f32;
  if (descr.text == "<f8") return DType::f64;
  if (descr.text == "|b1") return DType::b8;
  fail(name, "dtype '" + descr.text + "'" + describe_dtype(descr.text) +
                 " is not supported; expected '<f4', '<f8' or '|b1'");
}

std::string_view descr_of(DType dtype) {
  return dtype == DType::f32 ? "<f4" : dtype == DType::f64 ? "<f8" : "|b1";
}

// The elements of a contiguous tensor as raw bytes, whatever its dtype.
char* bytes_of(Tensor& tensor) {
  if (tensor.dtype() == DType::f32) return reinterpret_cast<char*>(tensor.data<float>());
  if (tensor.dtype() == DType::f64) return reinterpret_cast<char*>(tensor.data<double>());
  return reinterpret_cast<char*>(tensor.data<bool>());
}

uint32_t read_le(std::string_view bytes, std::size_t at, std::size_t width) {
  uint32_t value = 0;
  for (std::size_t i = 0; i < width; ++i)
    value |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return value;
}

// Where a file's data starts, from its preamble (`bytes` may be just the file's first bytes) and
// the size of the whole file: the magic, the version, the header length and that the header fits.
std::size_t data_start_of(std::string_view bytes, uint64_t file_size, std::string_view name) {
  if (!kMagic.starts_with(bytes.substr(0, kMagic.size())))
    fail(name, "not a .npy file: it does not start with the magic string \\x93NUMPY");
  if (file_size < kMagic.size() + 2)
    fail(name, "truncated: " + std::to_string(file_size) + " bytes, too short for a .npy file");
  const int major = static_cast<unsigned char>(bytes[6]);
  const int minor = static_cast<unsigned char>(bytes[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    fail(name, "format version " + std::to_string(major) + "." + std::to_string(minor) +
                   " is not supported; expected 1.0, 2.0 or 3.0");
  // Version 1.0 stores the header length in 2 bytes; 2.0 and 3.0 (UTF-8 header) in 4.
  const std::size_t width = major == 1 ? 2 : 4;
  if (file_size < 8 + width)
    fail(name, "truncated: " + std::to_string(file_size) + " bytes, too short for a version " +
                   std::to_string(major) + ".0 preamble of " + std::to_string(8 + width));
  const std::size_t header_length = read_le(bytes, 8, width);
  const std::size_t data_start = 8 + width + header_length;
  if (data_start > file_size)
    fail(name, "truncated: the header length is " + std::to_string(header_length) +
                   " bytes but only " + std::to_string(file_size - 8 - width) +
                   " bytes follow the preamble");
  if (header_length > kMaxHeaderLength)
    fail(name, "the header length is " + std::to_string(header_length) +
                   " bytes; expected at most " + byte_count_str(kMaxHeaderLength));
  return data_start;
}

struct Layout {
  DType dtype;
  Shape shape;
  std::size_t data_start;
  std::size_t data_bytes;
};

// Parses the preamble and header in `bytes` (the file's first bytes, at least up to the data, or
// all of it) and checks them against `file_size`, the size of the whole file, so that a lying
// shape is caught before any memory is allocated for it.
Layout parse_layout(std::string_view bytes, uint64_t file_size, std::string_view name) {
  const std::size_t data_start = data_start_of(bytes, file_size, name);
  const std::size_t width = bytes[6] == 1 ? 2 : 4;
  auto dict = HeaderParser(bytes.substr(8 + width, data_start - 8 - width), name).parse_dict();
  for (const auto& [key, value] : dict)
    if (key != "descr" && key != "fortran_order" && key != "shape")
      fail(name, "unexpected header key '" + key + "'; expected 'descr', 'fortran_order', 'shape'");
  for (const char* key : {"descr", "fortran_order", "shape"})
    if (!dict.contains(key)) fail(name, std::string("the header has no '") + key + "' key");

  const DType dtype = dtype_from_descr(dict.at("descr"), name);
  const Literal& fortran = dict.at("fortran_order");
  if (fortran.kind != Literal::Kind::boolean) fail(name, "'fortran_order' is not True or False");
  if (fortran.number)
    fail(name,
         "Fortran order (column-major) is not supported; expected C order "
         "(save with numpy.ascontiguousarray)");

  const Literal& shape_literal = dict.at("shape");
  if (shape_literal.kind != Literal::Kind::tuple) fail(name, "'shape' is not a tuple");
  Shape shape;
  for (const Literal& d : shape_literal.items) {
    if (d.kind != Literal::Kind::integer)
      fail(name, "'shape' holds a value that is not an integer");
    shape.push_back(d.number);
  }
  if (shape.empty() || shape.size() > static_cast<std::size_t>(kMaxRank))
    fail(name, "shape " + shape_str(shape) + " has rank " + std::to_string(shape.size()) +
                   "; expected an array of rank 1 to " + std::to_string(kMaxRank));
  // The data length check below is the guard against a lying shape, so the product must not wrap.
  uint64_t data_bytes = dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0) fail(name, "shape " + shape_str(shape) + " has a negative dimension");
    if (__builtin_mul_overflow(data_bytes, static_cast<uint64_t>(d), &data_bytes))
      fail(name, "shape " + shape_str(shape) + " has too many elements (the byte count overflows)");
  }
  // Zero elements pass the length check whatever the other dimensions: the tensor's own bound on
  // them is said here, with the file's name (it came without one, issue 26).
  uint64_t extent = 1;
  bool empty = false;
  for (int64_t d : shape) {
    empty = empty || d == 0;
    if (d != 0 && __builtin_mul_overflow(extent, static_cast<uint64_t>(d), &extent))
      extent = UINT64_MAX;
  }
  if (empty && extent > (uint64_t{1} << 40))
    fail(name, "shape " + shape_str(shape) +
                   " has no elements, but its other dimensions multiply past 2^40; expected at "
                   "most 2^40 elements, counting a dimension of 0 as 1");
  if (file_size - data_start != data_bytes)
    fail(name, "the data has " + std::to_string(file_size - data_start) + " bytes but shape " +
                   shape_str(shape) + " of " + std::string(dtype_name(dtype)) + " needs " +
                   std::to_string(data_bytes));
  return {dtype, shape, data_start, static_cast<std::size_t>(data_bytes)};
}

// Any byte but 0 or 1 in a bool would be undefined behaviour once read as a C++ bool.
void check_bools(const char* data, std::size_t n, std::string_view name) {
  for (std::size_t i = 0; i < n; ++i)
    if (static_cast<unsigned char>(data[i]) > 1)
      fail(name, "bool element " + std::to_string(i) + " holds the byte " +
                     std::to_string(static_cast<unsigned char>(data[i])) + "; expected 0 or 1");
}

}  // namespace

Tensor parse_npy(std::string_view bytes, std::string_view name) {
  const Layout layout = parse_layout(bytes, bytes.size(), name);
  const char* data = bytes.data() + layout.data_start;
  if (layout.dtype == DType::b8) check_bools(data, layout.data_bytes, name);
  Tensor tensor(layout.shape, layout.dtype);
  if (layout.data_bytes > 0) std::memcpy(bytes_of(tensor), data, layout.data_bytes);
  return tensor;
}

// The magic and the header are checked before the data is read, and the shape against the file's
// size before the tensor is allocated; the data goes straight into the tensor.
Tensor read_npy(const std::string& path) {
  const InputFile file(path, kNpyInput);
  std::string head(std::min<uint64_t>(file.size(), 12), '\0');
  file.read_exactly(0, head.data(), head.size());
  head.resize(std::min<uint64_t>(file.size(), data_start_of(head, file.size(), path)));
  file.read_exactly(0, head.data(), head.size());
  const Layout layout = parse_layout(head, file.size(), path);
  Tensor tensor(layout.shape, layout.dtype);
  if (layout.data_bytes > 0)
    file.read_exactly(layout.data_start, bytes_of(tensor), layout.data_bytes);
  if (layout.dtype == DType::b8) check_bools(bytes_of(tensor), layout.data_bytes, path);
  return tensor;
}

std::string encode_npy(const Tensor& tensor) {
  if (!tensor.defined()) throw Error("encode_npy: the tensor is undefined (it has no storage)");
  Tensor c = tensor.contiguous();
  std::string header =
      "{'descr': '" + std::string(descr_of(c.dtype())) + "', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < c.rank(); ++i) header += std::to_string(c.dim(i)) + ", ";
  if (c.rank() > 1) header.resize(header.size() - 2);  // "(2, 3)" but "(2,)" and "()"
  if (c.rank() == 1) header.pop_back();
  header += "), }";

  // Like numpy.lib.format: use 1.0 unless the padded header overflows its 2-byte length field, and
  // always pad with at least one space (64 when the header alone would already be aligned).
  std::size_t preamble = kMagic.size() + 2 + 2;
  std::size_t padding = kDataAlign - (preamble + header.size() + 1) % kDataAlign;
  if (header.size() + padding + 1 > 0xFFFF) {
    preamble = kMagic.size() + 2 + 4;
    padding = kDataAlign - (preamble + header.size() + 1) % kDataAlign;
  }
  header += std::string(padding, ' ') + '\n';

  const std::size_t data_bytes = static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype());
  std::string out;
  out.reserve(preamble + header.size() + data_bytes);
  out += kMagic;
  out += static_cast<char>(preamble == 10 ? 1 : 2);
  out += '\0';
  for (std::size_t i = 0; i < preamble - 8; ++i) out += static_cast<char>(header.size() >> (8 * i));
  out += header;
  if (data_bytes > 0) out.append(bytes_of(c), data_bytes);
  return out;
}

void write_npy(const std::string& path, const Tensor& tensor) {
  write_files_atomically({{path, encode_npy(tensor)}});
}

}  // namespace qkv
