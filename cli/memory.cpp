// cli/memory.cpp — sizes as the user types and reads them; see memory.h.
#include "memory.h"

#include <charconv>

#include "qkv/tensor.h"

namespace qkv::cli {

int64_t parse_bytes(const std::string& option, const std::string& text) {
  double x = 0;
  const char* end = text.data() + text.size();
  const auto [rest, ec] = std::from_chars(text.data(), end, x);
  double unit = 1;
  const std::string suffix(rest, end);
  if (suffix == "K" || suffix == "KiB")
    unit = 1024.0;
  else if (suffix == "M" || suffix == "MiB")
    unit = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GiB")
    unit = 1024.0 * 1024 * 1024;
  else if (suffix == "T" || suffix == "TiB")
    unit = 1024.0 * 1024 * 1024 * 1024;
  else if (!suffix.empty())
    unit = 0;
  const double bytes = x * unit;
  if (ec != std::errc() || unit == 0 || !(bytes >= 1) || bytes > 9e18)
    throw Error(option + " '" + text +
                "' is not a size; expected a positive number of bytes with K, M, G or T, e.g. 8G");
  return static_cast<int64_t>(bytes);
}

void add_memory_limit_option(CLI::App& cmd, std::string& value, const std::string& what) {
  cmd.add_option("--memory-limit", value,
                 "most memory " + what + " may take, e.g. 8G; past it the command refuses " +
                     "before it starts (default: half the machine's memory)")
      ->type_name("SIZE");
}

int64_t memory_limit(const std::string& value) {
  return value.empty() ? default_memory_limit() : parse_bytes("--memory-limit", value);
}

void require_memory(int64_t need, const std::string& value, const std::string& work,
                    const std::string& expected) {
  check_memory(need, memory_limit(value), work, "--memory-limit", expected);
}

}  // namespace qkv::cli
