// nn::GRUCell, nn::GRU and nn::BidirectionalGRU: values against a naive GRU written here from the
// equations of Bahdanau et al. 2014, Appendix A.1.1 (not from src/); backward through time against
// float64 finite differences (docs/CONVENTIONS.md §1.3), with and without per-batch lengths;
// float32 against float64 within the bound of §1.1, the naive GRU run in float32 setting it.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "nn/compare.h"
#include "nn/gradcheck.h"
#include "qkv/nn.h"

namespace qkv::nn {
namespace {

using test::dot_loss;
using test::gradient_error;
using test::random_f64;

// A forward GRU in plain loops over one row and one step at a time, in T_ (float or double):
//   z = σ(W_z x + U_z h + b_z), r = σ(W_r x + U_r h + b_r),
//   n = tanh(W_n x + U_n (r ⊙ h) + b_n), h' = (1 − z) ⊙ h + z ⊙ n,
// and its backward through time, derived by hand from the same equations. Rows of W, U, b: z, r, n.
template <class T_>
struct NaiveGRU {
  std::vector<T_> y, dx, dh0, dw, du, db;

  NaiveGRU(const Tensor& xt, const Tensor& h0t, const Tensor& wt, const Tensor& ut,
           const Tensor& bt, const Tensor& dyt) {
    const int64_t B = xt.dim(0), T = xt.dim(1), D = xt.dim(2), H = ut.dim(1);
    auto vec = [](const Tensor& t) {
      std::vector<T_> v(t.numel());
      for (int64_t i = 0; i < t.numel(); ++i) v[i] = static_cast<T_>(t.value(i));
      return v;
    };
    const std::vector<T_> x = vec(xt), w = vec(wt), u = vec(ut), b = vec(bt), dy = vec(dyt);
    std::vector<T_> h0 = vec(h0t);
    auto sig = [](T_ a) { return T_(1) / (T_(1) + std::exp(-a)); };
    y.assign(B * T * H, 0);
    dx.assign(B * T * D, 0);
    dh0.assign(B * H, 0);
    dw.assign(3 * H * D, 0);
    du.assign(3 * H * H, 0);
    db.assign(3 * H, 0);
    for (int64_t bi = 0; bi < B; ++bi) {
      // States hs[t] (before step t), gates per step.
      std::vector<std::vector<T_>> hs(T + 1, std::vector<T_>(H)), z(T, std::vector<T_>(H)),
          r(T, std::vector<T_>(H)), n(T, std::vector<T_>(H));
      for (int64_t j = 0; j < H; ++j) hs[0][j] = h0[bi * H + j];
      for (int64_t t = 0; t < T; ++t) {
        const T_* xv = &x[(bi * T + t) * D];
        const std::vector<T_>& h = hs[t];
        for (int64_t j = 0; j < H; ++j) {
          T_ az = b[j], ar = b[H + j];
          for (int64_t k = 0; k < D; ++k) {
            az += w[j * D + k] * xv[k];
            ar += w[(H + j) * D + k] * xv[k];
          }
          for (int64_t k = 0; k < H; ++k) {
            az += u[j * H + k] * h[k];
            ar += u[(H + j) * H + k] * h[k];
          }
          z[t][j] = sig(az);
          r[t][j] = sig(ar);
        }
        for (int64_t j = 0; j < H; ++j) {
          T_ an = b[2 * H + j];
          for (int64_t k = 0; k < D; ++k) an += w[(2 * H + j) * D + k] * xv[k];
          for (int64_t k = 0; k < H; ++k) an += u[(2 * H + j) * H + k] * (r[t][k] * h[k]);
          n[t][j] = std::tanh(an);
          hs[t + 1][j] = (T_(1) - z[t][j]) * h[j] + z[t][j] * n[t][j];
          y[(bi * T + t) * H + j] = hs[t + 1][j];
        }
      }
      std::vector<T_> g(H, 0), dh(H), daz(H), dar(H), dan(H), drh(H);
      for (int64_t t = T - 1; t >= 0; --t) {
        const std::vector<T_>& h = hs[t];
        for (int64_t j = 0; j < H; ++j) g[j] += dy[(bi * T + t) * H + j];
        for (int64_t j = 0; j < H; ++j) {
          dan[j] = g[j] * z[t][j] * (T_(1) - n[t][j] * n[t][j]);
          daz[j] = g[j] * (n[t][j] - h[j]) * z[t][j] * (T_(1) - z[t][j]);
        }
        for (int64_t k = 0; k < H; ++k) {
          drh[k] = 0;
          for (int64_t j = 0; j < H; ++j) drh[k] += u[(2 * H + j) * H + k] * dan[j];
          dar[k] = drh[k] * h[k] * r[t][k] * (T_(1) - r[t][k]);
        }
        for (int64_t k = 0; k < H; ++k) {
          dh[k] = g[k] * (T_(1) - z[t][k]) + drh[k] * r[t][k];
          for (int64_t j = 0; j < H; ++j)
            dh[k] += u[j * H + k] * daz[j] + u[(H + j) * H + k] * dar[j];
        }
        const T_* xv = &x[(bi * T + t) * D];
        for (int64_t j = 0; j < H; ++j) {
          const T_ da[3] = {daz[j], dar[j], dan[j]};
          for (int64_t gate = 0; gate < 3; ++gate) {
            const int64_t row = gate * H + j;
            db[row] += da[gate];
            for (int64_t k = 0; k < D; ++k) {
              dw[row * D + k] += da[gate] * xv[k];
              dx[(bi * T + t) * D + k] += w[row * D + k] * da[gate];
            }
            for (int64_t k = 0; k < H; ++k)
              du[row * H + k] += da[gate] * (gate == 2 ? r[t][k] * h[k] : h[k]);
          }
        }
        g = dh;
      }
      for (int64_t j = 0; j < H; ++j) dh0[bi * H + j] = g[j];
    }
  }
};

Tensor as_tensor(const std::vector<double>& v, Shape shape) { return Tensor::from(shape, v); }
Tensor as_tensor(const std::vector<float>& v, Shape shape) { return Tensor::from(shape, v); }

// Biases away from 0 so that a backward that dropped them would fail.
void randomize_bias(GRUCell& cell, uint64_t seed) {
  const Tensor b = random_f64(cell.bias.value.shape(), seed, 0.5);
  for (int64_t i = 0; i < b.numel(); ++i) cell.bias.value.data<double>()[i] = b.value(i);
}

TEST(GRULayer, ZeroWeightsHalveTheState) {
  // W = U = 0, b = 0: z = r = σ(0) = ½, n = tanh(0) = 0, so h' = ½ h + ½ · 0 = h / 2.
  Rng rng(1);
  GRUCell cell("g", 2, 3, rng, DType::f64);
  for (Parameter* p : cell.parameters())
    for (int64_t i = 0; i < p->value.numel(); ++i) p->value.data<double>()[i] = 0;
  const Tensor h = Tensor::from({1, 3}, {2.0, -1.0, 0.5});
  const Tensor out = cell.forward(Tensor::from({1, 2}, {3.0, 4.0}), h);
  EXPECT_EQ(out.value(0), 1.0);
  EXPECT_EQ(out.value(1), -0.5);
  EXPECT_EQ(out.value(2), 0.25);
}

TEST(GRULayer, OneStepWorkedFromTheEquations) {
  // D = 2, H = 2, one step, every gate written out: the z rows of W, U, b are rows 0–1, r 2–3,
  // n 4–5 (nn.h).
  Rng rng(1);
  GRUCell cell("g", 2, 2, rng, DType::f64);
  const std::vector<double> W = {0.5, -0.2, 0.1, 0.3, -0.4, 0.2, 0.6, 0.1, 0.3, -0.5, -0.1, 0.8};
  const std::vector<double> U = {0.2, 0.1, -0.3, 0.4, 0.5, -0.6, 0.1, 0.2, 0.7, -0.2, 0.3, 0.9};
  const std::vector<double> b = {0.1, -0.1, 0.2, 0.0, -0.3, 0.05};
  cell.weight_ih.value = Tensor::from({6, 2}, W);
  cell.weight_hh.value = Tensor::from({6, 2}, U);
  cell.bias.value = Tensor::from({6}, b);
  const double x[2] = {1.0, -2.0}, h[2] = {0.5, -0.25};
  auto sig = [](double a) { return 1 / (1 + std::exp(-a)); };
  double z[2], r[2], expected[2];
  for (int j = 0; j < 2; ++j) {
    z[j] =
        sig(W[2 * j] * x[0] + W[2 * j + 1] * x[1] + U[2 * j] * h[0] + U[2 * j + 1] * h[1] + b[j]);
    r[j] = sig(W[4 + 2 * j] * x[0] + W[5 + 2 * j] * x[1] + U[4 + 2 * j] * h[0] +
               U[5 + 2 * j] * h[1] + b[2 + j]);
  }
  for (int j = 0; j < 2; ++j) {
    const double n = std::tanh(W[8 + 2 * j] * x[0] + W[9 + 2 * j] * x[1] +
                               U[8 + 2 * j] * r[0] * h[0] + U[9 + 2 * j] * r[1] * h[1] + b[4 + j]);
    expected[j] = (1 - z[j]) * h[j] + z[j] * n;
  }
  // z_0 = σ(0.5 + 0.4 + 0.1 − 0.025 + 0.1) = σ(1.075) = 0.745547: h'_0 is mostly n_0.
  EXPECT_NEAR(z[0], 0.745547, 1e-6);
  const Tensor out =
      cell.forward(Tensor::from({1, 2}, {x[0], x[1]}), Tensor::from({1, 2}, {h[0], h[1]}));
  EXPECT_NEAR(out.value(0), expected[0], 1e-15);
  EXPECT_NEAR(out.value(1), expected[1], 1e-15);
  // The same step as a sequence of one.
  GRU gru("s", 2, 2, false, rng, DType::f64);
  gru.cell.weight_ih.value = cell.weight_ih.value;
  gru.cell.weight_hh.value = cell.weight_hh.value;
  gru.cell.bias.value = cell.bias.value;
  const Tensor y =
      gru.forward(Tensor::from({1, 1, 2}, {x[0], x[1]}), Tensor::from({1, 2}, {h[0], h[1]}));
  EXPECT_NEAR(y.value(0), expected[0], 1e-15);
  EXPECT_NEAR(y.value(1), expected[1], 1e-15);
}

TEST(GRULayer, SequenceMatchesTheNaiveGRU) {
  Rng rng(3);
  GRU gru("g", 4, 3, false, rng, DType::f64);
  randomize_bias(gru.cell, 4);
  const Tensor x = random_f64({2, 5, 4}, 5), h0 = random_f64({2, 3}, 6),
               dy = random_f64({2, 5, 3}, 7);
  const Tensor y = gru.forward(x, h0);
  const GRU::Grads g = gru.backward(dy);
  const NaiveGRU<double> naive(x, h0, gru.cell.weight_ih.value, gru.cell.weight_hh.value,
                               gru.cell.bias.value, dy);
  using test::max_abs_diff;
  EXPECT_LE(max_abs_diff(y, as_tensor(naive.y, {2, 5, 3})), 1e-14);
  EXPECT_LE(max_abs_diff(g.dx, as_tensor(naive.dx, {2, 5, 4})), 1e-13);
  EXPECT_LE(max_abs_diff(g.dh0, as_tensor(naive.dh0, {2, 3})), 1e-13);
  EXPECT_LE(max_abs_diff(gru.cell.weight_ih.grad, as_tensor(naive.dw, {9, 4})), 1e-13);
  EXPECT_LE(max_abs_diff(gru.cell.weight_hh.grad, as_tensor(naive.du, {9, 3})), 1e-13);
  EXPECT_LE(max_abs_diff(gru.cell.bias.grad, as_tensor(naive.db, {9})), 1e-13);
}

// Every parameter, x and h0 of a GRU against central differences of L = Σ r ⊙ y.
struct GruCase {
  bool reverse;
  std::vector<int64_t> lengths;
  std::string label;
};

TEST(GRULayer, GradientsMatchFiniteDifferences) {
  for (const GruCase& c : {GruCase{false, {}, "forward"}, GruCase{true, {}, "reverse"},
                           GruCase{false, {4, 2, 0}, "forward_lengths"},
                           GruCase{true, {4, 2, 0}, "reverse_lengths"}}) {
    SCOPED_TRACE(c.label);
    Rng rng(11);
    GRU gru("g", 3, 4, c.reverse, rng, DType::f64);
    randomize_bias(gru.cell, 12);
    Tensor x = random_f64({3, 4, 3}, 13), h0 = random_f64({3, 4}, 14);
    const Tensor r = random_f64({3, 4, 4}, 15);
    gru.forward(x, h0, c.lengths);
    const GRU::Grads g = gru.backward(r);
    auto loss = [&] { return dot_loss(r, gru.forward(x, h0, c.lengths)); };
    const double errors[] = {
        gradient_error(x, g.dx, loss), gradient_error(h0, g.dh0, loss),
        gradient_error(gru.cell.weight_ih.value, gru.cell.weight_ih.grad, loss),
        gradient_error(gru.cell.weight_hh.value, gru.cell.weight_hh.grad, loss),
        gradient_error(gru.cell.bias.value, gru.cell.bias.grad, loss)};
    const char* names[] = {"dx", "dh0", "dweight_ih", "dweight_hh", "dbias"};
    for (int i = 0; i < 5; ++i) {
      EXPECT_LE(errors[i], test::kGradTolerance) << names[i];
      RecordProperty("error_" + std::string(names[i]) + "_" + c.label, test::sci(errors[i]));
    }
  }
}

TEST(GRULayer, PaddingStepsLeaveTheStateAndGetNoGradient) {
  for (bool reverse : {false, true}) {
    SCOPED_TRACE(reverse ? "reverse" : "forward");
    Rng rng(21);
    GRU gru("g", 2, 3, reverse, rng, DType::f64);
    randomize_bias(gru.cell, 25);
    Tensor x = random_f64({2, 4, 2}, 22);
    const Tensor h0 = random_f64({2, 3}, 23);
    const std::vector<int64_t> lengths = {4, 2};
    const Tensor y = gru.forward(x, h0, lengths);
    const GRU::Grads g = gru.backward(random_f64({2, 4, 3}, 24));
    for (int64_t t = 2; t < 4; ++t)
      for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(y.at<double>(1, t, j), 0.0);
    for (int64_t t = 2; t < 4; ++t)
      for (int64_t k = 0; k < 2; ++k) EXPECT_EQ(g.dx.at<double>(1, t, k), 0.0);
    // Whatever stands in the padding, the real steps read the same.
    for (int64_t t = 2; t < 4; ++t) x.at<double>(1, t, 0) = 1e3;
    const Tensor y2 = gru.forward(x, h0, lengths);
    EXPECT_EQ(test::max_abs_diff(y, y2), 0.0);
    // The sequence of length 2 alone, unpadded, gives the same states.
    GRU alone("g", 2, 3, reverse, rng, DType::f64);
    alone.cell.weight_ih.value = gru.cell.weight_ih.value;
    alone.cell.weight_hh.value = gru.cell.weight_hh.value;
    alone.cell.bias.value = gru.cell.bias.value;
    const Tensor y1 =
        alone.forward(x.narrow(0, 1, 1).narrow(1, 0, 2), h0.narrow(0, 1, 1).contiguous());
    EXPECT_LE(test::max_abs_diff(y1, y.narrow(0, 1, 1).narrow(1, 0, 2).contiguous()), 1e-15);
  }
}

TEST(GRULayer, GradientCheckRejectsAWrongGradient) {
  Rng rng(31);
  GRU gru("g", 3, 2, false, rng, DType::f64);
  Tensor x = random_f64({2, 3, 3}, 32);
  const Tensor r = random_f64({2, 3, 2}, 33);
  gru.forward(x);
  GRU::Grads g = gru.backward(r);
  g.dx.data<double>()[4] += 1e-3;
  gru.cell.weight_hh.grad.data<double>()[5] += 1e-3;
  auto loss = [&] { return dot_loss(r, gru.forward(x)); };
  EXPECT_GT(gradient_error(x, g.dx, loss), 1e-4);
  EXPECT_GT(gradient_error(gru.cell.weight_hh.value, gru.cell.weight_hh.grad, loss), 1e-4);
}

TEST(BidirectionalGRULayer, ConcatenatesTheTwoDirections) {
  Rng rng(41);
  BidirectionalGRU bi("enc", 3, 2, rng, DType::f64);
  const Tensor x = random_f64({2, 4, 3}, 42);
  const std::vector<int64_t> lengths = {4, 3};
  const Tensor y = bi.forward(x, {}, {}, lengths);
  ASSERT_EQ(y.shape(), (Shape{2, 4, 4}));
  const Tensor f = bi.forward_gru.forward(x, {}, lengths),
               b = bi.backward_gru.forward(x, {}, lengths);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t t = 0; t < 4; ++t)
      for (int64_t j = 0; j < 2; ++j) {
        EXPECT_EQ(y.at<double>(i, t, j), f.at<double>(i, t, j));
        EXPECT_EQ(y.at<double>(i, t, 2 + j), b.at<double>(i, t, j));
      }
  // The reverse direction's annotation of position 0 has read the whole (real) sequence: it is
  // the last state of a forward GRU, with the same weights, over the sequence reversed.
  GRU ahead("a", 3, 2, false, rng, DType::f64);
  ahead.cell.weight_ih.value = bi.backward_gru.cell.weight_ih.value;
  ahead.cell.weight_hh.value = bi.backward_gru.cell.weight_hh.value;
  Tensor reversed({1, 3, 3}, DType::f64);
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t k = 0; k < 3; ++k) reversed.at<double>(0, t, k) = x.at<double>(1, 2 - t, k);
  const Tensor last = ahead.forward(reversed);
  for (int64_t j = 0; j < 2; ++j) EXPECT_EQ(y.at<double>(1, 0, 2 + j), last.at<double>(0, 2, j));
  EXPECT_EQ(y.at<double>(1, 3, 0), 0.0);  // padding
  EXPECT_EQ(bi.parameters().size(), 6u);
  EXPECT_EQ(bi.parameters()[3]->name, "enc.backward.weight_ih");
}

