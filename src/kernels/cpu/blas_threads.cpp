#include "kernels/cpu/blas_threads.h"

#include <cblas.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>

#include "qkv/blas.h"
#include "qkv/tensor.h"
#include "qkv/threads.h"

namespace qkv {
namespace cpu {
namespace {

// One OpenBLAS buffer as it maps it: BUFFER_SIZE (128 MiB) and a 64-byte header, a page more.
constexpr std::size_t kBufferMiB = 128;
constexpr std::size_t kBufferBytes = (kBufferMiB << 20) + 4096;
// A thread that has not called OpenBLAS yet may not have allocated either: its first malloc makes
// glibc reserve an arena of 64 MiB of address space (HEAP_MAX_SIZE on 64-bit) before OpenBLAS's
// malloc of its buffer. Left out of the check, that reservation took the room just checked, and
// `qkv train --threads 3` under ulimit -v 700000 spun in OpenBLAS (issue 26's last sweep).
constexpr std::size_t kArenaMiB = 64;
constexpr std::size_t kThreadMiB = kBufferMiB + kArenaMiB;
constexpr std::size_t kThreadBytes = kBufferBytes + (kArenaMiB << 20);

// The threads known to hold a buffer: pool workers (and callers) that have called OpenBLAS. A
// thread that ends frees its buffer but stays counted; qkv's workers live as long as the process.
thread_local bool t_holds_buffer = false;
std::atomic<int> g_callers_with_buffer{0};

// Maps, untouched, the address space that `buffers` OpenBLAS buffers will take, and unmaps it.
// MAP_NORESERVE: the kernel's overcommit heuristic judges OpenBLAS's maps one at a time, so this
// one, of all of them at once, must not be judged as a whole; a hard limit (RLIMIT_AS, or strict
// overcommit, which ignores the flag) still counts every byte, as it will count OpenBLAS's.
// `whose` qualifies the threads in the message: "" or "more OpenBLAS ".
void check_room_for_buffers(int buffers, const char* whose) {
  if (buffers <= 0) return;
  const std::size_t bytes = static_cast<std::size_t>(buffers) * kThreadBytes;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p != MAP_FAILED) {
    ::munmap(p, bytes);
    return;
  }
  const int err = errno;
  std::string limit;
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    limit = " under the process's address-space limit of " + std::to_string(as.rlim_cur >> 20) +
            " MiB (ulimit -v)";
  throw Error("cannot map the OpenBLAS buffers of " + std::to_string(buffers) + " " + whose +
                  (buffers == 1 ? "thread" : "threads") + " (" + std::to_string(kThreadMiB) +
                  " MiB of address space each, a buffer and a malloc arena: " +
                  std::to_string(buffers * kThreadMiB) + " MiB in all): " + std::strerror(err) +
                  limit + "; expected fewer threads, or more memory",
              Error::Kind::runtime);
}

// Serializes set_blas_threads: it reads and raises the count of OpenBLAS's threads.
std::mutex g_blas_threads_mutex;

}  // namespace

SingleThreadedBlas::SingleThreadedBlas(int workers) : previous_(openblas_get_num_threads()) {
  if (workers > 0) check_room_for_buffers(workers - g_callers_with_buffer.load(), "");
  if (previous_ != 1) openblas_set_num_threads(1);
}

SingleThreadedBlas::~SingleThreadedBlas() {
  if (previous_ != 1) openblas_set_num_threads(previous_);
}

BlasThreads::BlasThreads(int threads) : previous_(openblas_get_num_threads()) {
  set_blas_threads(threads);
}

BlasThreads::~BlasThreads() { openblas_set_num_threads(previous_); }

void note_blas_caller() {
  if (t_holds_buffer) return;
  t_holds_buffer = true;
  g_callers_with_buffer.fetch_add(1);
}

}  // namespace cpu

void set_blas_threads(int threads) {
  const int n = std::clamp(threads, 1, num_cores());
  std::lock_guard lock(cpu::g_blas_threads_mutex);
  // The threads OpenBLAS runs a call on, the caller included: as many as it started when it
  // loaded (its count then), or as many as it was last raised to. Asking for more starts more.
  static int started = openblas_get_num_threads();
  if (n > started) {
    cpu::check_room_for_buffers(n - started, "more OpenBLAS ");
    started = n;
  }
  openblas_set_num_threads(n);
}

void check_room_for_blas(const char* program) {
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY) return;
  // One buffer: when the loaded OpenBLAS's threads hold theirs, the caller's first call needs one;
  // when one of them is retrying, less than one buffer's room is left. (A thread that has not yet
  // tried when this runs is not seen; they try as the library loads, before main.)
  void* p = ::mmap(nullptr, cpu::kBufferBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p != MAP_FAILED) {
    ::munmap(p, cpu::kBufferBytes);
    return;
  }
  const std::size_t limit_mib = as.rlim_cur >> 20;
  // At least what the process holds now and one buffer more (the run itself needs more still).
  std::size_t held_kib = 0;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmSize:", 0) == 0) held_kib = std::strtoull(line.c_str() + 7, nullptr, 10);
  const std::size_t need_mib = (held_kib >> 10) + cpu::kBufferMiB + 1;
  throw Error(std::string(program) + " cannot run under an address-space limit of " +
                  std::to_string(limit_mib) +
                  " MiB (ulimit -v): OpenBLAS maps 128 MiB a thread and finds no room for it; "
                  "expected a limit of at least " +
                  std::to_string(need_mib) + " MiB, or none",
              Error::Kind::runtime);
}

}  // namespace qkv
