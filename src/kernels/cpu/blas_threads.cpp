#include "kernels/cpu/blas_threads.h"

#include <cblas.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "qkv/blas.h"
#include "qkv/tensor.h"
#include "qkv/threads.h"

// OpenBLAS's own allocator of buffers (exported by libopenblas, though not in cblas.h). Weak, so
// that a BLAS without it still links; there the buffers are left to OpenBLAS's calls to map.
extern "C" void* blas_memory_alloc(int procpos) __attribute__((weak));
extern "C" void blas_memory_free(void* buffer) __attribute__((weak));

namespace qkv {
namespace cpu {
namespace {

// One OpenBLAS buffer as it maps it: BUFFER_SIZE (128 MiB) and a 64-byte header, a page more.
constexpr std::size_t kBufferMiB = 128;
constexpr std::size_t kBufferBytes = (kBufferMiB << 20) + 4096;
// The room checked for each thread beyond the buffers OpenBLAS has: its buffer, and the arena of
// 64 MiB of address space (HEAP_MAX_SIZE on 64-bit) glibc reserves at a new thread's first malloc.
// (When the check reserved and released the room thread by thread, that arena took a buffer's
// room and `qkv train --threads 3` under ulimit -v 700000 spun in OpenBLAS, issue 26's last sweep.
// The buffers are mapped at the check now, but the threads still take their arenas.)
constexpr std::size_t kArenaMiB = 64;
constexpr std::size_t kThreadMiB = kBufferMiB + kArenaMiB;
constexpr std::size_t kThreadBytes = kBufferBytes + (kArenaMiB << 20);

// How many of qkv's threads can be inside OpenBLAS at once without it mapping another buffer:
// the buffers mapped here (map_caller_buffers) or by the first product (check_room_for_blas).
std::mutex g_callers_mutex;
int g_caller_buffers = 0;

// The most buffers asked of OpenBLAS for callers at once: it has slots for 2 × MAX_THREADS (64 in
// Debian's build) buffers in all, its own threads' included, and past them it prints a line and
// returns null.
constexpr int kMostCallerBuffers = 64;

// Has OpenBLAS map the buffers of `callers` callers at once, now, while the room for them is
// known to be there: takes that many of its slots together, then gives them back. Its slots are
// shared: a call takes the first slot no other call holds and maps a buffer only if that slot has
// none (the legacy allocator; Debian's 0.3.21 is built without USE_TLS), so `callers` slots with a
// buffer each are enough for that many threads in it at once, whichever threads they are.
// Requires g_callers_mutex.
void map_caller_buffers(int callers) {
  callers = std::min(callers, kMostCallerBuffers);
  if (callers <= g_caller_buffers) return;
  if (blas_memory_alloc != nullptr && blas_memory_free != nullptr) {
    std::vector<void*> held;
    for (int i = 0; i < callers; ++i) {
      void* buffer = blas_memory_alloc(0);
      if (buffer == nullptr) break;
      held.push_back(buffer);
    }
    for (void* buffer : held) blas_memory_free(buffer);
  }
  g_caller_buffers = callers;
}

// The address space the process holds now (VmSize), in bytes.
std::size_t held_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmSize:", 0) == 0) return std::strtoull(line.c_str() + 7, nullptr, 10) << 10;
  return 0;
}

// How many OpenBLAS buffers the process has mapped: its anonymous read-write mappings, in whole
// 128 MiB (OpenBLAS maps each with mmap; neighbours merge into one mapping). Only a difference, or
// a count taken before qkv allocates anything that large, says what OpenBLAS did.
int mapped_buffers() {
  std::ifstream maps("/proc/self/maps");
  int count = 0;
  for (std::string line; std::getline(maps, line);) {
    unsigned long begin = 0, end = 0, offset = 0, inode = 1;
    char perms[8] = {}, device[16] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %7s %lx %15s %lu", &begin, &end, perms, &offset, device,
                    &inode) == 6 &&
        inode == 0 && std::string_view(perms) == "rw-p" && line.find('[') == std::string::npos)
      count += static_cast<int>((end - begin) / (kBufferMiB << 20));
  }
  return count;
}

// Waits (up to 10 s) until OpenBLAS's threads have mapped `buffers` buffers in all: each maps its
// own as it starts, shortly after it is created (as the library loads, or when more are asked for).
// Under an address-space limit, work allocated meanwhile could take the room just checked for them
// (and they would retry forever), so the caller waits for them before going on.
bool wait_for_buffers(int buffers) {
  for (int ms = 0; ms < 10000; ++ms) {
    if (mapped_buffers() >= buffers) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

bool address_space_limited() {
  rlimit as{};
  return ::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY;
}

[[noreturn]] void no_room(int buffers, const char* whose, int err) {
  std::string limit;
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    limit = " under the process's address-space limit of " + std::to_string(as.rlim_cur >> 20) +
            " MiB (ulimit -v)";
  throw Error("cannot map the OpenBLAS buffers of " + std::to_string(buffers) + " more of " +
                  whose + " threads (" + std::to_string(kThreadMiB) +
                  " MiB of address space each, a buffer and a malloc arena: " +
                  std::to_string(buffers * kThreadMiB) + " MiB in all): " + std::strerror(err) +
                  limit + "; expected fewer threads, or more memory",
              Error::Kind::runtime);
}

// Checks that the address space of `buffers` OpenBLAS buffers is free now, by mapping it (never
// touched) and unmapping it; throws qkv::Error (Kind::runtime) naming the limit otherwise.
// MAP_NORESERVE: the kernel's overcommit heuristic judges OpenBLAS's maps one at a time, so this
// one, of all of them at once, must not be judged as a whole; a hard limit (RLIMIT_AS, or strict
// overcommit, which ignores the flag) still counts every byte, as it will count OpenBLAS's.
// `whose` names the threads in the message: "qkv's" (the callers of OpenBLAS beyond those it has
// buffers for) or "OpenBLAS's own".
void check_room_for_buffers(int buffers, const char* whose) {
  if (buffers <= 0) return;
  const std::size_t bytes = static_cast<std::size_t>(buffers) * kThreadBytes;
  void* p = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) no_room(buffers, whose, errno);
  ::munmap(p, bytes);
}

// Serializes set_blas_threads: it reads and raises the count of OpenBLAS's threads.
std::mutex g_blas_threads_mutex;

}  // namespace

