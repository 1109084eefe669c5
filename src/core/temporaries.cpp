// The registry of temporaries for the signal handler: fixed slots, each a name and a lock-free
// state, so that the handler never allocates, locks or reads a half-written name.
#include "core/temporaries.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace qkv {
namespace {

constexpr int kSlots = 64;
constexpr std::size_t kMaxName = 4096;  // PATH_MAX on Linux, terminator included
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kSignalCount = sizeof kSignals / sizeof kSignals[0];

enum State : int { kFree = 0, kClaimed = 1, kReady = 2 };
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads atomics");

char g_names[kSlots][kMaxName];
std::atomic<int> g_state[kSlots];

std::mutex g_mutex;  // guards the slots' claiming and the handlers' installation; never the handler
int g_registered = 0;
bool g_installed[kSignalCount];
struct sigaction g_previous[kSignalCount];

extern "C" void remove_temporaries_and_reraise(int signal_number) {
  for (int i = 0; i < kSlots; ++i)
    if (g_state[i].load(std::memory_order_acquire) == kReady) ::unlink(g_names[i]);
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);  // delivered once this handler returns: the signal is blocked till then
}

void install_handlers() {
  for (int i = 0; i < kSignalCount; ++i) {
    struct sigaction previous {};
    ::sigaction(kSignals[i], nullptr, &previous);
    // A signal the process ignores (nohup's SIGHUP) stays ignored: it kills nothing to clean after.
    g_installed[i] = previous.sa_handler != SIG_IGN;
    if (!g_installed[i]) continue;
    struct sigaction action {};
    action.sa_handler = remove_temporaries_and_reraise;
    ::sigfillset(&action.sa_mask);  // no second signal runs the handler while it unlinks
    ::sigaction(kSignals[i], &action, &g_previous[i]);
  }
}

void restore_handlers() {
  for (int i = 0; i < kSignalCount; ++i)
    if (g_installed[i]) ::sigaction(kSignals[i], &g_previous[i], nullptr);
}

}  // namespace

int register_temporary(const std::string& name) {
  if (name.size() >= kMaxName) return -1;
  const std::lock_guard lock(g_mutex);
  for (int i = 0; i < kSlots; ++i) {
    if (g_state[i].load(std::memory_order_relaxed) != kFree) continue;
    g_state[i].store(kClaimed, std::memory_order_relaxed);
    std::memcpy(g_names[i], name.c_str(), name.size() + 1);
    g_state[i].store(kReady, std::memory_order_release);  // the name is whole before it is seen
    if (g_registered++ == 0) install_handlers();
    return i;
  }
  return -1;
}

void unregister_temporary(int slot) {
  if (slot < 0 || slot >= kSlots) return;
  const std::lock_guard lock(g_mutex);
  g_state[slot].store(kFree, std::memory_order_release);
  if (--g_registered == 0) restore_handlers();
}

}  // namespace qkv