TEST(BidirectionalGRULayer, GradientsMatchFiniteDifferences) {
  Rng rng(51);
  BidirectionalGRU bi("enc", 3, 2, rng, DType::f64);
  randomize_bias(bi.forward_gru.cell, 52);
  randomize_bias(bi.backward_gru.cell, 53);
  Tensor x = random_f64({3, 4, 3}, 54), hf = random_f64({3, 2}, 55), hb = random_f64({3, 2}, 56);
  const Tensor r = random_f64({3, 4, 4}, 57);
  const std::vector<int64_t> lengths = {4, 3, 1};
  bi.forward(x, hf, hb, lengths);
  const BidirectionalGRU::Grads g = bi.backward(r);
  auto loss = [&] { return dot_loss(r, bi.forward(x, hf, hb, lengths)); };
  double worst = 0;
  const double ex = gradient_error(x, g.dx, loss), ef = gradient_error(hf, g.dh0_forward, loss),
               eb = gradient_error(hb, g.dh0_backward, loss);
  for (double e : {ex, ef, eb}) EXPECT_LE(e, test::kGradTolerance);
  for (Parameter* p : bi.parameters()) {
    const double e = gradient_error(p->value, p->grad, loss);
    EXPECT_LE(e, test::kGradTolerance) << p->name;
    worst = std::max(worst, e);
  }
  RecordProperty("error_dx", test::sci(ex));
  RecordProperty("error_dh0", test::sci(std::max(ef, eb)));
  RecordProperty("error_parameters", test::sci(worst));
}