SingleThreadedBlas::SingleThreadedBlas(int workers) : previous_(openblas_get_num_threads()) {
  if (workers > 0) {
    // Checked and mapped together, with nothing of qkv's own allocated between the two: mapped
    // later, on the call that first found every buffer held (which may come many steps on, on any
    // thread), the room could be gone and OpenBLAS would retry forever (`qkv train --threads 3`
    // under ulimit -v 700000, one run in twenty on a loaded machine).
    std::lock_guard lock(g_callers_mutex);
    check_room_for_buffers(std::min(workers, kMostCallerBuffers) - g_caller_buffers, "qkv's");
    map_caller_buffers(workers);
  }
  if (previous_ != 1) openblas_set_num_threads(1);
}

SingleThreadedBlas::~SingleThreadedBlas() {
  if (previous_ != 1) openblas_set_num_threads(previous_);
}

BlasThreads::BlasThreads(int threads) : previous_(openblas_get_num_threads()) {
  set_blas_threads(threads);
}

BlasThreads::~BlasThreads() { openblas_set_num_threads(previous_); }

}  // namespace cpu

void set_blas_threads(int threads) {
  const int n = std::clamp(threads, 1, num_cores());
  std::lock_guard lock(cpu::g_blas_threads_mutex);
  // The threads OpenBLAS runs a call on, the caller included: as many as it started when it
  // loaded (its count then), or as many as it was last raised to. Asking for more starts more,
  // each mapping its buffer as it starts: waited for under an address-space limit, so that the
  // work that follows cannot take the room checked for them.
  static int started = openblas_get_num_threads();
  if (n > started) {
    cpu::check_room_for_buffers(n - started, "OpenBLAS's own");
    const int before = cpu::address_space_limited() ? cpu::mapped_buffers() : 0;
    openblas_set_num_threads(n);
    if (cpu::address_space_limited() && !cpu::wait_for_buffers(before + n - started))
      throw Error("OpenBLAS's " + std::to_string(n - started) +
                      " new threads did not map their buffers within 10 s; expected fewer "
                      "threads, or more memory",
                  Error::Kind::runtime);
    started = n;
  }
  openblas_set_num_threads(n);
}

void check_room_for_blas(const char* program) {
  if (!cpu::address_space_limited()) return;
  rlimit as{};
  ::getrlimit(RLIMIT_AS, &as);
  // The threads OpenBLAS started as it loaded each map a buffer as they start, which may be
  // before main or after it; the caller's first product maps one more. All of them must fit:
  // room for what the process holds, the buffers not mapped yet and the caller's.
  const int workers = std::max(0, openblas_get_num_threads() - 1);
  const int mapped = std::min(cpu::mapped_buffers(), workers);
  const std::size_t need =
      cpu::held_bytes() + static_cast<std::size_t>(workers - mapped + 1) * cpu::kBufferBytes;
  void* p = need <= as.rlim_cur ? ::mmap(nullptr, cpu::kBufferBytes, PROT_NONE,
                                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                                : MAP_FAILED;
  if (p != MAP_FAILED) {
    ::munmap(p, cpu::kBufferBytes);
    // Wait for those threads to map theirs, then map the caller's now, while the room is there:
    // later, the work's own allocations could take it (under ulimit -v 280000, `qkv train
    // --threads 1` spun in its first product, issue 26's last sweep).
    if (cpu::wait_for_buffers(workers)) {
      std::lock_guard lock(cpu::g_callers_mutex);
      cpu::map_caller_buffers(1);
      return;
    }
  }
  const std::size_t limit_mib = as.rlim_cur >> 20;
  // At least what the process holds now and the buffers (the run itself needs more still).
  const std::size_t need_mib = (need >> 20) + 1;
  throw Error(std::string(program) + " cannot run under an address-space limit of " +
                  std::to_string(limit_mib) +
                  " MiB (ulimit -v): OpenBLAS maps 128 MiB for each of the " +
                  std::to_string(workers + 1) +
                  " threads it started as it loaded (one a core, whatever --threads says) and "
                  "finds no room for them; expected a limit of at least " +
                  std::to_string(need_mib) + " MiB, or none" +
                  (workers > 0 ? ", or OPENBLAS_NUM_THREADS=1 in the environment" : ""),
              Error::Kind::runtime);
}

}  // namespace qkv
