// nn::MultiHeadAttention: every gradient (input, memory, each parameter) against float64 finite
// differences, over self- and cross-attention, padding, causal masks, GQA, tied Q/K, identity V,
// the learned scores and attention dropout; the output against a hand-written loop; float32
// (fused kernel) against float64 (reference).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "nn/compare.h"
#include "nn/gradcheck.h"
#include "qkv/nn.h"

namespace qkv::nn {
namespace {

using test::dot_loss;
using test::gradient_error;
using test::max_abs_diff;  // +∞ when the shapes differ
using test::random_f64;

Tensor plus(const Tensor& a, const Tensor& b) {
  Tensor s = a.clone();
  for (int64_t i = 0; i < s.numel(); ++i) s.data<double>()[i] += b.value(i);
  return s;
}

// One gradient-check case: a float64 layer, inputs from fixed seeds, L = Σ r ⊙ layer(x, memory).
struct Case {
  MultiHeadAttentionOptions options;
  Shape x_shape{2, 3, 8};
  Shape memory_shape;  // empty: self-attention (memory is x itself)
  std::vector<int64_t> key_lengths;
  Causal causal = Causal::none;
  bool training = false;
  uint64_t seed = 1;
};

struct Errors {
  double input = 0;   // dx (+ dmemory for self-attention), dmemory
  double params = 0;  // the worst over every parameter
};

// Runs forward and backward once, then compares each gradient with central differences. With
// training (dropout), every forward draws its mask from an Rng seeded the same way, so the mask is
// held fixed while the inputs move.
Errors check(const Case& c, double perturb_dx = 0) {
  Rng init(c.seed);
  MultiHeadAttention layer("mha", c.options, init, DType::f64);
  Tensor x = random_f64(c.x_shape, c.seed + 1);
  const bool self = c.memory_shape.empty();
  Tensor memory = self ? x : random_f64(c.memory_shape, c.seed + 2);
  auto run = [&] {
    Rng drop(c.seed + 3);
    return layer.forward(x, memory, c.key_lengths, c.causal, c.training, drop);
  };
  const Tensor y = run();
  const Tensor r = random_f64(y.shape(), c.seed + 4);
  const MultiHeadAttention::Grads g = layer.backward(r);
  auto loss = [&] { return dot_loss(r, run()); };
  Errors e;
  Tensor dx = self ? plus(g.dx, g.dmemory) : g.dx.clone();
  dx.data<double>()[0] += perturb_dx;
  e.input = gradient_error(x, dx, loss);
  if (!self) e.input = std::max(e.input, gradient_error(memory, g.dmemory, loss));
  for (Parameter* p : layer.parameters())
    e.params = std::max(e.params, gradient_error(p->value, p->grad, loss));
  return e;
}

void expect_gradients_match(const Case& c) {
  const Errors e = check(c);
  EXPECT_LE(e.input, test::kGradTolerance);
  EXPECT_LE(e.params, test::kGradTolerance);
  // The same check rejects an input gradient one entry of which is off by 1e-3.
  EXPECT_GT(check(c, 1e-3).input, 1e-4);
}

MultiHeadAttentionOptions small(int64_t d_model = 8, int64_t heads = 2) {
  return {.d_model = d_model, .heads = heads};
}

TEST(MultiHeadAttention, SelfAttentionGradients) { expect_gradients_match({.options = small()}); }

TEST(MultiHeadAttention, SelfAttentionWithoutBiasGradients) {
  MultiHeadAttentionOptions o = small();
  o.bias = false;
  expect_gradients_match({.options = o});
}

TEST(MultiHeadAttention, CrossAttentionGradients) {
  MultiHeadAttentionOptions o = small();
  o.kdim = 5;  // memory of another width, and S ≠ L
  expect_gradients_match({.options = o, .x_shape = {2, 3, 8}, .memory_shape = {2, 4, 5}});
}

TEST(MultiHeadAttention, KeyLengthsGradients) {
  SCOPED_TRACE("self-attention, lengths {3, 1}");
  expect_gradients_match({.options = small(), .key_lengths = {3, 1}});
  SCOPED_TRACE("cross-attention, lengths {2, 0, 4}: a batch with nothing to attend to");
  MultiHeadAttentionOptions o = small();
  o.kdim = 5;
  expect_gradients_match(
      {.options = o, .x_shape = {3, 2, 8}, .memory_shape = {3, 4, 5}, .key_lengths = {2, 0, 4}});
}

TEST(MultiHeadAttention, PaddedKeysGetNoGradient) {
  Rng init(3);
  MultiHeadAttentionOptions o = small();
  o.kdim = 5;
  MultiHeadAttention layer("mha", o, init, DType::f64);
  const Tensor x = random_f64({2, 3, 8}, 4), memory = random_f64({2, 4, 5}, 5);
  layer.forward(x, memory, {2, 4}, Causal::none, false, init);
  const Tensor dm = layer.backward(random_f64({2, 3, 8}, 6)).dmemory;
  for (int64_t s = 2; s < 4; ++s)
    for (int64_t c = 0; c < 5; ++c) EXPECT_EQ(dm.at<double>(0, s, c), 0.0);
  EXPECT_NE(dm.at<double>(1, 3, 0), 0.0);
}

TEST(MultiHeadAttention, CausalGradients) {
  SCOPED_TRACE("self-attention, top-left");
  expect_gradients_match({.options = small(), .causal = Causal::top_left});
  MultiHeadAttentionOptions o = small();
  o.kdim = 6;
  for (Causal causal : {Causal::top_left, Causal::bottom_right}) {
    SCOPED_TRACE(std::string("cross-attention L 3, S 5, ") + std::string(to_string(causal)));
    expect_gradients_match({.options = o,
                            .x_shape = {2, 3, 8},
                            .memory_shape = {2, 5, 6},
                            .key_lengths = {5, 4},
                            .causal = causal});
  }
}

TEST(MultiHeadAttention, GroupedQueryGradients) {
  MultiHeadAttentionOptions o = small(8, 4);
  o.kv_heads = 2;
  Rng init(1);
  MultiHeadAttention layer("mha", o, init, DType::f64);
  EXPECT_EQ(layer.k->weight.value.shape(), (Shape{4, 8}));  // kv_heads · d_k rows
  EXPECT_EQ(layer.v->weight.value.shape(), (Shape{4, 8}));
  expect_gradients_match({.options = o, .key_lengths = {2, 3}});
  o.kv_heads = 1;  // multi-query
  expect_gradients_match({.options = o, .causal = Causal::top_left});
}

TEST(MultiHeadAttention, TiedQueryKeyGradients) {
  MultiHeadAttentionOptions o = small();
  o.tie_qk = true;
  expect_gradients_match({.options = o});
  expect_gradients_match({.options = o, .x_shape = {2, 3, 8}, .memory_shape = {2, 4, 8}});
}

// With W_K = W_Q and x = memory, each head's logits s_ij = scale·q_i·q_j are symmetric. The
// weights show it without the logits: log P_ij − log P_ji = lse_j − lse_i, so
// D_ij = log P_ij − log P_ji must equal D_i0 − D_j0. An untied layer breaks this.
double symmetry_defect(bool tie) {
  MultiHeadAttentionOptions o = small();
  o.tie_qk = tie;
  Rng init(7);
  MultiHeadAttention layer("mha", o, init, DType::f64);
  const Tensor x = random_f64({1, 4, 8}, 8);
  layer.forward(x, x, {}, Causal::none, false, init, true);
  const Tensor& p = layer.weights();
  EXPECT_EQ(p.shape(), (Shape{1, 2, 4, 4}));
  auto d = [&](int64_t h, int64_t i, int64_t j) {
    return std::log(p.at<double>(0, h, i, j)) - std::log(p.at<double>(0, h, j, i));
  };
  double worst = 0;
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 4; ++j)
        worst = std::max(worst, std::abs(d(h, i, j) - (d(h, i, 0) - d(h, j, 0))));
  return worst;
}

TEST(MultiHeadAttention, TiedQueryKeyScoresAreSymmetric) {
  Rng init(1);
  MultiHeadAttentionOptions o = small();
  o.tie_qk = true;
  MultiHeadAttention layer("mha", o, init, DType::f64);
  EXPECT_EQ(layer.k, nullptr);
  EXPECT_LE(symmetry_defect(true), 1e-12);
  EXPECT_GT(symmetry_defect(false), 1e-2);
}

TEST(MultiHeadAttention, IdentityValueGradients) {
  MultiHeadAttentionOptions o = small();
  o.identity_v = true;
  Rng init(1);
  MultiHeadAttention layer("mha", o, init, DType::f64);
  EXPECT_EQ(layer.v, nullptr);
  EXPECT_EQ(layer.o, nullptr);
  EXPECT_EQ(layer.parameters().size(), 4u);  // q and k, weight and bias
  expect_gradients_match({.options = o, .key_lengths = {3, 2}});
  expect_gradients_match({.options = o, .x_shape = {2, 3, 8}, .memory_shape = {2, 5, 8}});
}

// Each head's output is a convex combination of the memory's own rows: with one key visible it
// is exactly that row.
TEST(MultiHeadAttention, IdentityValueCopiesTheVisibleMemoryRow) {
  MultiHeadAttentionOptions o = small();
  o.identity_v = true;
  Rng init(1);
  MultiHeadAttention layer("mha", o, init, DType::f64);
  const Tensor x = random_f64({1, 2, 8}, 2), memory = random_f64({1, 3, 8}, 3);
  const Tensor y = layer.forward(x, memory, {1}, Causal::none, false, init);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t c = 0; c < 8; ++c)
      EXPECT_DOUBLE_EQ(y.at<double>(0, i, c), memory.at<double>(0, 0, c));
}