// A decoder's loop: three GRUCell steps, each state fed to the next, the backward taken in
// reverse order off the cell's stack; L = Σ_i r_i · s_i.
TEST(GRUCellLayer, DecoderStepsMatchFiniteDifferences) {
  Rng rng(61);
  GRUCell cell("dec", 3, 4, rng, DType::f64);
  randomize_bias(cell, 62);
  std::vector<Tensor> xs = {random_f64({2, 3}, 63), random_f64({2, 3}, 64), random_f64({2, 3}, 65)};
  Tensor s0 = random_f64({2, 4}, 66);
  const std::vector<Tensor> rs = {random_f64({2, 4}, 67), random_f64({2, 4}, 68),
                                  random_f64({2, 4}, 69)};
  auto run = [&] {
    double l = 0;
    Tensor s = s0;
    for (int i = 0; i < 3; ++i) {
      s = cell.forward(xs[i], s);
      l += dot_loss(rs[i], s);
    }
    return l;
  };
  run();
  EXPECT_EQ(cell.saved_steps(), 3);
  std::vector<Tensor> dxs(3);
  Tensor g = Tensor::full({2, 4}, 0.0, DType::f64);
  for (int i = 2; i >= 0; --i) {
    Tensor gi = rs[i].clone();
    for (int64_t k = 0; k < gi.numel(); ++k) gi.data<double>()[k] += g.data<double>()[k];
    const GRUCell::Grads step = cell.backward(gi);
    dxs[i] = step.dx;
    g = step.dh;
  }
  EXPECT_EQ(cell.saved_steps(), 0);
  EXPECT_THROW(cell.backward(g), Error);
  auto loss = [&] {
    const double l = run();
    cell.clear();
    return l;
  };
  double worst = gradient_error(s0, g, loss);
  for (int i = 0; i < 3; ++i) worst = std::max(worst, gradient_error(xs[i], dxs[i], loss));
  for (Parameter* p : cell.parameters())
    worst = std::max(worst, gradient_error(p->value, p->grad, loss));
  EXPECT_LE(worst, test::kGradTolerance);
  RecordProperty("error_worst", test::sci(worst));
}

