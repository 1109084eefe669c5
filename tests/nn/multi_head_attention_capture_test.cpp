// nn::MultiHeadAttention's capture: nothing kept when it is off; when on, q, k, v, scores,
// logits, weights and head_out of the shapes nn.h promises, in the layer's dtype, consistent with
// the formulas for every score kind (recomputed from the captured tensors), masked where the
// mask says; the layer's output unchanged; and the checks themselves able to fail.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "nn/attention_capture_check.h"
#include "nn/compare.h"
#include "nn/gradcheck.h"
#include "qkv/nn.h"

namespace qkv::nn {
namespace {

using test::capture_tolerance;
using test::head_out_error;
using test::logit_error;
using test::random_f64;
using test::softmax_error;

// Cross-attention with grouped-query heads: B 2, L 3, S 5, d_model 16 (4 heads of 4, 2 kv
// heads), memory width 12; the second sequence sees only its first 2 keys.
struct Cross {
  MultiHeadAttentionOptions options{.d_model = 16, .heads = 4, .kv_heads = 2, .kdim = 12};
  std::vector<int64_t> key_lengths{5, 2};
  DType dtype = DType::f32;
  uint64_t seed = 1;
};

AttentionCapture run_cross(const Cross& c, Tensor* out = nullptr) {
  Rng init(c.seed), rng(0);
  MultiHeadAttention layer("cross", c.options, init, c.dtype);
  const Tensor x = random_f64({2, 3, 16}, c.seed + 1).to(c.dtype);
  const Tensor memory = random_f64({2, 5, 12}, c.seed + 2).to(c.dtype);
  AttentionCapture capture;
  layer.capture = &capture;
  const Tensor y = layer.forward(x, memory, c.key_lengths, Causal::none, false, rng);
  if (out != nullptr) *out = y;
  return capture;
}

std::string repro(const MultiHeadAttentionOptions& o, DType dtype) {
  return "score " + std::string(to_string(o.score)) + ", heads " + std::to_string(o.heads) +
         ", kv_heads " + std::to_string(o.kv_heads) + ", " + std::string(dtype_name(dtype));
}

TEST(MultiHeadAttentionCapture, KeepsNothingWhenOff) {
  Rng init(1), rng(0);
  MultiHeadAttention layer("mha", {.d_model = 8, .heads = 2}, init);
  const Tensor x = random_f64({1, 3, 8}, 2).to(DType::f32);
  EXPECT_EQ(layer.capture, nullptr);  // off by default
  layer.forward(x, x, {}, Causal::none, false, rng);

  // On for one forward, then off: the next forward leaves the old capture as it was.
  AttentionCapture capture;
  layer.capture = &capture;
  layer.forward(x, x, {}, Causal::none, false, rng);
  ASSERT_TRUE(capture.weights.defined());
  const Tensor kept = capture.weights.clone();
  layer.capture = nullptr;
  const Tensor x2 = random_f64({1, 4, 8}, 3).to(DType::f32);
  const Tensor y1 = layer.forward(x2, x2, {}, Causal::none, false, rng);
  EXPECT_EQ(capture.weights.shape(), (Shape{1, 2, 3, 3}));
  EXPECT_EQ(test::max_abs_diff(capture.weights, kept), 0.0);
  EXPECT_EQ(y1.shape(), (Shape{1, 4, 8}));
  EXPECT_FALSE(layer.weights().defined());  // need_weights was never asked for
}

TEST(MultiHeadAttentionCapture, ShapesDtypeAndScaleFollowTheLayer) {
  for (const DType dtype : {DType::f32, DType::f64}) {
    Cross c;
    c.dtype = dtype;
    const AttentionCapture a = run_cross(c);
    SCOPED_TRACE(repro(c.options, dtype));
    EXPECT_EQ(a.q.shape(), (Shape{2, 4, 3, 4}));
    EXPECT_EQ(a.k.shape(), (Shape{2, 2, 5, 4}));
    EXPECT_EQ(a.v.shape(), (Shape{2, 2, 5, 4}));
    for (const Tensor* t : {&a.scores, &a.logits, &a.weights})
      EXPECT_EQ(t->shape(), (Shape{2, 4, 3, 5}));
    EXPECT_EQ(a.head_out.shape(), (Shape{2, 4, 3, 4}));
    for (const Tensor* t : {&a.q, &a.k, &a.v, &a.scores, &a.logits, &a.weights, &a.head_out})
      EXPECT_EQ(t->dtype(), dtype);
    EXPECT_DOUBLE_EQ(a.scale, 0.5);  // 1/√4
  }
}

// Padding: the second sequence's keys 2, 3, 4 have logit −∞ and weight 0; every row sums to 1.
TEST(MultiHeadAttentionCapture, PaddedKeysAreMinusInfinityAndRowsSumToOne) {
  const AttentionCapture a = run_cross({});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t i = 0; i < 3; ++i) {
        double sum = 0;
        for (int64_t j = 0; j < 5; ++j) {
          const bool masked = b == 1 && j >= 2;
          const float z = a.logits.at<float>(b, h, i, j), w = a.weights.at<float>(b, h, i, j);
          EXPECT_EQ(z == -INFINITY, masked) << "b " << b << " h " << h << " i " << i << " j " << j;
          if (masked) EXPECT_EQ(w, 0.0f);
          sum += w;
        }
        EXPECT_NEAR(sum, 1.0, 1e-6) << "b " << b << " h " << h << " i " << i;
      }
}

// Causal self-attention: above the diagonal the logit is −∞ and the weight exactly 0.
TEST(MultiHeadAttentionCapture, CausalWeightsAreZeroAboveTheDiagonal) {
  Rng init(4), rng(0);
  MultiHeadAttention layer("self", {.d_model = 8, .heads = 2}, init);
  const Tensor x = random_f64({1, 5, 8}, 5).to(DType::f32);
  AttentionCapture a;
  layer.capture = &a;
  layer.forward(x, x, {}, Causal::top_left, false, rng);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 5; ++j) {
        EXPECT_EQ(a.logits.at<float>(0, h, i, j) == -INFINITY, j > i) << h << " " << i << " " << j;
        if (j > i) EXPECT_EQ(a.weights.at<float>(0, h, i, j), 0.0f);
      }
  EXPECT_LE(softmax_error(a), capture_tolerance(a));
}

