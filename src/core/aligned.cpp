// Counting of live scratch bytes, for the peak-memory column of the benchmarks.
#include "core/aligned.h"

#include <algorithm>
#include <atomic>

namespace qkv {
namespace {
std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};
}  // namespace

int64_t memory_current_bytes() { return g_current.load(); }
int64_t memory_peak_bytes() { return g_peak.load(); }
void memory_reset_peak() { g_peak.store(g_current.load()); }

void memory_track(int64_t delta) {
  const int64_t now = g_current.fetch_add(delta) + delta;
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}

}  // namespace qkv