TEST(GRULayer, Float32MatchesFloat64) {
  for (int64_t h : {3, 16}) {
    SCOPED_TRACE("H = " + std::to_string(h));
    Rng rng(71);
    GRU g64("g", 8, h, false, rng, DType::f64);
    randomize_bias(g64.cell, 72);
    Rng unused(0);
    GRU g32("g", 8, h, false, unused, DType::f32);
    // The float32 layer's parameters, and inputs, exactly representable in float32.
    for (Parameter* p : g64.parameters()) p->value = p->value.to(DType::f32).to(DType::f64);
    const auto p64 = g64.parameters(), p32 = g32.parameters();
    for (size_t i = 0; i < p64.size(); ++i) p32[i]->value = p64[i]->value.to(DType::f32);
    const Tensor x = random_f64({3, 12, 8}, 73).to(DType::f32).to(DType::f64);
    const Tensor h0 = random_f64({3, h}, 74).to(DType::f32).to(DType::f64);
    const Tensor dy = random_f64({3, 12, h}, 75).to(DType::f32).to(DType::f64);
    const Tensor y64 = g64.forward(x, h0);
    const GRU::Grads d64 = g64.backward(dy);
    const Tensor y32 = g32.forward(x.to(DType::f32), h0.to(DType::f32));
    const GRU::Grads d32 = g32.backward(dy.to(DType::f32));
    const NaiveGRU<float> naive(x, h0, g64.cell.weight_ih.value, g64.cell.weight_hh.value,
                                g64.cell.bias.value, dy);
    using test::max_abs_diff;
    const Tensor ny = as_tensor(naive.y, y64.shape()), ndx = as_tensor(naive.dx, x.shape()),
                 ndh0 = as_tensor(naive.dh0, h0.shape()),
                 ndw = as_tensor(naive.dw, g64.cell.weight_ih.value.shape()),
                 ndu = as_tensor(naive.du, g64.cell.weight_hh.value.shape()),
                 ndb = as_tensor(naive.db, g64.cell.bias.value.shape());
    EXPECT_LE(max_abs_diff(y32, y64), 2 * max_abs_diff(ny, y64) + 1e-6);
    EXPECT_LE(max_abs_diff(d32.dx, d64.dx), 4 * max_abs_diff(ndx, d64.dx) + 1e-6);
    EXPECT_LE(max_abs_diff(d32.dh0, d64.dh0), 4 * max_abs_diff(ndh0, d64.dh0) + 1e-6);
    const Tensor* grads64[] = {&g64.cell.weight_ih.grad, &g64.cell.weight_hh.grad,
                               &g64.cell.bias.grad};
    const Tensor* grads32[] = {&g32.cell.weight_ih.grad, &g32.cell.weight_hh.grad,
                               &g32.cell.bias.grad};
    const Tensor* naive_grads[] = {&ndw, &ndu, &ndb};
    for (int i = 0; i < 3; ++i)
      EXPECT_LE(max_abs_diff(*grads32[i], *grads64[i]),
                4 * max_abs_diff(*naive_grads[i], *grads64[i]) + 1e-6);
    RecordProperty("y_error_H" + std::to_string(h), test::sci(max_abs_diff(y32, y64)));
    RecordProperty("y_naive_error_H" + std::to_string(h), test::sci(max_abs_diff(ny, y64)));
  }
}