// For every score kind and dtype: logits = scale·score(q, k) from the captured q and k (and the
// layer's own score parameters), weights = softmax(logits), head_out = weights·v.
TEST(MultiHeadAttentionCapture, LogitsWeightsAndOutputFollowFromTheCapturedQKV) {
  for (const Score score : all_scores())
    for (const DType dtype : {DType::f32, DType::f64}) {
      Cross c;
      c.options.score = score;
      c.dtype = dtype;
      Rng init(c.seed), rng(0);
      MultiHeadAttention layer("cross", c.options, init, dtype);
      const Tensor x = random_f64({2, 3, 16}, 2).to(dtype);
      const Tensor memory = random_f64({2, 5, 12}, 3).to(dtype);
      AttentionCapture a;
      layer.capture = &a;
      layer.forward(x, memory, c.key_lengths, Causal::none, false, rng);
      SCOPED_TRACE(repro(c.options, dtype));
      const double tol = capture_tolerance(a);
      const double logit = logit_error(a, score, layer.score_params);
      const double weight = softmax_error(a);
      const double out = head_out_error(a);
      EXPECT_LE(logit, tol);
      EXPECT_LE(weight, tol);
      EXPECT_LE(out, tol);
      EXPECT_DOUBLE_EQ(a.scale, default_scale(score, 4));
    }
}

// The capture watches; it does not change the result. float64 runs the reference path either
// way (bitwise equal); float32 switches from the fused kernel to the reference, which differ by
// float32 rounding (measured ≈ 1e-7 here; 1e-5 leaves room for other seeds).
TEST(MultiHeadAttentionCapture, OutputIsTheSameWithCaptureOnOrOff) {
  for (const DType dtype : {DType::f32, DType::f64}) {
    Cross c;
    c.dtype = dtype;
    Rng init(c.seed), rng(0);
    MultiHeadAttention layer("cross", c.options, init, dtype);
    const Tensor x = random_f64({2, 3, 16}, 2).to(dtype);
    const Tensor memory = random_f64({2, 5, 12}, 3).to(dtype);
    const Tensor off = layer.forward(x, memory, c.key_lengths, Causal::none, false, rng);
    AttentionCapture a;
    layer.capture = &a;
    const Tensor on = layer.forward(x, memory, c.key_lengths, Causal::none, false, rng);
    const double diff = test::max_abs_diff(on, off);
    RecordProperty(std::string(dtype_name(dtype)) + "_on_off_diff", test::sci(diff));
    if (dtype == DType::f64)
      EXPECT_EQ(diff, 0.0);
    else
      EXPECT_LE(diff, 1e-5);
  }
}

// tie_qk: K is projected with W_Q, so in self-attention the captured k equals q. identity_v: the
// captured v is the memory itself, split into heads.
TEST(MultiHeadAttentionCapture, TiedKeysAndIdentityValuesAreWhatTheKernelReceived) {
  Rng init(6), rng(0);
  MultiHeadAttention layer("tied", {.d_model = 8, .heads = 2, .tie_qk = true, .identity_v = true},
                           init);
  const Tensor x = random_f64({1, 3, 8}, 7).to(DType::f32);
  AttentionCapture a;
  layer.capture = &a;
  layer.forward(x, x, {}, Causal::none, false, rng);
  EXPECT_EQ(test::max_abs_diff(a.k, a.q), 0.0);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t e = 0; e < 4; ++e)
        EXPECT_EQ(a.v.at<float>(0, h, j, e), x.at<float>(0, j, h * 4 + e));
}

// The checks can fail: one weight moved by 1e-4, one logit by 1e-3, one head_out entry by 1e-4
// (each far above the tolerance, ≈ 1e-6 here) is caught.
TEST(MultiHeadAttentionCapture, ChecksCatchAPerturbedCapture) {
  const AttentionCapture a = run_cross({});
  const double tol = capture_tolerance(a);
  ASSERT_LE(softmax_error(a), tol);
  ASSERT_LE(logit_error(a, Score::scaled_dot, {}), tol);
  ASSERT_LE(head_out_error(a), tol);

  AttentionCapture w = a;
  w.weights = a.weights.clone();
  w.weights.at<float>(0, 1, 2, 3) += 1e-4f;
  EXPECT_GT(softmax_error(w), tol);

  AttentionCapture z = a;
  z.logits = a.logits.clone();
  z.logits.at<float>(1, 3, 0, 1) += 1e-3f;
  EXPECT_GT(logit_error(z, Score::scaled_dot, {}), tol);

  AttentionCapture m = a;  // a masked key given weight
  m.weights = a.weights.clone();
  m.weights.at<float>(1, 0, 0, 4) = 1e-6f;
  EXPECT_EQ(softmax_error(m), INFINITY);

  AttentionCapture o = a;
  o.head_out = a.head_out.clone();
  o.head_out.at<float>(0, 0, 0, 0) += 1e-4f;
  EXPECT_GT(head_out_error(o), tol);
}

}  // namespace
}  // namespace qkv::nn
