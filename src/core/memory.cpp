// Memory limits and sizes (qkv/memory.h).
#include "qkv/memory.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <utility>

namespace qkv {

int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || size <= 0) return 0;
  return static_cast<int64_t>(pages) * size;
}

int64_t default_memory_limit() {
  const int64_t physical = physical_memory_bytes();
  return physical > 0 ? physical / 2 : int64_t{4} << 30;
}

namespace {

// `bytes` in its largest unit, with `decimals` (−1: one below 10, none above).
std::string scaled(int64_t bytes, int decimals) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double x = static_cast<double>(bytes);
  int u = 0;
  while (x >= 1024 && u < 6) x /= 1024, ++u;
  if (u == 0 || decimals < 0) decimals = u == 0 || x >= 10 ? 0 : 1;
  char text[48];
  std::snprintf(text, sizeof text, "%.*f %s", decimals, x, units[u]);
  return text;
}

// A need and a limit as bytes_str shows them, with as many more decimals as it takes to tell them
// apart: "needs about 12 GiB ..., over the limit of 12 GiB" reads as if nothing were over.
std::pair<std::string, std::string> told_apart(int64_t need, int64_t limit) {
  for (int decimals : {-1, 1, 2, 3}) {
    std::pair<std::string, std::string> shown{scaled(need, decimals), scaled(limit, decimals)};
    if (shown.first != shown.second) return shown;
  }
  return {grouped(need) + " bytes", grouped(limit) + " bytes"};
}

}  // namespace

std::string bytes_str(int64_t bytes) { return scaled(bytes, -1); }

int64_t saturated_bytes(double bytes) {
  if (!(bytes > 0)) return 0;
  if (bytes >= static_cast<double>(kMaxBytes)) return kMaxBytes;
  return static_cast<int64_t>(std::ceil(bytes));
}

int64_t tensor_bytes(const Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(dtype_size(t.dtype())) : 0;
}

MemoryLimitError::MemoryLimitError(const std::string& work, int64_t need, int64_t limit,
                                   const std::string& knob, const std::string& expected)
    : Error(work + " needs about " +
                (need >= kMaxBytes ? "more than 4 EiB" : told_apart(need, limit).first) +
                " of memory, over the limit of " + told_apart(need, limit).second +
                (knob.empty() ? "" : " (" + knob + ")") +
                (expected.empty() ? "" : "; expected " + expected),
            Kind::invalid_argument),
      need_(need),
      limit_(limit) {}

void check_memory(int64_t need, int64_t limit, const std::string& work, const std::string& knob,
                  const std::string& expected) {
  if (need > limit) throw MemoryLimitError(work, need, limit, knob, expected);
}

}  // namespace qkv
