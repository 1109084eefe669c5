// The sizes `qkv attend` checks before its work (weight_count, reference_bytes): inputs of head
// dim 0 hold no bytes whatever their lengths, so L = S = 2^32 is a valid problem whose counts
// must saturate, not wrap ("needs all 0 attention weights" was the message).
#include <gtest/gtest.h>

#include <limits>

#include "qkv/attend.h"
#include "qkv/memory.h"

namespace qkv::explain {
namespace {

AttentionCall call(int64_t L, int64_t S, int64_t D) {
  AttentionCall c;
  c.q = Tensor({L, D}, DType::f32);
  c.k = Tensor({S, D}, DType::f32);
  c.v = Tensor({S, D}, DType::f32);
  return c;
}

TEST(CallSizes, CountsOfARealProblemAreExact) {
  const AttentionCall c = call(512, 384, 8);
  EXPECT_EQ(weight_count(c), 512 * 384);
  // run_case keeps weights, scores and logits, float64 and float32 copies: 36 bytes a weight.
  EXPECT_GE(reference_bytes(c, false), 36 * 512 * 384);
  EXPECT_LT(reference_bytes(c, false), 37 * 512 * 384);
}

TEST(CallSizes, CountsPastInt64Saturate) {
  const int64_t n = int64_t{1} << 32;  // [2^32, 0]: no bytes
  const AttentionCall c = call(n, n, 0);
  EXPECT_EQ(weight_count(c), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(reference_bytes(c, false), kMaxBytes);
  EXPECT_EQ(reference_bytes(c, true), kMaxBytes);
}

}  // namespace
}  // namespace qkv::explain
