// cli/memory.cpp — sizes as the user types and reads them; see memory.h.
#include "memory.h"

#include <unistd.h>

#include <charconv>
#include <cstdio>

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

int64_t default_memory_limit() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || size <= 0) return int64_t{4} << 30;
  return static_cast<int64_t>(pages) * size / 2;
}

std::string bytes_str(int64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double x = static_cast<double>(bytes);
  int u = 0;
  while (x >= 1024 && u < 6) x /= 1024, ++u;
  char text[32];
  std::snprintf(text, sizeof text,
                u == 0   ? "%.0f %s"
                : x < 10 ? "%.1f %s"
                         : "%.0f %s",
                x, units[u]);
  return text;
}

}  // namespace qkv::cli
