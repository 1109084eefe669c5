// A refusal for memory says two different sizes: need and limit are shown with as many digits as
// it takes to tell them apart (issue 26: "needs about 12 GiB of memory, over the limit of 12 GiB").
#include "qkv/memory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace qkv