// The parameters travel under their names through a parameter file: a fresh encoder loaded from
// it gives the same annotations, bit for bit.
TEST(BidirectionalGRULayer, ParametersRoundTripThroughAFile) {
  Rng rng(91), other(92);
  BidirectionalGRU saved("enc", 3, 2, rng), loaded("enc", 3, 2, other);
  const std::string file = ::testing::TempDir() + "gru_round_trip.safetensors";
  save_parameters(file, saved.parameters());
  load_parameters(file, loaded.parameters());
  const Tensor x = random_f64({2, 3, 3}, 93).to(DType::f32);
  EXPECT_EQ(test::max_abs_diff(saved.forward(x), loaded.forward(x)), 0.0);
  std::vector<std::string> names;
  for (Parameter* p : saved.parameters()) names.push_back(p->name);
  EXPECT_EQ(names, (std::vector<std::string>{"enc.forward.weight_ih", "enc.forward.weight_hh",
                                             "enc.forward.bias", "enc.backward.weight_ih",
                                             "enc.backward.weight_hh", "enc.backward.bias"}));
}

TEST(GRULayer, RejectsAWrongShapeOrDtype) {
  Rng rng(81);
  GRU gru("g", 3, 2, false, rng);
  EXPECT_THROW(gru.forward(Tensor({2, 4, 5}, DType::f32)), Error);
  EXPECT_THROW(gru.forward(Tensor({2, 4, 3}, DType::f64)), Error);
  EXPECT_THROW(gru.forward(Tensor({2, 4, 3}), Tensor({3, 2})), Error);
  EXPECT_THROW(gru.forward(Tensor({2, 4, 3}), {}, {4}), Error);
  EXPECT_THROW(gru.forward(Tensor({2, 4, 3}), {}, {4, 5}), Error);
  EXPECT_THROW(gru.backward(Tensor({2, 4, 2})), Error);  // before forward
  gru.forward(Tensor({2, 4, 3}));
  EXPECT_THROW(gru.backward(Tensor({2, 3, 2})), Error);
  GRUCell cell("c", 3, 2, rng);
  EXPECT_THROW(cell.forward(Tensor({2, 3}), Tensor({2, 3})), Error);
}

}  // namespace
}  // namespace qkv::nn
