// qkv/parse.h: numbers as a person types them. What strtol and strtod would read silently (octal,
// hexadecimal, a wrapped "-1", a clamped 2⁶⁴, "+1", " 1") is refused with the value as typed.
#include "qkv/parse.h"

#include <gtest/gtest.h>

#include <string>

namespace qkv {
namespace {

std::string integer_says(std::string input, const IntegerRange& range) {
  const std::string problem = integer_problem(input, range);
  return problem.empty() ? "ok " + input : problem;
}

TEST(ParseInteger, DecimalDigitsWithinTheRangeRewrittenPlain) {
  const IntegerRange r{.lo = 1, .hi = 100'000'000};
  EXPECT_EQ(integer_says("010", r), "ok 10");
  EXPECT_EQ(integer_says("100000000", r), "ok 100000000");
  EXPECT_EQ(integer_says("100000001", r), "100000001 is out of range; expected 1 to 10^8");
  EXPECT_EQ(integer_says("0", r), "0 is out of range; expected 1 to 10^8");
  EXPECT_EQ(integer_says("1e9", r), "1e9 is not a decimal integer; expected 1 to 10^8");
  EXPECT_EQ(integer_says("0x10", r), "0x10 is not a decimal integer; expected 1 to 10^8");
  EXPECT_EQ(integer_says("-1", r), "-1 is out of range; expected 1 to 10^8");
  EXPECT_EQ(integer_says("18446744073709551616", r),
            "18446744073709551616 is out of range; expected 1 to 10^8");
  EXPECT_EQ(integer_says("", r), "the value is empty; expected 1 to 10^8");
}

TEST(ParseInteger, NegativeRangesAndTheExtremes) {
  const IntegerRange all{.lo = std::numeric_limits<int64_t>::min()};
  EXPECT_EQ(integer_says("-9223372036854775808", all), "ok -9223372036854775808");
  EXPECT_EQ(integer_says("-9223372036854775809", all),
            "-9223372036854775809 is out of range; expected -2^63 to 2^63 - 1");
  EXPECT_EQ(integer_says("-0", {.lo = 0, .hi = 5}), "ok 0");
  const IntegerRange seed{.lo = 0, .hi = std::numeric_limits<uint64_t>::max()};
  EXPECT_EQ(integer_says("18446744073709551615", seed), "ok 18446744073709551615");
  EXPECT_EQ(integer_says("7", {.lo = 1, .hi = 4, .expected = "1 to 4 (the cores)"}),
            "7 is out of range; expected 1 to 4 (the cores)");
  EXPECT_EQ(range_text(0, 1'000'000), "0 to 10^6");
  EXPECT_EQ(range_text(0, 100'000), "0 to 100000");
}

TEST(ParseNumber, FiniteDecimalWithinTheBounds) {
  const Bounds b{.lo = 0, .hi = 10, .lo_open = true, .hi_open = true};
  const std::string want = bounds_text(b);
  EXPECT_EQ(want, "a number in (0, 10)");
  EXPECT_EQ(number_problem("1e-3", b, want), "");
  EXPECT_EQ(number_problem("0", b, want), "0 is out of range; expected a number in (0, 10)");
  EXPECT_EQ(number_problem("10", b, want), "10 is out of range; expected a number in (0, 10)");
  EXPECT_EQ(number_problem("+1", b, want), "+1 is not a decimal number; expected " + want);
  EXPECT_EQ(number_problem(" 1", b, want), " 1 is not a decimal number; expected " + want);
  EXPECT_EQ(number_problem("0x1", b, want), "0x1 is not a decimal number; expected " + want);
  EXPECT_EQ(number_problem("nan", b, want), "nan is not a number; expected " + want);
  EXPECT_EQ(number_problem("inf", b, want), "inf is not finite; expected " + want);
  EXPECT_EQ(number_problem("1e999", b, want), "1e999 is not finite; expected " + want);
  EXPECT_EQ(number_problem("1..2", b, want), "1..2 is not a number; expected " + want);
  EXPECT_EQ(number_problem("abc", b, want), "abc is not a number; expected " + want);
  EXPECT_EQ(bounds_text({.lo = 0}), "a number ≥ 0");
  EXPECT_EQ(bounds_text({}), "a finite number");
}

}  // namespace
}  // namespace qkv