TEST(MultiHeadAttention, LearnedScoreGradients) {
  for (Score score : {Score::general, Score::additive}) {
    SCOPED_TRACE(std::string(to_string(score)));
    MultiHeadAttentionOptions o = small();
    o.score = score;
    Rng init(1);
    MultiHeadAttention layer("mha", o, init, DType::f64);
    const std::vector<Parameter*> params = layer.parameters();
    ASSERT_EQ(params.size(), score == Score::general ? 9u : 11u);
    EXPECT_EQ(params[8]->name, score == Score::general ? "mha.score.w" : "mha.score.w_q");
    expect_gradients_match({.options = o, .key_lengths = {3, 2}});
    o.kdim = 5;
    expect_gradients_match({.options = o,
                            .x_shape = {2, 3, 8},
                            .memory_shape = {2, 4, 5},
                            .causal = Causal::top_left});
  }
}

TEST(MultiHeadAttention, ScoreParameterGradientIsChecked) {
  // A wrong gradient of the score's own W is caught like any other.
  MultiHeadAttentionOptions o = small();
  o.score = Score::general;
  Rng init(1);
  MultiHeadAttention layer("mha", o, init, DType::f64);
  Tensor x = random_f64({2, 3, 8}, 2);
  const Tensor r = random_f64({2, 3, 8}, 3);
  layer.forward(x, x, {}, Causal::none, false, init);
  layer.backward(r);
  Parameter& w = layer.extra[0];
  auto loss = [&] { return dot_loss(r, layer.forward(x, x, {}, Causal::none, false, init)); };
  EXPECT_LE(gradient_error(w.value, w.grad, loss), test::kGradTolerance);
  w.grad.data<double>()[3] *= 1.01;
  EXPECT_GT(gradient_error(w.value, w.grad, loss), 1e-5);
}

