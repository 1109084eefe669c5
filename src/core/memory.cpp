// Memory limits and sizes (qkv/memory.h).
#include "qkv/memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>

namespace qkv {

int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || size <= 0) return 0;
  return static_cast<int64_t>(pages) * size;
}

namespace {

// A cgroup's memory limit as its file states it ("max", or bytes; cgroup v1 states "no limit" as a
// number near 2^63), kMaxBytes where there is none or the file cannot be read.
int64_t cgroup_limit_in(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return kMaxBytes;
  try {
    std::size_t used = 0;
    const long long bytes = std::stoll(text, &used);
    return used == text.size() && bytes > 0 ? std::min<int64_t>(bytes, kMaxBytes) : kMaxBytes;
  } catch (const std::exception&) {
    return kMaxBytes;  // out of range: no limit
  }
}

}  // namespace

int64_t cgroup_memory_bytes() {
  // The process's own group as /proc/self/cgroup names it (v2: "0::/PATH", v1: "N:memory:/PATH"),
  // then the root of each hierarchy as a container sees it.
  int64_t limit = kMaxBytes;
  std::ifstream groups("/proc/self/cgroup");
  for (std::string line; std::getline(groups, line);) {
    if (line.rfind("0::", 0) == 0)
      limit = std::min(limit, cgroup_limit_in("/sys/fs/cgroup" + line.substr(3) + "/memory.max"));
    const std::size_t v1 = line.find(":memory:");
    if (v1 != std::string::npos)
      limit = std::min(limit, cgroup_limit_in("/sys/fs/cgroup/memory" + line.substr(v1 + 8) +
                                              "/memory.limit_in_bytes"));
  }
  limit = std::min(limit, cgroup_limit_in("/sys/fs/cgroup/memory.max"));
  limit = std::min(limit, cgroup_limit_in("/sys/fs/cgroup/memory/memory.limit_in_bytes"));
  return limit;
}

int64_t address_space_room() {
  rlimit r{};
  if (::getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return kMaxBytes;
  // The address space this process has mapped already (the first field of statm, in pages).
  std::ifstream statm("/proc/self/statm");
  long long pages = 0;
  statm >> pages;
  const long page = ::sysconf(_SC_PAGE_SIZE);
  const int64_t mapped = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
  const int64_t cap = static_cast<int64_t>(std::min<rlim_t>(r.rlim_cur, kMaxBytes));
  return std::max<int64_t>(cap - mapped, 0);
}

namespace {

struct DefaultLimit {
  int64_t bytes;
  std::string bound_by;  // "" for half the machine's memory
};

DefaultLimit default_limit() {
  const int64_t physical = physical_memory_bytes(), cgroup = cgroup_memory_bytes();
  DefaultLimit d{(physical > 0 ? physical : int64_t{8} << 30) / 2, ""};
  if (cgroup / 2 < d.bytes) d = {cgroup / 2, "half the cgroup's limit of " + bytes_str(cgroup)};
  // An estimate is of resident memory; the address space also holds what is mapped but not yet
  // touched (thread stacks, malloc's arenas, OpenBLAS's buffers), hence a quarter of the room kept.
  const int64_t room = address_space_room();
  if (room < kMaxBytes && room / 4 * 3 < d.bytes)
    d = {room / 4 * 3, "3/4 of the " + bytes_str(room) + " of address space ulimit -v leaves"};
  return d;
}

}  // namespace

int64_t default_memory_limit() { return default_limit().bytes; }

std::string default_memory_limit_bound() { return default_limit().bound_by; }

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

std::string address_space_bound() {
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY) return "";
  return " (ulimit -v limits the address space to " + bytes_str(static_cast<int64_t>(as.rlim_cur)) +
         ")";
}

int64_t MemoryLimit::value() const { return bytes > 0 ? bytes : default_memory_limit(); }

std::string MemoryLimit::named() const {
  if (bytes > 0) return knob;
  const std::string bound = default_memory_limit_bound();
  return knob + " not given: " + (bound.empty() ? "half the machine's memory" : bound);
}

void check_memory(int64_t need, const MemoryLimit& limit, const std::string& work,
                  const std::string& expected) {
  if (const int64_t value = limit.value(); need > value)
    throw MemoryLimitError(work, need, value, limit.named(), expected);
}

namespace {
constexpr const char* kSizeExpected =
    "expected a positive number of bytes with K, M, G or T, e.g. 8G";

}  // namespace

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

}  // namespace qkv
