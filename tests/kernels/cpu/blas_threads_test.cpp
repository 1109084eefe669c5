// OpenBLAS's buffers as SingleThreadedBlas has it map them (kernels/cpu/blas_threads.h): its slots
// are shared by all threads, and a call maps a buffer whenever every slot with one is held, so
// what must be mapped ahead of a parallel run is one buffer for each call that can be inside
// OpenBLAS at once. Mapped on a thread's first call instead, the buffer of the call that found
// every slot held came steps later, after the work had taken the room: `qkv train --threads 3`
// under ulimit -v 700000 spun in OpenBLAS in one run of twenty on a loaded machine.
#include "kernels/cpu/blas_threads.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

extern "C" void* blas_memory_alloc(int procpos);
extern "C" void blas_memory_free(void* buffer);

namespace {

// The address space the process holds (VmSize), in bytes.
std::size_t held_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmSize:", 0) == 0) return std::strtoull(line.c_str() + 7, nullptr, 10) << 10;
  return 0;
}

constexpr std::size_t kBuffer = std::size_t{128} << 20;

// Takes `n` of OpenBLAS's slots at once, as n calls inside it would, and returns how much address
// space doing so mapped.
std::size_t mapped_by_holding(int n) {
  const std::size_t before = held_bytes();
  std::vector<void*> held;
  for (int i = 0; i < n; ++i) held.push_back(blas_memory_alloc(0));
  const std::size_t after = held_bytes();
  for (void* buffer : held) {
    EXPECT_NE(buffer, nullptr);
    blas_memory_free(buffer);
  }
  return after - before;
}

// More callers than any other test's runs (which may share this process): those buffers are
// OpenBLAS's for the process's life, so a smaller count could pass on their account.
constexpr int kCallers = 40;

TEST(SingleThreadedBlas, HasOpenBlasMapABufferForEachCallerBeforeTheyCall) {
  { const qkv::cpu::SingleThreadedBlas blas(kCallers); }
  EXPECT_EQ(mapped_by_holding(kCallers), 0u);
  // The check above sees a shortfall: two calls more than were prepared for map two buffers,
  // though this thread has called OpenBLAS before (a count of threads would say it needs none).
  const std::size_t two_more = mapped_by_holding(kCallers + 2);
  EXPECT_GE(two_more, 2 * kBuffer);
  EXPECT_LT(two_more, 3 * kBuffer);
  // And those are kept: the same calls again map nothing.
  EXPECT_EQ(mapped_by_holding(kCallers + 2), 0u);
}

// Past 64 callers OpenBLAS's table of slots (2 × MAX_THREADS, its own threads' included) would run
// out, and it prints a line and gives null: SingleThreadedBlas asks for 64 at most.
TEST(SingleThreadedBlas, AsksOpenBlasForAtMost64Buffers) {
  { const qkv::cpu::SingleThreadedBlas blas(1000); }
  EXPECT_EQ(mapped_by_holding(64), 0u);
}

}  // namespace
