// Memory limits and sizes (qkv/memory.h).
#include "qkv/memory.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

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
    : Error(work + " needs about " + (need >= kMaxBytes ? "more than 4 EiB" : bytes_str(need)) +
                " of memory, over the limit of " + bytes_str(limit) +
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
