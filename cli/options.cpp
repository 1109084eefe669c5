#include "options.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

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

}  // namespace

CLI::Validator finite_number(Bounds bounds) {
  const std::string want = expected(bounds);
  return CLI::Validator(
      [bounds, want](std::string& input) -> std::string {
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

CLI::Validator seed_integer() {
  const std::string want =
      "an integer from 0 to " + std::to_string(std::numeric_limits<uint64_t>::max());
  return CLI::Validator(
      [want](std::string& input) -> std::string {
        uint64_t x = 0;
        const char* end = input.data() + input.size();
        const bool digits =
            !input.empty() && input.find_first_not_of("0123456789") == std::string::npos;
        const auto [at, ec] = std::from_chars(input.data(), end, x);
        if (!digits || ec != std::errc() || at != end) return input + " is not " + want;
        input = std::to_string(x);  // "010" is ten, not CLI11's octal eight
        return "";
      },
      want);
}

CLI::Validator thread_count() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        int64_t n = 0;
        if (!CLI::detail::lexical_cast(input, n))
          return input + " is not an integer; expected " + num_threads_range();
        return num_threads_problem(n);
      },
      "1 to " + std::to_string(max_num_threads()));
}

std::string thread_count_help() {
  return "threads, at most " + std::to_string(kThreadsPerCore) +
         " × the cores (default $QKV_NUM_THREADS, else all cores)";
}

}  // namespace qkv::cli
