// attention_backward given the forward's result (keep_for_backward): the fused backward skips the
// forward and gives the very same bits as the backward that runs it again; without a saved
// softmax it falls back; a forward of other inputs or options is refused by its fingerprint.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <utility>

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

std::string backward_error(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                           const AttentionResult& forward, const AttentionOptions& o = {}) {
  try {
    (void)attention_backward(dout, q, k, v, forward, o);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    return e.what();
  }
  return "no error";
}

TEST(SavedForward, AForwardOfOtherInputsIsRefused) {
  std::mt19937_64 rng(13);
  const Tensor q = normal({1, 2, 6, 8}, rng), other = normal({1, 2, 7, 8}, rng);
  const AttentionResult forward = attention(other, other, other, {.keep_for_backward = true});
  EXPECT_EQ(backward_error(normal({1, 2, 6, 8}, rng), q, q, q, forward),
            "attention_backward: the saved forward was computed from another query: float32 "
            "[1, 2, 7, 8], not float32 [1, 2, 6, 8]; expected the forward of these very inputs "
            "and options");
  const AttentionResult fused = attention(q, q, q, {.keep_for_backward = true});
  EXPECT_THROW((void)attention_backward(normal({1, 2, 6, 8}, rng), q, q, q, fused,
                                        {.path = Path::reference}),
               Error);
}

// Issue 26: a forward of inputs shaped alike but holding other values, or of other options, gave
// wrong gradients without a word; the fingerprint of what it was computed from refuses it.
TEST(SavedForward, AForwardOfOtherValuesOrOptionsIsRefused) {
  std::mt19937_64 rng(14);
  const Tensor q = normal({2, 9, 8}, rng), k = normal({2, 11, 8}, rng), v = normal({2, 11, 4}, rng);
  const Tensor dout = normal({2, 9, 4}, rng);
  const AttentionOptions kept{.keep_for_backward = true};
  const AttentionResult forward = attention(q, k, v, kept);
  ASSERT_TRUE(forward.saved_max.defined());
  EXPECT_NO_THROW((void)attention_backward(dout, q, k, v, forward));

  Tensor k2 = k.clone();
  k2.data<float>()[17] += 0.5f;
  EXPECT_THAT(backward_error(dout, q, k2, v, forward),
              HasSubstr("computed from another key: the same float32 [2, 11, 8] but other "
                        "values; expected the forward of these very inputs and options"));
  // The same array changed in place between the forward and the backward is another input.
  Tensor v_in_place = v.clone();
  const AttentionResult of_v = attention(q, k, v_in_place, kept);
  v_in_place.data<float>()[3] = 7.0f;
  EXPECT_THAT(backward_error(dout, q, k, v_in_place, of_v), HasSubstr("from another value"));

  const std::pair<AttentionOptions, std::string> others[] = {
      {{.causal = Causal::top_left}, "with causal none, not top-left"},
      {{.scale = 0.5}, "with scale 0.353553, not 0.5"},
      {{.score = Score::dot}, "with score scaled-dot, not dot"},
      {{.key_lengths = {5}}, "with other key_lengths"},
      {{.mask = Tensor::full({9, 11}, 0.0f)}, "without a mask, not with one"},
      {{.precision = Precision::bf16}, "with precision fp32, not bf16"},
  };
  for (const auto& [options, why] : others)
    EXPECT_THAT(backward_error(dout, q, k, v, forward, options), HasSubstr(why)) << why;
  const AttentionResult causal =
      attention(q, k, v, {.causal = Causal::top_left, .keep_for_backward = true});
  EXPECT_THAT(backward_error(dout, q, k, v, causal, {.causal = Causal::bottom_right}),
              HasSubstr("with causal top-left, not bottom-right"));
}

// The reference path saves no softmax, but its forward is recorded too: another forward is the
// same mistake there, though the backward would not have used it.
TEST(SavedForward, TheReferencePathsForwardIsCheckedToo) {
  std::mt19937_64 rng(15);
  const Tensor q = normal({5, 4}, rng).to(DType::f64), k = normal({6, 4}, rng).to(DType::f64);
  const Tensor dout = normal({5, 4}, rng).to(DType::f64);
  const AttentionResult forward =
      attention(q, k, k, {.score = Score::laplace, .keep_for_backward = true});
  EXPECT_FALSE(forward.saved_max.defined());
  EXPECT_NO_THROW((void)attention_backward(dout, q, k, k, forward, {.score = Score::laplace}));
  EXPECT_THAT(backward_error(dout, q, k, k, forward, {.score = Score::cosine}),
              HasSubstr("with score laplace, not cosine"));
  EXPECT_THAT(backward_error(dout, q, k, k, forward,
                             {.score = Score::laplace, .normalize = Normalize::none}),
              HasSubstr("with normalize softmax, not none"));
}

TEST(SavedForward, ASavedSoftmaxWithoutAFingerprintIsRefused) {
  std::mt19937_64 rng(16);
  const Tensor q = normal({3, 5, 8}, rng);
  AttentionResult forward = attention(q, q, q, {.keep_for_backward = true});
  forward.fingerprint = {};
  EXPECT_THAT(backward_error(normal({3, 5, 8}, rng), q, q, q, forward),
              HasSubstr("the forward's saved softmax has no fingerprint of its inputs"));
}

TEST(SavedForward, TheHashReadsValuesInRowMajorOrderWhateverTheStrides) {
  std::mt19937_64 rng(17);
  const Tensor a = normal({3, 4, 5}, rng);
  const Tensor t = a.transpose(0, 2);  // [5, 4, 3], strided
  EXPECT_EQ(tensor_values_hash(t), tensor_values_hash(t.contiguous()));
  EXPECT_NE(tensor_values_hash(t), tensor_values_hash(a));  // other shape, other order
  Tensor b = a.clone();
  EXPECT_EQ(tensor_values_hash(b), tensor_values_hash(a));
  b.data<float>()[59] = -b.data<float>()[59];  // the last element's sign bit
  EXPECT_NE(tensor_values_hash(b), tensor_values_hash(a));
  Tensor swapped = a.clone();  // two elements traded places: the hash sees the order
  std::swap(swapped.data<float>()[0], swapped.data<float>()[1]);
  EXPECT_NE(tensor_values_hash(swapped), tensor_values_hash(a));
  EXPECT_NE(tensor_values_hash(a), tensor_values_hash(a.to(DType::f64)));
  EXPECT_EQ(tensor_values_hash(Tensor()), 0u);
  // A view and its copy pass as the same forward input.
  const Tensor dout = normal({5, 4, 3}, rng);
  const AttentionResult forward = attention(t, t, t, {.keep_for_backward = true});
  EXPECT_NO_THROW((void)attention_backward(dout, t.contiguous(), t, t, forward));
}

}  // namespace
}  // namespace qkv
