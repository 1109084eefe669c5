// nn::EncoderBlock and nn::DecoderBlock: gradients (input, memory, every parameter) against float64
// finite differences in pre- and post-norm, with and without padding and dropout; what the masks
// promise (no look-ahead, padding unread); parameter names; float32 against float64.
#include <gtest/gtest.h>

#include <cmath>

#include "nn/compare.h"
#include "nn/gradcheck.h"
#include "qkv/nn.h"

namespace qkv::nn {
namespace {

using test::dot_loss;
using test::gradient_error;
using test::max_abs_diff;  // +∞ when the shapes differ
using test::random_f64;

struct BlockCase {
  BlockOptions options;
  bool decoder = false;
  Shape x_shape{2, 3, 8};
  Shape memory_shape{2, 4, 8};  // decoder only
  std::vector<int64_t> lengths, memory_lengths;
  bool training = false;
  uint64_t seed = 1;
};

BlockOptions small(NormPosition norm, Activation activation = Activation::gelu) {
  return {.d_model = 8, .heads = 2, .ffn_hidden = 12, .activation = activation, .norm = norm};
}

struct Errors {
  double input = 0, params = 0;
};

// L = Σ r ⊙ block(x[, memory]); with training, each forward re-seeds its Rng, so every dropout
// mask is held fixed while the inputs move.
Errors check(const BlockCase& c, double perturb_dx = 0) {
  Rng init(c.seed);
  std::unique_ptr<EncoderBlock> encoder;
  std::unique_ptr<DecoderBlock> decoder;
  if (c.decoder)
    decoder = std::make_unique<DecoderBlock>("dec", c.options, init, DType::f64);
  else
    encoder = std::make_unique<EncoderBlock>("enc", c.options, init, DType::f64);
  Module& block = c.decoder ? static_cast<Module&>(*decoder) : *encoder;
  Tensor x = random_f64(c.x_shape, c.seed + 1);
  Tensor memory = random_f64(c.memory_shape, c.seed + 2);
  auto run = [&] {
    Rng drop(c.seed + 3);
    return c.decoder ? decoder->forward(x, memory, c.lengths, c.memory_lengths, c.training, drop)
                     : encoder->forward(x, c.lengths, c.training, drop);
  };
  const Tensor y = run();
  const Tensor r = random_f64(y.shape(), c.seed + 4);
  Tensor dx, dmemory;
  if (c.decoder) {
    const DecoderBlock::Grads g = decoder->backward(r);
    dx = g.dx.clone(), dmemory = g.dmemory;
  } else {
    dx = encoder->backward(r).clone();
  }
  dx.data<double>()[0] += perturb_dx;
  auto loss = [&] { return dot_loss(r, run()); };
  Errors e;
  e.input = gradient_error(x, dx, loss);
  if (c.decoder) e.input = std::max(e.input, gradient_error(memory, dmemory, loss));
  for (Parameter* p : block.parameters())
    e.params = std::max(e.params, gradient_error(p->value, p->grad, loss, 24));
  return e;
}

void expect_gradients_match(const BlockCase& c) {
  const Errors e = check(c);
  EXPECT_LE(e.input, test::kGradTolerance);
  EXPECT_LE(e.params, test::kGradTolerance);
  EXPECT_GT(check(c, 1e-3).input, 1e-4);  // a gradient off by 1e-3 in one entry is caught
}

TEST(EncoderBlock, Gradients) {
  for (NormPosition norm : {NormPosition::pre, NormPosition::post}) {
    SCOPED_TRACE(norm == NormPosition::pre ? "pre-norm" : "post-norm");
    expect_gradients_match({.options = small(norm)});
    SCOPED_TRACE("padded, lengths {3, 1}, ReLU");
    expect_gradients_match({.options = small(norm, Activation::relu), .lengths = {3, 1}});
  }
}

TEST(DecoderBlock, Gradients) {
  for (NormPosition norm : {NormPosition::pre, NormPosition::post}) {
    SCOPED_TRACE(norm == NormPosition::pre ? "pre-norm" : "post-norm");
    expect_gradients_match({.options = small(norm), .decoder = true});
    SCOPED_TRACE("padded target and memory, memory 6 wide, 4 heads on 2");
    BlockOptions o = small(norm);
    o.heads = 4;
    o.attention.kv_heads = 2;
    o.attention.kdim = 6;
    expect_gradients_match({.options = o,
                            .decoder = true,
                            .memory_shape = {2, 5, 6},
                            .lengths = {2, 3},
                            .memory_lengths = {5, 2}});
  }
}

TEST(Blocks, DropoutGradients) {
  for (NormPosition norm : {NormPosition::pre, NormPosition::post}) {
    SCOPED_TRACE(norm == NormPosition::pre ? "pre-norm" : "post-norm");
    BlockOptions o = small(norm);
    o.dropout = 0.2;
    o.attention.dropout = 0.1;
    expect_gradients_match({.options = o, .lengths = {3, 2}, .training = true});
    expect_gradients_match({.options = o,
                            .decoder = true,
                            .lengths = {3, 2},
                            .memory_lengths = {4, 3},
                            .training = true});
  }
}

TEST(Blocks, EvaluationIgnoresDropout) {
  BlockOptions o = small(NormPosition::pre);
  o.dropout = 0.5;
  o.attention.dropout = 0.5;
  Rng init(1), a(2), b(3);
  EncoderBlock block("enc", o, init, DType::f64);
  const Tensor x = random_f64({2, 3, 8}, 4);
  const Tensor y1 = block.forward(x, {}, false, a), y2 = block.forward(x, {}, false, b);
  for (int64_t i = 0; i < y1.numel(); ++i) EXPECT_EQ(y1.value(i), y2.value(i));
  const Tensor y3 = block.forward(x, {}, true, b);
  double diff = 0;
  for (int64_t i = 0; i < y1.numel(); ++i) diff += std::abs(y3.value(i) - y1.value(i));
  EXPECT_GT(diff, 1e-3);
}

// Moving x at position `moved` changes the outputs of exactly the positions in `changed`.
template <class Forward>
void expect_dependence(Forward forward, const Tensor& x, int64_t moved,
                       const std::vector<bool>& changed) {
  const Tensor y = forward(x);
  Tensor x2 = x.clone();
  // Not a constant shift, which a LayerNorm would remove.
  for (int64_t c = 0; c < x.dim(2); ++c)
    x2.at<double>(0, moved, c) += 0.1 * static_cast<double>(c + 1);
  const Tensor y2 = forward(x2);
  for (int64_t i = 0; i < y.dim(1); ++i) {
    double diff = 0;
    for (int64_t c = 0; c < y.dim(2); ++c)
      diff = std::max(diff, std::abs(y2.at<double>(0, i, c) - y.at<double>(0, i, c)));
    if (changed[i])
      EXPECT_GT(diff, 1e-6) << "position " << i;
    else
      EXPECT_EQ(diff, 0.0) << "position " << i << " saw position " << moved;
  }
}

TEST(DecoderBlock, DoesNotLookAhead) {
  for (NormPosition norm : {NormPosition::pre, NormPosition::post}) {
    Rng init(1);
    DecoderBlock block("dec", small(norm), init, DType::f64);
    const Tensor memory = random_f64({1, 4, 8}, 2);
    auto forward = [&](const Tensor& x) { return block.forward(x, memory, {}, {}, false, init); };
    expect_dependence(forward, random_f64({1, 4, 8}, 3), 2, {false, false, true, true});
  }
}

TEST(EncoderBlock, PaddingIsNeverRead) {
  for (NormPosition norm : {NormPosition::pre, NormPosition::post}) {
    Rng init(1);
    EncoderBlock block("enc", small(norm), init, DType::f64);
    auto forward = [&](const Tensor& x) { return block.forward(x, {2}, false, init); };
    // Position 3 is padding: only its own row moves; position 1 is real: every row moves.
    expect_dependence(forward, random_f64({1, 4, 8}, 3), 3, {false, false, false, true});
    expect_dependence(forward, random_f64({1, 4, 8}, 3), 1, {true, true, true, true});
  }
}

TEST(DecoderBlock, PaddedMemoryIsNeverRead) {
  Rng init(1);
  DecoderBlock block("dec", small(NormPosition::pre), init, DType::f64);
  const Tensor x = random_f64({1, 3, 8}, 2);
  Tensor memory = random_f64({1, 4, 8}, 3);
  const Tensor y = block.forward(x, memory, {}, {2}, false, init);
  for (int64_t c = 0; c < 8; ++c) memory.at<double>(0, 3, c) = 1e3;
  const Tensor y2 = block.forward(x, memory, {}, {2}, false, init);
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.value(i), y2.value(i));
}

TEST(Blocks, ParameterNames) {
  Rng init(1);
  EncoderBlock encoder("encoder.0", small(NormPosition::pre), init);
  std::vector<std::string> names;
  for (Parameter* p : encoder.parameters()) names.push_back(p->name);
  const std::vector<std::string> expected{
      "encoder.0.attention.q.weight", "encoder.0.attention.q.bias",
      "encoder.0.attention.k.weight", "encoder.0.attention.k.bias",
      "encoder.0.attention.v.weight", "encoder.0.attention.v.bias",
      "encoder.0.attention.o.weight", "encoder.0.attention.o.bias",
      "encoder.0.ffn.in.weight",      "encoder.0.ffn.in.bias",
      "encoder.0.ffn.out.weight",     "encoder.0.ffn.out.bias",
      "encoder.0.norm1.weight",       "encoder.0.norm1.bias",
      "encoder.0.norm2.weight",       "encoder.0.norm2.bias"};
  EXPECT_EQ(names, expected);

  BlockOptions o = small(NormPosition::post);
  o.attention.kdim = 6;
  DecoderBlock decoder("decoder.1", o, init);
  std::vector<Parameter*> params = decoder.parameters();
  ASSERT_EQ(params.size(), 8u + 8u + 4u + 6u);
  EXPECT_EQ(params[0]->name, "decoder.1.self_attention.q.weight");
  EXPECT_EQ(params[8]->name, "decoder.1.cross_attention.q.weight");
  EXPECT_EQ(params[10]->name, "decoder.1.cross_attention.k.weight");
  EXPECT_EQ(params[10]->value.shape(), (Shape{8, 6}));  // reads the 6-wide memory
  EXPECT_EQ(params[2]->value.shape(), (Shape{8, 8}));   // self-attention reads d_model
  EXPECT_EQ(params[20]->name, "decoder.1.norm1.weight");
  EXPECT_EQ(params[25]->name, "decoder.1.norm3.bias");
}

// float32 (fused attention, fast dense kernels) against float64, same seeds. Values are O(1)
// through three LayerNorms and three sublayers. Measured worst: 6.5e-7 (outputs), 3.4e-6
// (gradients; the LayerNorm weights sum over all 10 rows); the bounds leave 5–6× room.
TEST(Blocks, Float32MatchesFloat64) {
  for (NormPosition norm : {NormPosition::pre, NormPosition::post}) {
    SCOPED_TRACE(norm == NormPosition::pre ? "pre-norm" : "post-norm");
    BlockOptions o = {.d_model = 16, .heads = 4, .ffn_hidden = 32, .norm = norm};
    Rng i64(3), i32(3), r64(4), r32(4);
    DecoderBlock b64("dec", o, i64, DType::f64), b32("dec", o, i32, DType::f32);
    const Tensor x = random_f64({2, 5, 16}, 5), m = random_f64({2, 6, 16}, 6);
    const Tensor dy = random_f64({2, 5, 16}, 7);
    const Tensor y64 = b64.forward(x, m, {5, 3}, {6, 4}, false, r64);
    const Tensor y32 = b32.forward(x.to(DType::f32), m.to(DType::f32), {5, 3}, {6, 4}, false, r32);
    const DecoderBlock::Grads g64 = b64.backward(dy), g32 = b32.backward(dy.to(DType::f32));
    const double worst_y = max_abs_diff(y32, y64);
    double worst_g = std::max(max_abs_diff(g32.dx, g64.dx), max_abs_diff(g32.dmemory, g64.dmemory));
    const auto p64 = b64.parameters(), p32 = b32.parameters();
    for (size_t p = 0; p < p64.size(); ++p)
      worst_g = std::max(worst_g, max_abs_diff(p32[p]->grad, p64[p]->grad));
    EXPECT_LE(worst_y, 1e-5);
    EXPECT_LE(worst_g, 2e-5);
    EXPECT_GT(worst_y, 0.0);
  }
}

}  // namespace
}  // namespace qkv::nn
