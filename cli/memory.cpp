// cli/memory.cpp — sizes as the user types and reads them; see memory.h.
#include "memory.h"

#include <charconv>
#include <cstdint>
#include <iostream>

#include "qkv/tensor.h"

namespace qkv::cli {

namespace {

// Work of at least this estimate is announced before it starts (require_memory).
constexpr int64_t kNoteBytes = int64_t{1} << 30;

constexpr const char* kSizeExpected =
    "expected a positive number of bytes with K, M, G or T, e.g. 8G";

// What is wrong with `text` as a size, empty if nothing; else `bytes` is the size. An integer is
// read exactly (9223372036854775807 is 2⁶³ − 1 bytes, not a double's 2⁶³), a fraction as a double.
std::string size_problem(const std::string& text, int64_t& bytes) {
  if (text.empty()) return "the value is empty; " + std::string(kSizeExpected);
  const std::size_t number_end = text.find_first_not_of("0123456789.eE+-");
  const std::string number = text.substr(0, number_end);
  const std::string suffix = number_end == std::string::npos ? "" : text.substr(number_end);
  int64_t unit = 0;
  if (suffix.empty())
    unit = 1;
  else if (suffix == "K" || suffix == "KiB")
    unit = int64_t{1} << 10;
  else if (suffix == "M" || suffix == "MiB")
    unit = int64_t{1} << 20;
  else if (suffix == "G" || suffix == "GiB")
    unit = int64_t{1} << 30;
  else if (suffix == "T" || suffix == "TiB")
    unit = int64_t{1} << 40;
  const char* begin = number.data();
  const char* end = begin + number.size();
  const std::string too_large =
      text + " is more than the largest size, 2^63 - 1 bytes (8 EiB); " + kSizeExpected;
  if (unit > 0 && !number.empty() && number.find_first_not_of("0123456789") == std::string::npos) {
    uint64_t n = 0;
    const auto [at, ec] = std::from_chars(begin, end, n);
    if (ec == std::errc::result_out_of_range ||
        (ec == std::errc() && n > static_cast<uint64_t>(INT64_MAX / unit)))
      return too_large;
    if (ec == std::errc() && at == end && n >= 1) {
      bytes = static_cast<int64_t>(n) * unit;
      return "";
    }
  }
  double x = 0;
  const auto [at, ec] = std::from_chars(begin, end, x);
  const double size = x * static_cast<double>(unit);
  if (ec != std::errc() || at != end || unit == 0 || !(size >= 1))
    return text + " is not a size; " + kSizeExpected;
  if (size >= 9223372036854775808.0) return too_large;  // 2⁶³
  bytes = static_cast<int64_t>(size);
  return "";
}

}  // namespace

int64_t parse_bytes(const std::string& option, const std::string& text) {
  int64_t bytes = 0;
  if (const std::string problem = size_problem(text, bytes); !problem.empty())
    throw Error(option + ": " + problem);
  return bytes;
}

CLI::Validator size_validator() {
  return CLI::Validator(
      [](std::string& input) {
        int64_t bytes = 0;
        return size_problem(input, bytes);
      },
      "");
}

void add_memory_limit_option(CLI::App& cmd, std::string& value, const std::string& what) {
  cmd.add_option("--memory-limit", value,
                 "most memory " + what + " may take, e.g. 8G; past it the command refuses " +
                     "before it starts (default: half the machine's memory, less under ulimit -v "
                     "or a cgroup "
                     "limit)")
      ->type_name("SIZE")
      ->check(size_validator());
}

int64_t memory_limit(const std::string& value) {
  return value.empty() ? default_memory_limit() : parse_bytes("--memory-limit", value);
}

std::string memory_limit_knob(const std::string& value) {
  if (!value.empty()) return "--memory-limit";
  const std::string bound = default_memory_limit_bound();
  return "--memory-limit not given: " + (bound.empty() ? "half the machine's memory" : bound);
}

void require_memory(int64_t need, const std::string& value, const std::string& work,
                    const std::string& expected) {
  const int64_t limit = memory_limit(value);
  check_memory(need, limit, work, memory_limit_knob(value), expected);
  // Work that will take a large share of the machine says so before it starts, so that a user
  // who sees the machine slow down knows why and what to lower.
  if (need >= kNoteBytes)
    std::cerr << "qkv: note: " << work << " needs about " << bytes_str(need)
              << " of memory (the limit is " << bytes_str(limit) << ": " << memory_limit_knob(value)
              << ")\n"
              << std::flush;
}

}  // namespace qkv::cli
