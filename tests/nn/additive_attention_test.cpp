// nn::AdditiveAttention (Bahdanau et al. 2014's one-query-at-a-time attention with the keys'
// projection computed once): against qkv::attention with the additive score, forward and backward
// (keys = values = the memory), with padded keys; against float64 finite differences over two
// chained steps; and float32 against float64.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "nn/compare.h"
#include "nn/gradcheck.h"
#include "qkv/attention.h"
#include "qkv/nn.h"

namespace qkv::nn {
namespace {

using test::dot_loss;
using test::gradient_error;
using test::max_abs_diff;  // +∞ when the shapes differ
using test::random_f64;

constexpr int64_t kB = 3, kS = 5, kDq = 4, kDk = 6, kA = 7;
const std::vector<int64_t> kLengths = {5, 2, 4};

AttentionOptions library_options(AdditiveAttention& layer) {
  AttentionOptions o;
  o.score = Score::additive;
  o.key_lengths = kLengths;
  o.need_weights = true;
  o.params = {.w_q = layer.w_a.value, .w_k = layer.u_a.weight.value, .v = layer.v_a.value};
  return o;
}

TEST(AdditiveAttention, EqualsTheLibrarysAdditiveAttentionForwardAndBackward) {
  Rng rng(1);
  AdditiveAttention layer("att", kDq, kDk, kA, rng, DType::f64);
  const Tensor h = random_f64({kB, kS, kDk}, 2), s = random_f64({kB, kDq}, 3);
  const Tensor dc = random_f64({kB, kDk}, 4);
  layer.set_memory(h, kLengths);
  Tensor alpha;
  const Tensor c = layer.forward(s, &alpha);
  layer.zero_grad();
  const Tensor ds = layer.backward(dc);
  const Tensor dh = layer.memory_backward();

  const Tensor q4 = s.reshape({kB, 1, 1, kDq}), h4 = h.reshape({kB, 1, kS, kDk});
  const AttentionOptions o = library_options(layer);
  const AttentionResult r = attention(q4, h4, h4, o);
  EXPECT_LE(max_abs_diff(c, r.out.reshape(c.shape())), 1e-13);
  EXPECT_LE(max_abs_diff(alpha, r.weights.reshape(alpha.shape())), 1e-13);
  EXPECT_EQ(alpha.at<double>(1, 3), 0.0);  // a padded key gets no weight
  const AttentionGrads g = attention_backward(dc.reshape({kB, 1, 1, kDk}), q4, h4, h4, o);
  EXPECT_LE(max_abs_diff(ds, g.dq.reshape(ds.shape())), 1e-12);
  Tensor dkv = g.dk.clone();
  for (int64_t i = 0; i < dkv.numel(); ++i) dkv.data<double>()[i] += g.dv.value(i);
  EXPECT_LE(max_abs_diff(dh, dkv.reshape(dh.shape())), 1e-12);
  EXPECT_LE(max_abs_diff(layer.w_a.grad, g.dparams.w_q), 1e-12);
  EXPECT_LE(max_abs_diff(layer.u_a.weight.grad, g.dparams.w_k), 1e-12);
  EXPECT_LE(max_abs_diff(layer.v_a.grad, g.dparams.v), 1e-12);
}

// Two steps over one memory, the second query made from the first context (as a decoder does):
// every parameter, both queries and the memory against central differences.
TEST(AdditiveAttention, TwoChainedStepsMatchFiniteDifferences) {
  Rng rng(5);
  AdditiveAttention layer("att", kDq, kDk, kA, rng, DType::f64);
  Tensor h = random_f64({kB, kS, kDk}, 6), s0 = random_f64({kB, kDq}, 7);
  const Tensor r1 = random_f64({kB, kDk}, 8), r2 = random_f64({kB, kDk}, 9);
  // s1 = the first kDq features of c0 (a stand-in for the decoder step between).
  auto run = [&](Tensor* c0_out, Tensor* c1_out) {
    layer.set_memory(h, kLengths);
    const Tensor c0 = layer.forward(s0);
    const Tensor s1 = c0.narrow(1, 0, kDq).contiguous();
    const Tensor c1 = layer.forward(s1);
    if (c0_out) *c0_out = c0;
    if (c1_out) *c1_out = c1;
    return dot_loss(r1, c0) + dot_loss(r2, c1);
  };
  run(nullptr, nullptr);
  layer.zero_grad();
  const Tensor ds1 = layer.backward(r2);
  Tensor dc0 = r1.clone();
  for (int64_t i = 0; i < kB; ++i)
    for (int64_t k = 0; k < kDq; ++k) dc0.at<double>(i, k) += ds1.at<double>(i, k);
  const Tensor ds0 = layer.backward(dc0);
  const Tensor dh = layer.memory_backward();
  auto loss = [&] { return run(nullptr, nullptr); };
  double worst = 0;
  for (Parameter* p : layer.parameters()) {
    SCOPED_TRACE(p->name);
    const Tensor analytic = p->grad.clone();
    worst = std::max(worst, gradient_error(p->value, analytic, loss));
  }
  worst = std::max(worst, gradient_error(s0, ds0, loss));
  worst = std::max(worst, gradient_error(h, dh, loss));
  EXPECT_LE(worst, test::kGradTolerance);
  // A wrong ∂h (one entry 1% off) is caught.
  Tensor wrong = dh.clone();
  wrong.data<double>()[0] *= 1.01;
  EXPECT_GT(gradient_error(h, wrong, loss), 100 * test::kGradTolerance);
}

TEST(AdditiveAttention, Float32AgreesWithFloat64) {
  Rng a(11), b(11);
  AdditiveAttention f64("att", kDq, kDk, kA, a, DType::f64);
  AdditiveAttention f32("att", kDq, kDk, kA, b, DType::f32);
  const Tensor h = random_f64({kB, kS, kDk}, 12), s = random_f64({kB, kDq}, 13);
  f64.set_memory(h, kLengths);
  f32.set_memory(h.to(DType::f32), kLengths);
  const Tensor c64 = f64.forward(s), c32 = f32.forward(s.to(DType::f32));
  EXPECT_LE(max_abs_diff(c64, c32), 1e-5);
  EXPECT_GT(max_abs_diff(c64, Tensor(c64.shape(), DType::f64)), 0.01);  // not all zeros
}

}  // namespace
}  // namespace qkv::nn
