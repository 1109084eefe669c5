// qkv::attention_bytes and attention_backward_bytes: what a call allocates, known before it runs
// (the estimate `qkv attend --memory-limit` and Python's memory_limit compare with a limit). The
// L×S matrices cost what their allocations are — float64, and once more float32 for float32
// inputs — only where asked; the fused path stays linear in the lengths; a broadcast view of more
// elements than any memory saturates instead of overflowing. (python/tests/test_attention.py
// compares the estimate with a call's measured peak.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qkv/attention.h"
#include "qkv/memory.h"

namespace qkv {
namespace {

using ::testing::HasSubstr;

constexpr int64_t L = 1024, S = 768, D = 8;

struct Inputs {
  Tensor q, k, v;
};

Inputs inputs(DType dtype, int64_t l = L, int64_t s = S) {
  return {Tensor({2, l, D}, dtype), Tensor({2, s, D}, dtype), Tensor({2, s, D}, dtype)};
}

TEST(AttentionBytes, EachLxSMatrixCostsItsFloat64AndItsFloat32Copy) {
  const double weights = 2.0 * L * S;  // [H = 2, L, S]
  const Inputs f32 = inputs(DType::f32), f64 = inputs(DType::f64);
  const AttentionOptions reference{.path = Path::reference};
  auto bytes = [](const Inputs& in, AttentionOptions o) {
    return static_cast<double>(attention_bytes(in.q, in.k, in.v, o));
  };
  AttentionOptions with_weights = reference;
  with_weights.need_weights = true;
  // float64 weights, converted to float32 for float32 inputs: 8 + 4 bytes a weight; float64 alone
  // for float64 inputs.
  EXPECT_EQ(bytes(f32, with_weights) - bytes(f32, reference), 12 * weights);
  EXPECT_EQ(bytes(f64, with_weights) - bytes(f64, reference), 8 * weights);
  // Scores and logits: two more such matrices.
  AttentionOptions with_scores = with_weights;
  with_scores.need_scores = true;
  EXPECT_EQ(bytes(f32, with_scores) - bytes(f32, with_weights), 24 * weights);
  // Any mask becomes one float64 bias [H, L, S].
  AttentionOptions causal = with_scores;
  causal.causal = Causal::top_left;
  EXPECT_EQ(bytes(f32, causal) - bytes(f32, with_scores), 8 * weights);
  // All of them, as run_case keeps them (`qkv attend --weights`): 36 bytes a weight, 44 with a
  // mask (explain::reference_bytes' measured figures), beside what grows with L + S alone.
  EXPECT_GE(bytes(f32, with_scores), 36 * weights);
  EXPECT_LT(bytes(f32, with_scores), 37 * weights);
}

TEST(AttentionBytes, TheFusedPathGrowsLinearlyWithTheLengths) {
  const Inputs small = inputs(DType::f32, 1024, 1024), large = inputs(DType::f32, 4096, 4096);
  ASSERT_EQ(chosen_path(small.q, small.k, small.v, {}), Path::fused);
  const double a = static_cast<double>(attention_bytes(small.q, small.k, small.v, {}));
  const double b = static_cast<double>(attention_bytes(large.q, large.k, large.v, {}));
  // Four times the lengths: at most four times the bytes (the tiles do not grow at all), where
  // the 16 times more weights would cost 12 bytes each on the reference path.
  EXPECT_LE(b, 4 * a);
  EXPECT_LT(b - a, 12.0 * 2 * 4096 * 4096 / 16);
  // Its backward likewise.
  const double c = static_cast<double>(attention_backward_bytes(small.q, small.k, small.v, {}));
  const double d = static_cast<double>(attention_backward_bytes(large.q, large.k, large.v, {}));
  EXPECT_LE(d, 4 * c);
}

TEST(AttentionBytes, TheReferenceBackwardCountsItsCopiesGradientsAndMasks) {
  const Inputs f64 = inputs(DType::f64), f32 = inputs(DType::f32);
  const double weights = 2.0 * L * S, elements = 2.0 * (L + 2 * S) * D;
  const AttentionOptions plain{.path = Path::reference}, masked{.causal = Causal::top_left};
  auto bytes = [](const Inputs& in, const AttentionOptions& o) {
    return static_cast<double>(attention_backward_bytes(in.q, in.k, in.v, o));
  };
  // float64 contiguous inputs are read in place, float32 ones copied to float64 (8 bytes an
  // element), and their gradients converted back to float32 (4 more).
  EXPECT_EQ(bytes(f32, plain) - bytes(f64, plain), 12 * elements);
  EXPECT_GE(bytes(f64, plain), 8 * elements);  // the float64 gradients themselves
  EXPECT_EQ(bytes(f64, masked) - bytes(f64, plain), 8 * weights);  // the masks' float64 bias
}

TEST(AttentionBytes, ABroadcastViewOfMoreThanAnyMemorySaturates) {
  // [1, 2^20, 2^20, 1] read through stride 0: one element in memory, 2^60 weights on the
  // reference path (12 bytes each: past int64, which the products must not overflow).
  static float one = 1;
  const Shape shape{1, int64_t{1} << 20, int64_t{1} << 20, 1}, strides{0, 0, 0, 0};
  const Tensor q = Tensor::borrow(&one, shape, strides, DType::f32, nullptr);
  AttentionOptions o;
  o.need_weights = true;
  EXPECT_EQ(attention_bytes(q, q, q, o), kMaxBytes);
  EXPECT_EQ(attention_backward_bytes(q, q, q, {.score = Score::cosine, .causal = Causal::top_left}),
            kMaxBytes);  // the masks' float64 bias, 2^60 entries
  // The fused path keeps nothing L×S: its count (K and V packed, 2^40 elements each) is finite.
  EXPECT_LT(attention_bytes(q, q, q, {}), kMaxBytes);
}

TEST(AttentionBytes, AnInvalidProblemIsTheErrorAttentionWouldRaise) {
  const Inputs in = inputs(DType::f32);
  const Tensor k({2, S, D + 1}, DType::f32);
  EXPECT_THROW(
      {
        try {
          (void)attention_bytes(in.q, k, in.v);
        } catch (const Error& e) {
          EXPECT_THAT(e.what(), HasSubstr("expected head dim 8"));
          throw;
        }
      },
      Error);
}

}  // namespace
}  // namespace qkv