TEST(MultiHeadAttention, LaplaceAndCosineScoreGradients) {
  for (Score score : {Score::laplace, Score::cosine, Score::dot}) {
    SCOPED_TRACE(std::string(to_string(score)));
    MultiHeadAttentionOptions o = small();
    o.score = score;
    expect_gradients_match({.options = o, .key_lengths = {3, 2}});
  }
}

TEST(MultiHeadAttention, AttentionDropoutGradients) {
  MultiHeadAttentionOptions o = small();
  o.dropout = 0.3;
  SCOPED_TRACE("self-attention, padded");
  expect_gradients_match({.options = o, .key_lengths = {3, 2}, .training = true});
  SCOPED_TRACE("cross-attention, causal, dot score");
  o.kdim = 5;
  o.score = Score::dot;
  expect_gradients_match({.options = o,
                          .x_shape = {2, 3, 8},
                          .memory_shape = {2, 4, 5},
                          .causal = Causal::top_left,
                          .training = true});
  SCOPED_TRACE("grouped-query, 4 heads on 2");
  MultiHeadAttentionOptions g = small(8, 4);
  g.kv_heads = 2;
  g.dropout = 0.5;
  expect_gradients_match({.options = g, .x_shape = {2, 4, 8}, .training = true});
}

TEST(MultiHeadAttention, AttentionDropoutDropsWhileTrainingOnly) {
  MultiHeadAttentionOptions o = small();
  o.dropout = 0.5;
  Rng init(1);
  MultiHeadAttention layer("mha", o, init, DType::f64);
  MultiHeadAttentionOptions plain = small();
  Rng init2(1);
  MultiHeadAttention reference("mha", plain, init2, DType::f64);
  const Tensor x = random_f64({2, 5, 8}, 2);
  Rng a(9), b(9);
  const Tensor eval = layer.forward(x, x, {}, Causal::none, false, a);
  const Tensor ref = reference.forward(x, x, {}, Causal::none, false, b);
  for (int64_t i = 0; i < eval.numel(); ++i) EXPECT_DOUBLE_EQ(eval.value(i), ref.value(i));
  Rng c(9);
  const Tensor train = layer.forward(x, x, {}, Causal::none, true, c, true);
  double diff = 0;
  for (int64_t i = 0; i < eval.numel(); ++i) diff += std::abs(train.value(i) - eval.value(i));
  EXPECT_GT(diff, 1e-3);
  // weights() are the softmax weights before dropout: rows sum to 1.
  const Tensor& w = layer.weights();
  for (int64_t row = 0; row < w.numel() / 5; ++row) {
    double sum = 0;
    for (int64_t j = 0; j < 5; ++j) sum += w.value(row * 5 + j);
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
}

TEST(MultiHeadAttention, AttentionDropoutNeedsADotProductScore) {
  Rng init(1);
  MultiHeadAttentionOptions o = small();
  o.dropout = 0.1;
  o.score = Score::additive;
  EXPECT_THROW(MultiHeadAttention("mha", o, init), Error);
}

// softmax(Q Kᵀ/√d) V W_Oᵀ + b_O with one head, by loops over the layer's own weights.
TEST(MultiHeadAttention, MatchesHandWrittenAttention) {
  MultiHeadAttentionOptions o = {.d_model = 3, .heads = 1, .kdim = 2};
  Rng init(11);
  MultiHeadAttention layer("mha", o, init, DType::f64);
  const int64_t L = 2, S = 3, d = 3, kd = 2;
  const Tensor x = random_f64({1, L, d}, 12), m = random_f64({1, S, kd}, 13);
  const Tensor y = layer.forward(x, m, {}, Causal::none, false, init);

  auto project = [](const Linear& lin, const Tensor& in, int64_t row) {
    std::vector<double> out(lin.out());
    for (int64_t r = 0; r < lin.out(); ++r) {
      out[r] = lin.bias.value.value(r);
      for (int64_t c = 0; c < lin.in(); ++c)
        out[r] += lin.weight.value.at<double>(r, c) * in.at<double>(0, row, c);
    }
    return out;
  };
  for (int64_t i = 0; i < L; ++i) {
    const std::vector<double> qi = project(*layer.q, x, i);
    std::vector<double> logits(S), attended(d, 0.0);
    double max_logit = -std::numeric_limits<double>::infinity(), z = 0;
    for (int64_t j = 0; j < S; ++j) {
      const std::vector<double> kj = project(*layer.k, m, j);
      logits[j] = 0;
      for (int64_t c = 0; c < d; ++c) logits[j] += qi[c] * kj[c] / std::sqrt(3.0);
      max_logit = std::max(max_logit, logits[j]);
    }
    for (int64_t j = 0; j < S; ++j) z += std::exp(logits[j] - max_logit);
    for (int64_t j = 0; j < S; ++j) {
      const std::vector<double> vj = project(*layer.v, m, j);
      for (int64_t c = 0; c < d; ++c) attended[c] += std::exp(logits[j] - max_logit) / z * vj[c];
    }
    for (int64_t r = 0; r < d; ++r) {
      double expected = layer.o->bias.value.value(r);
      for (int64_t c = 0; c < d; ++c)
        expected += layer.o->weight.value.at<double>(r, c) * attended[c];
      EXPECT_NEAR(y.at<double>(0, i, r), expected, 1e-13) << "query " << i << ", feature " << r;
    }
  }
}

// The float32 layer (fused kernel; the dropout path by loops) against the float64 layer (reference
// kernel) built from the same seed. Values and gradients are O(1) sums of ≤ 16 terms through three
// GEMMs and a softmax, so fp32's 6e-8 unit roundoff puts the gap near 1e-6. Measured worst:
// 3e-7 (outputs), 2.3e-6 (gradients); the 1e-5 bound leaves 4× for other BLAS builds.
TEST(MultiHeadAttention, Float32MatchesFloat64) {
  for (double dropout : {0.0, 0.2}) {
    SCOPED_TRACE(dropout == 0 ? "fused path" : "dropout path");
    MultiHeadAttentionOptions o = small(16, 4);
    o.kv_heads = 2;
    o.kdim = 12;
    o.dropout = dropout;
    Rng i64(5), i32(5);
    MultiHeadAttention l64("mha", o, i64, DType::f64), l32("mha", o, i32, DType::f32);
    const Tensor x = random_f64({3, 5, 16}, 6), m = random_f64({3, 7, 12}, 7);
    const Tensor dy = random_f64({3, 5, 16}, 8);
    const std::vector<int64_t> lengths{7, 3, 5};
    Rng d64(9), d32(9);
    const Tensor y64 = l64.forward(x, m, lengths, Causal::bottom_right, true, d64);
    const Tensor y32 =
        l32.forward(x.to(DType::f32), m.to(DType::f32), lengths, Causal::bottom_right, true, d32);
    const auto g64 = l64.backward(dy);
    const auto g32 = l32.backward(dy.to(DType::f32));
    const double worst_y = max_abs_diff(y32, y64);
    double worst_g = std::max(max_abs_diff(g32.dx, g64.dx), max_abs_diff(g32.dmemory, g64.dmemory));
    const auto p64 = l64.parameters(), p32 = l32.parameters();
    ASSERT_EQ(p64.size(), p32.size());
    for (size_t p = 0; p < p64.size(); ++p)
      worst_g = std::max(worst_g, max_abs_diff(p32[p]->grad, p64[p]->grad));
    EXPECT_LE(worst_y, 1e-5);
    EXPECT_LE(worst_g, 1e-5);
    EXPECT_GT(worst_y, 0.0);  // the two really ran different precisions
  }
}

TEST(MultiHeadAttention, ParametersInOrderWithNames) {
  MultiHeadAttentionOptions o = small();
  o.kdim = 5;
  Rng init(1);
  MultiHeadAttention layer("enc.0.attention", o, init);
  std::vector<std::string> names;
  for (Parameter* p : layer.parameters()) names.push_back(p->name);
  const std::vector<std::string> expected{"enc.0.attention.q.weight", "enc.0.attention.q.bias",
                                          "enc.0.attention.k.weight", "enc.0.attention.k.bias",
                                          "enc.0.attention.v.weight", "enc.0.attention.v.bias",
                                          "enc.0.attention.o.weight", "enc.0.attention.o.bias"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(layer.k->weight.value.shape(), (Shape{8, 5}));
  EXPECT_EQ(layer.parameter_count(), 4 * 8 + 8 * 8 * 2 + 8 * 5 * 2);
  EXPECT_EQ(layer.options().kv_heads, 2);  // resolved defaults
  EXPECT_EQ(layer.options().kdim, 5);
}

TEST(MultiHeadAttention, WeightsOnRequest) {
  Rng init(1);
  MultiHeadAttention layer("mha", small(), init, DType::f32);
  const Tensor x = random_f64({2, 3, 8}, 2).to(DType::f32);
  layer.forward(x, x, {3, 1}, Causal::top_left, false, init, true);
  const Tensor& w = layer.weights();
  ASSERT_EQ(w.shape(), (Shape{2, 2, 3, 3}));
  EXPECT_EQ(w.at<float>(1, 0, 2, 1), 0.0f);  // padded key
  EXPECT_EQ(w.at<float>(0, 1, 0, 1), 0.0f);  // causal
  EXPECT_FLOAT_EQ(w.at<float>(1, 1, 2, 0), 1.0f);
  layer.forward(x, x, {}, Causal::none, false, init);
  EXPECT_FALSE(layer.weights().defined());
}

TEST(MultiHeadAttention, ErrorsNameWhatIsWrong) {
  Rng init(1);
  MultiHeadAttentionOptions bad = small();
  bad.heads = 3;
  EXPECT_THROW(MultiHeadAttention("mha", bad, init), Error);
  bad = small(8, 4);
  bad.kv_heads = 3;
  EXPECT_THROW(MultiHeadAttention("mha", bad, init), Error);
  bad = small();
  bad.kdim = 5;
  bad.tie_qk = true;
  EXPECT_THROW(MultiHeadAttention("mha", bad, init), Error);

  MultiHeadAttention layer("mha", small(), init, DType::f64);
  EXPECT_THROW(layer.backward(random_f64({2, 3, 8}, 1)), Error);  // no forward yet
  const Tensor x = random_f64({2, 3, 8}, 1);
  try {
    layer.forward(x, random_f64({2, 4, 6}, 2), {}, Causal::none, false, init);
    ADD_FAILURE() << "memory of the wrong width was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 4, 6]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(layer.forward(x.to(DType::f32), x.to(DType::f32), {}, Causal::none, false, init),
               Error);
  EXPECT_THROW(layer.forward(x, x, {3}, Causal::none, false, init), Error);
  layer.forward(x, x, {}, Causal::none, false, init);
  EXPECT_THROW(layer.backward(random_f64({2, 3, 7}, 1)), Error);
}

}  // namespace
}  // namespace qkv::nn
