// attention_backward given the forward's result (keep_for_backward): the fused backward skips the
// forward and gives the very same bits as the backward that runs it again; without a saved
// softmax it falls back; a forward of other inputs is refused by shape.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "qkv/attention.h"
#include "simd_targets.h"

namespace qkv {
namespace {

using ::testing::HasSubstr;

Tensor normal(Shape shape, std::mt19937_64& rng) {
  Tensor t(std::move(shape), DType::f32);
  std::normal_distribution<float> n;
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(rng);
  return t;
}

void expect_same_bits(const Tensor& a, const Tensor& b, const char* what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  EXPECT_EQ(std::memcmp(a.data<float>(), b.data<float>(), a.numel() * sizeof(float)), 0) << what;
}

// On every SIMD target the kernels were compiled for (tests/simd_targets.h).
QKV_PER_SIMD_TARGET(SavedForwardSimd);

TEST_P(SavedForwardSimd, TheBackwardFromTheForwardsSoftmaxIsBitwiseTheBackwardThatRecomputesIt) {
  std::mt19937_64 rng(11);
  // GQA, causal bottom-right, a bool mask with a fully masked row, L ≠ S, odd sizes.
  const Tensor q = normal({2, 4, 37, 24}, rng), k = normal({2, 2, 53, 24}, rng),
               v = normal({2, 2, 53, 16}, rng), dout = normal({2, 4, 37, 16}, rng);
  Tensor mask({2, 1, 37, 53}, DType::b8);
  for (int64_t i = 0; i < mask.numel(); ++i) mask.data<bool>()[i] = (i * 7919) % 5 != 0;
  for (int64_t j = 0; j < 53; ++j) mask.data<bool>()[3 * 53 + j] = false;
  AttentionOptions o{.causal = Causal::bottom_right, .mask = mask};
  ASSERT_EQ(chosen_path(q, k, v, o), Path::fused);
  const AttentionGrads again = attention_backward(dout, q, k, v, o);
  o.keep_for_backward = true;
  const AttentionResult forward = attention(q, k, v, o);
  ASSERT_TRUE(forward.saved_max.defined() && forward.saved_sum.defined());
  EXPECT_EQ(forward.saved_max.shape(), (Shape{2, 4, 37}));
  const AttentionGrads saved = attention_backward(dout, q, k, v, forward, o);
  expect_same_bits(saved.dq, again.dq, "dq");
  expect_same_bits(saved.dk, again.dk, "dk");
  expect_same_bits(saved.dv, again.dv, "dv");
  EXPECT_EQ(saved.dscale, again.dscale);
  // The check can fail: a forward whose saved sums are off changes the gradients.
  AttentionResult off = forward;
  off.saved_sum = forward.saved_sum.clone();
  off.saved_sum.data<float>()[5] *= 1.01f;
  const AttentionGrads wrong = attention_backward(dout, q, k, v, off, o);
  EXPECT_NE(
      std::memcmp(wrong.dq.data<float>(), again.dq.data<float>(), again.dq.numel() * sizeof(float)),
      0);
}

TEST(SavedForward, WithoutASavedSoftmaxTheForwardRunsAgain) {
  std::mt19937_64 rng(12);
  const Tensor q = normal({3, 9, 8}, rng), dout = normal({3, 9, 8}, rng);
  const AttentionResult plain = attention(q, q, q);  // keep_for_backward off
  EXPECT_FALSE(plain.saved_max.defined());
  const AttentionGrads a = attention_backward(dout, q, q, q, plain);
  const AttentionGrads b = attention_backward(dout, q, q, q);
  expect_same_bits(a.dq, b.dq, "dq");
  // float64 inputs take the reference path, which never saves one.
  const Tensor q64 = q.to(DType::f64);
  EXPECT_FALSE(attention(q64, q64, q64, {.keep_for_backward = true}).saved_max.defined());
}

TEST(SavedForward, AForwardOfOtherInputsIsRefused) {
  std::mt19937_64 rng(13);
  const Tensor q = normal({1, 2, 6, 8}, rng), other = normal({1, 2, 7, 8}, rng);
  const AttentionResult forward = attention(other, other, other, {.keep_for_backward = true});
  try {
    (void)attention_backward(normal({1, 2, 6, 8}, rng), q, q, q, forward);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("the forward's out is [1, 2, 7, 8]"));
    EXPECT_THAT(e.what(), HasSubstr("expected float32 [1, 2, 6, 8] and [1, 2, 6]"));
  }
  const AttentionResult fused = attention(q, q, q, {.keep_for_backward = true});
  EXPECT_THROW((void)attention_backward(normal({1, 2, 6, 8}, rng), q, q, q, fused,
                                        {.path = Path::reference}),
               Error);
}

}  // namespace
}  // namespace qkv
