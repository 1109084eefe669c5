// Numbers as a person types them (qkv/parse.h).
#include "qkv/parse.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace qkv {
namespace {

std::string number_str(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

}  // namespace

std::string bounds_text(const Bounds& b) {
  const bool has_lo = b.lo > -std::numeric_limits<double>::max();
  const bool has_hi = b.hi < std::numeric_limits<double>::max();
  if (has_lo && has_hi)
    return "a number in " + std::string(b.lo_open ? "(" : "[") + number_str(b.lo) + ", " +
           number_str(b.hi) + (b.hi_open ? ")" : "]");
  if (has_lo) return std::string("a number ") + (b.lo_open ? "> " : "≥ ") + number_str(b.lo);
  if (has_hi) return std::string("a number ") + (b.hi_open ? "< " : "≤ ") + number_str(b.hi);
  return "a finite number";
}

namespace {

// "10^8" for a power of ten from 10^6 up, "2^64 - 1" for the largest seed, else the digits.
std::string integer_str(uint64_t n) {
  if (n == std::numeric_limits<uint64_t>::max()) return "2^64 - 1";
  if (n == static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return "2^63 - 1";
  int zeros = 0;
  for (uint64_t m = n; m >= 10 && m % 10 == 0; m /= 10) ++zeros;
  const bool power_of_ten = zeros >= 6 && n == static_cast<uint64_t>(std::pow(10.0, zeros));
  return power_of_ten ? "10^" + std::to_string(zeros) : std::to_string(n);
}

std::string signed_str(int64_t n) {
  if (n >= 0) return integer_str(static_cast<uint64_t>(n));
  if (n == std::numeric_limits<int64_t>::min()) return "-2^63";
  return "-" + integer_str(static_cast<uint64_t>(-n));
}

}  // namespace

std::string range_text(int64_t lo, uint64_t hi) {
  return signed_str(lo) + " to " + integer_str(hi);
}

std::string integer_problem(std::string& input, const IntegerRange& r) {
  const std::string want = r.expected.empty() ? range_text(r.lo, r.hi) : r.expected;
  if (input.empty()) return "the value is empty; expected " + want;
  const bool negative = input[0] == '-';
  const std::string_view digits = std::string_view(input).substr(negative ? 1 : 0);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos)
    return input + " is not a decimal integer; expected " + want;
  uint64_t magnitude = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude);
  bool in_range = ec == std::errc();  // else more than 2⁶⁴ − 1
  if (in_range && negative && magnitude > 0)
    // -magnitude ≥ lo, written so that lo = −2⁶³ does not overflow.
    in_range = r.lo < 0 && magnitude - 1 <= static_cast<uint64_t>(-(r.lo + 1));
  else if (in_range)
    in_range = magnitude <= r.hi && (r.lo <= 0 || magnitude >= static_cast<uint64_t>(r.lo));
  if (!in_range) return input + " is out of range; expected " + want;
  input = (negative && magnitude > 0 ? "-" : "") + std::to_string(magnitude);
  return "";
}

std::string number_problem(const std::string& input, const Bounds& bounds,
                           const std::string& want) {
  if (input.empty()) return "the value is empty; expected " + want;
  // Decimal notation only, as the integer options: strtod also reads " 1", "+1" and hexadecimal
  // "0x10" (issue 26). inf and nan are words, answered below.
  const bool word = std::any_of(input.begin(), input.end(), [](char c) {
    return std::isalpha(static_cast<unsigned char>(c)) &&
           std::string_view("eExXpP").find(c) == std::string_view::npos;
  });
  if (input[0] == '+' || input.find_first_of(" \t\n\v\f\rxXpP") != std::string::npos ||
      (!word && input.find_first_not_of("-.0123456789eE+") != std::string::npos))
    return input + " is not a decimal number; expected " + want;
  char* end = nullptr;
  const double x = std::strtod(input.c_str(), &end);  // 1e999: ±HUGE_VAL, said not finite below
  if (end != input.c_str() + input.size() || std::isnan(x))
    return input + " is not a number; expected " + want;
  if (!std::isfinite(x)) return input + " is not finite; expected " + want;
  const bool low = bounds.lo_open ? !(x > bounds.lo) : !(x >= bounds.lo);
  const bool high = bounds.hi_open ? !(x < bounds.hi) : !(x <= bounds.hi);
  if (low || high) return input + " is out of range; expected " + want;
  return "";
}

}  // namespace qkv
