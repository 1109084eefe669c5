// qkv/parse.h — numbers as a person types them, checked: what is wrong with a value is said with
// the value as typed and what was expected, e.g. "1e9 is not a decimal integer; expected 1 to
// 10^8". Each *_problem returns "" when nothing is wrong. (Sizes such as "8G": size_problem in
// qkv/memory.h.)
#pragma once

#include <cstdint>
#include <limits>
#include <string>

namespace qkv {

struct Bounds {
  double lo = -std::numeric_limits<double>::max(), hi = std::numeric_limits<double>::max();
  bool lo_open = false, hi_open = false;  // whether lo / hi themselves are excluded
};
// "a number in (0, 10)", "a number ≥ 0", "a finite number".
std::string bounds_text(const Bounds& bounds);
// A finite decimal number within `bounds`: "+1", " 1", "0x10" and "1e999" are refused, "inf" and
// "nan" are said to be what they are. `expected` ends each message.
std::string number_problem(const std::string& input, const Bounds& bounds,
                           const std::string& expected);

// The range of an integer, lo to hi inclusive.
struct IntegerRange {
  int64_t lo = 0;
  uint64_t hi = std::numeric_limits<int64_t>::max();
  std::string expected;  // says the range where "LO to HI" would not say enough; "": range_text
};
// "1 to 10^8", "0 to 12": powers of ten from 10^6 up written as such, 2^64 - 1 and 2^63 - 1 too.
std::string range_text(int64_t lo, uint64_t hi);
// Decimal digits only, a leading '-' where the range has negatives, within the range. strtol and
// friends read "010" as octal, "0x10" as 16, wrap "-1" and clamp 2⁶⁴; this refuses all but the
// first, and rewrites `input` as plain decimal ("10") when nothing is wrong.
std::string integer_problem(std::string& input, const IntegerRange& range);

}  // namespace qkv
