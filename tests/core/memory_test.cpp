// A refusal for memory says two different sizes: need and limit are shown with as many digits as
// it takes to tell them apart (issue 26: "needs about 12 GiB of memory, over the limit of 12 GiB").
#include "qkv/memory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <fstream>

namespace qkv {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kGiB = int64_t{1} << 30, kMiB = int64_t{1} << 20;

TEST(BytesStr, ShowsTwoOrThreeSignificantDigits) {
  EXPECT_EQ(bytes_str(512), "512 bytes");
  EXPECT_EQ(bytes_str(4 * 1024), "4.0 KiB");
  EXPECT_EQ(bytes_str(312 * kMiB), "312 MiB");
  EXPECT_EQ(bytes_str(12 * kGiB + 300 * kMiB), "12 GiB");
}

TEST(MemoryLimitError, SizesThatWouldReadAlikeGetMoreDigits) {
  // 12.29 GiB over 11.70 GiB: both "12 GiB" at bytes_str's precision.
  const int64_t need = 12 * kGiB + 300 * kMiB, limit = 11 * kGiB + 717 * kMiB;
  const MemoryLimitError e("attention", need, limit, "memory_limit", "less");
  EXPECT_THAT(e.what(), HasSubstr("attention needs about 12.3 GiB of memory, over the limit of "
                                  "11.7 GiB (memory_limit); expected less"));
  // Sizes that differ in the usual digits keep them.
  const MemoryLimitError apart("w", 3 * kGiB, 1 * kGiB, "k", "");
  EXPECT_THAT(apart.what(),
              HasSubstr("w needs about 3.0 GiB of memory, over the limit of 1.0 GiB"));
  // A byte over: no decimals tell them apart, the byte counts do.
  const MemoryLimitError byte("w", 10 * kGiB + 1, 10 * kGiB, "k", "");
  EXPECT_THAT(byte.what(), HasSubstr("needs about 10,737,418,241 bytes of memory, over the limit "
                                     "of 10,737,418,240 bytes"));
}

// The default limit was half the machine's memory whatever `ulimit -v` allowed, so a limited shell
// ran work far past its address space into std::bad_alloc (issue 26). Under a limit it is three
// quarters of the room left, and never more than half the memory.
TEST(DefaultMemoryLimit, IsWithinTheAddressSpaceUlimitLeaves) {
  EXPECT_LE(default_memory_limit(), std::min(physical_memory_bytes(), cgroup_memory_bytes()) / 2);
  EXPECT_GE(default_memory_limit(), 64 * kMiB);
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &saved), 0);
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0;
  statm >> pages;
  const int64_t mapped = pages * sysconf(_SC_PAGE_SIZE);
  if (saved.rlim_max != RLIM_INFINITY && static_cast<int64_t>(saved.rlim_max) < mapped + 2 * kGiB)
    GTEST_SKIP() << "the hard address-space limit leaves no room to lower the soft one by";
  rlimit lowered = saved;
  lowered.rlim_cur = static_cast<rlim_t>(mapped + 1 * kGiB);
  ASSERT_EQ(setrlimit(RLIMIT_AS, &lowered), 0);
  const int64_t room = address_space_room(), limit = default_memory_limit();
  ASSERT_EQ(setrlimit(RLIMIT_AS, &saved), 0);
  // What is mapped moves a little between the reads; the room is about 1 GiB.
  EXPECT_GT(room, 900 * kMiB);
  EXPECT_LE(room, 1 * kGiB);
  EXPECT_LE(limit, 768 * kMiB);
  EXPECT_GT(limit, 600 * kMiB);
}

TEST(DefaultMemoryLimit, NoAddressSpaceLimitLeavesNoBound) {
  rlimit r{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &r), 0);
  if (r.rlim_cur != RLIM_INFINITY) GTEST_SKIP() << "this shell runs under ulimit -v";
  EXPECT_EQ(address_space_room(), kMaxBytes);
}

}  // namespace
}  // namespace qkv
