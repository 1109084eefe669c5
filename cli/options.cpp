#include "options.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "qkv/files.h"
#include "qkv/threads.h"

namespace qkv::cli {
namespace {

std::string number_str(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// "a number in (0, 10)", "a number ≥ 0", "a finite number".
std::string expected(const Bounds& b) {
  const bool has_lo = b.lo > -std::numeric_limits<double>::max();
  const bool has_hi = b.hi < std::numeric_limits<double>::max();
  if (has_lo && has_hi)
    return "a number in " + std::string(b.lo_open ? "(" : "[") + number_str(b.lo) + ", " +
           number_str(b.hi) + (b.hi_open ? ")" : "]");
  if (has_lo) return std::string("a number ") + (b.lo_open ? "> " : "≥ ") + number_str(b.lo);
  if (has_hi) return std::string("a number ") + (b.hi_open ? "< " : "≤ ") + number_str(b.hi);
  return "a finite number";
}

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

// What is wrong with `input` as an integer in `r`, empty if nothing; else rewrites it as plain
// decimal (no leading zeros) for CLI11's conversion, which would read "010" as octal.
std::string integer_problem(std::string& input, const IntegerRange& r, const std::string& want) {
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

}  // namespace

CLI::Validator finite_number(Bounds bounds) {
  const std::string want = expected(bounds);
  return CLI::Validator(
      [bounds, want](std::string& input) -> std::string {
        if (input.empty()) return "the value is empty; expected " + want;
        // Decimal notation only, as the integer options: strtod also reads " 1", "+1" and
        // hexadecimal "0x10" (issue 26). inf and nan are words, answered below.
        const bool word = std::any_of(input.begin(), input.end(), [](char c) {
          return std::isalpha(static_cast<unsigned char>(c)) &&
                 std::string_view("eExXpP").find(c) == std::string_view::npos;
        });
        if (input[0] == '+' || input.find_first_of(" \t\n\v\f\rxXpP") != std::string::npos ||
            (!word && input.find_first_not_of("-.0123456789eE+") != std::string::npos))
          return input + " is not a decimal number; expected " + want;
        double x = 0;
        if (!CLI::detail::lexical_cast(input, x))
          return input + " is not a number; expected " + want;
        if (std::isnan(x)) return input + " is not a number; expected " + want;
        if (!std::isfinite(x)) return input + " is not finite; expected " + want;
        const bool low = bounds.lo_open ? !(x > bounds.lo) : !(x >= bounds.lo);
        const bool high = bounds.hi_open ? !(x < bounds.hi) : !(x <= bounds.hi);
        if (low || high) return input + " is out of range; expected " + want;
        return "";
      },
      want);
}

std::string range_text(int64_t lo, uint64_t hi) {
  return signed_str(lo) + " to " + integer_str(hi);
}

CLI::Validator integer(IntegerRange range) {
  const std::string want = range.expected.empty() ? range_text(range.lo, range.hi) : range.expected;
  // No description: the help of each option says its range in its own words.
  return CLI::Validator(
      [range, want](std::string& input) { return integer_problem(input, range, want); }, "");
}

CLI::Validator seed_integer() {
  return integer({.lo = 0, .hi = std::numeric_limits<uint64_t>::max()});
}

CLI::Validator thread_count() {
  return integer(
      {.lo = 1, .hi = static_cast<uint64_t>(max_num_threads()), .expected = num_threads_range()});
}

std::string thread_count_help() {
  return "threads, at most " + std::to_string(kThreadsPerCore) +
         " × the cores (default $QKV_NUM_THREADS, else all cores)";
}

namespace {

std::string utf8_problem(const std::string& input) {
  const std::size_t at = invalid_utf8_at(input);
  if (at == std::string::npos) return "";
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(input[at]));
  return "'" + input + "' is not valid UTF-8 (byte " + std::to_string(at + 1) + " is " + byte +
         "); expected UTF-8 text";
}

}  // namespace

CLI::Validator text(const std::string& expected) {
  return CLI::Validator(
      [expected](std::string& input) -> std::string {
        if (input.find_first_not_of(" \t\r\n\f\v") == std::string::npos)
          return std::string(input.empty() ? "the text is empty" : "the text is only white space") +
                 "; expected " + expected;
        return utf8_problem(input);
      },
      "");
}

CLI::Validator utf8_text() {
  return CLI::Validator([](std::string& input) { return utf8_problem(input); }, "");
}

void refuse_empty_values(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (option->get_expected_max() == 0) continue;  // a flag: it takes no value
    // A list of choices where the help gives one ("top-left | bottom-right"), else what the help
    // shows after the option: "FILE", "N", "Q.npy", else CLI11's type ("TEXT").
    const std::string& description = option->get_description();
    std::string takes = description.find(" | ") != std::string::npos
                            ? description.substr(0, description.find(':'))
                            : option->get_option_text();
    if (takes.empty()) takes = option->get_type_name().substr(0, option->get_type_name().find(':'));
    if (takes.empty()) takes = "a value";
    option->check(CLI::Validator(
        [takes](std::string& input) {
          return input.empty() ? "the value is empty; expected " + takes : std::string();
        },
        ""));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    refuse_empty_values(*sub);
}

}  // namespace qkv::cli
