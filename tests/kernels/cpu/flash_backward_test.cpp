// tests/kernels/cpu/flash_backward_test.cpp — the fused fp32 attention backward (Path::fused)
// against the float64 reference, the backward checker, and the fp32 naive yardstick itself.
// The tolerance rule and the harness: flash_test_support.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/flash_test_support.h"
#include "simd_targets.h"

namespace qkv_test::flash {
namespace {

// ---- the checker has teeth ----

TEST(FlashChecker, BackwardCheckHasTeeth) {
  Spec s = teeth_spec();
  s.setup = causal(Causal::bottom_right);
  const Case c = build(s);
  SCOPED_TRACE(c.describe());
  const std::vector<double> g = dout_of(c);
  const AttentionGrads x = run_fused_backward(c, g);
  ASSERT_TRUE(backward_matches(c, g, x));
  auto perturbed = [](const Tensor& t, int64_t i, float delta) {
    Tensor p = t.clone();
    p.data<float>()[i] += delta;
    return p;
  };
  AttentionGrads bad = x;
  bad.dq = perturbed(x.dq, 11, 1e-4f);
  EXPECT_FALSE(backward_matches(c, g, bad));
  bad = x;
  bad.dk = perturbed(x.dk, 3, -1e-4f);
  EXPECT_FALSE(backward_matches(c, g, bad));
  bad = x;
  bad.dv = perturbed(x.dv, x.dv.numel() - 1, 1e-4f);
  EXPECT_FALSE(backward_matches(c, g, bad));
  // dscale: the tolerance is a small fraction of |dscale|; an error of 1e-4 of it fails.
  const double sigma = dscale_rounding_sigma(c, g);
  EXPECT_LT(kDscaleSigmas * sigma, 5e-5 * std::abs(x.dscale)) << "sigma " << sigma;
  bad = x;
  bad.dscale += 1e-4 * std::abs(x.dscale);
  EXPECT_FALSE(backward_matches(c, g, bad));
  bad.dscale = x.dscale * (1 - 1e-4);
  EXPECT_FALSE(backward_matches(c, g, bad));
}

// The yardstick itself: naive_forward/naive_backward in double agree with the library's float64
// reference to rounding, so N differs from R by fp32 rounding alone.
TEST(FlashNaive, DoubleInstantiationMatchesTheReference) {
  const std::vector<Spec> specs = [] {
    std::vector<Spec> v(4);
    v[0].setup = both(bool_mask_ls(0.6), causal(Causal::bottom_right));
    v[0].B = 2, v[0].Hq = 4, v[0].Hkv = 2, v[0].L = 9, v[0].S = 13, v[0].Dk = 5, v[0].Dv = 3;
    v[0].scale = -0.7;
    v[1].setup = [](Case& c) {
      set_float_mask(c, {c.B, 1, c.L, c.S}, 0.3, DType::f64, 3);
      c.key_lengths = {0, 6};
    };
    v[1].B = 2, v[1].Hq = 2, v[1].Hkv = 1, v[1].L = 7, v[1].S = 11, v[1].Dk = 4, v[1].Dv = 6;
    v[2].setup = causal(Causal::top_left);
    v[2].score = Score::dot;
    v[2].input_scale = 5;
    v[2].B = 1, v[2].Hq = 8, v[2].Hkv = 1, v[2].L = 12, v[2].S = 5, v[2].Dk = 3, v[2].Dv = 3;
    v[3].B = 1, v[3].Hq = 1, v[3].Hkv = 1, v[3].L = 3, v[3].S = 4, v[3].Dk = 2, v[3].Dv = 2;
    v[3].scale = 0.0;
    for (size_t i = 0; i < v.size(); ++i) v[i].seed = 16000 + i;
    return v;
  }();
  for (const Spec& s : specs) {
    const Case c = build(s);
    SCOPED_TRACE(c.describe());
    const AttentionResult r = run_reference(c);
    const NaiveForward n = naive_forward<double>(c);
    const std::vector<double> zeros;
    EXPECT_TRUE(near("out", r.out, c.out_shape(), DType::f64, n.out, zeros, 1e-12, 1e-12));
    EXPECT_TRUE(
        near("logsumexp", r.logsumexp, c.lse_shape(), DType::f64, n.lse, zeros, 1e-12, 1e-12));
    const std::vector<double> g = dout_of(c);
    const AttentionGrads rg = run_reference_backward(c, g);
    const NaiveGrads ng = naive_backward<double>(c, g);
    EXPECT_TRUE(near("dq", rg.dq, c.q_shape(), DType::f64, ng.dq, zeros, 1e-11, 1e-11));
    EXPECT_TRUE(near("dk", rg.dk, c.k_shape(), DType::f64, ng.dk, zeros, 1e-11, 1e-11));
    EXPECT_TRUE(near("dv", rg.dv, c.v_shape(), DType::f64, ng.dv, zeros, 1e-11, 1e-11));
    EXPECT_NEAR(rg.dscale, ng.dscale, 1e-11 * (1 + std::abs(rg.dscale)));
  }
}

// ---- backward ----

// Each test runs once per SIMD target and once on Path::cuda (as FlashForward).
QKV_PER_FUSED_PATH(FlashBackward);

// A representative subset: GQA, both causal alignments, masks, Dv ≠ Dk, fully masked rows and
// first tiles, large logits, negative and zero scales, empty shapes, decode.
TEST_P(FlashBackward, MatchesTheReference) {
  Tally tally("FlashBackward.MatchesTheReference");
  std::vector<Spec> specs;
  auto add = [&](std::string name, int64_t B, int64_t Hq, int64_t Hkv, int64_t L, int64_t S,
                 int64_t Dk, int64_t Dv, CaseSetup setup = nullptr) -> Spec& {
    Spec s;
    s.name = std::move(name);
    s.B = B, s.Hq = Hq, s.Hkv = Hkv, s.L = L, s.S = S, s.Dk = Dk, s.Dv = Dv;
    s.setup = std::move(setup);
    s.seed = 17000 + specs.size();
    specs.push_back(s);
    return specs.back();
  };
  add("none", 1, 2, 2, 97, 129, 64, 64);
  add("GQA 4, Dv != Dk", 2, 8, 2, 65, 127, 32, 21);
  add("multi-query, Dv != Dk", 1, 4, 1, 129, 65, 21, 59);
  add("GQA 8, bool [B,Hq,L,S] p=0.8", 1, 8, 1, 64, 257, 8, 8, [](Case& c) {
    set_bool_mask(c, {c.B, c.Hq, c.L, c.S}, 0.8, 1);
  });
  add("causal top_left, L < S", 1, 2, 1, 64, 257, 64, 64, causal(Causal::top_left));
  add("causal top_left, L > S", 1, 2, 2, 257, 64, 59, 32, causal(Causal::top_left));
  add("causal bottom_right, L < S", 2, 2, 1, 63, 256, 128, 128, causal(Causal::bottom_right));
  add("causal bottom_right, L > S (first rows see nothing)", 1, 4, 2, 255, 65, 32, 32,
      causal(Causal::bottom_right));
  add("bool [L,S]: keys 0..129 masked in odd rows, fully masked rows", 1, 2, 1, 97, 300, 64, 64,
      both(bool_mask_where([](int64_t, int64_t h, int64_t i, int64_t j) {
             return (i % 2 == 0 || j >= 130) && !(h == 1 && i % 10 == 3);
           }),
           causal(Causal::none)));
  add("float32 [L,S] -inf p=0.3", 2, 2, 2, 65, 129, 21, 32, [](Case& c) {
    set_float_mask(c, {c.L, c.S}, 0.3, DType::f32, 2);
  });
  add("float64 [B,1,1,S] finite + top_left", 2, 4, 2, 128, 128, 64, 32,
      both(
          [](Case& c) {
            set_float_mask(c, {c.B, 1, 1, c.S}, 0, DType::f64, 3);
          },
          causal(Causal::top_left)));
  add("key_lengths {0, 100}", 2, 2, 1, 129, 257, 32, 32,
      key_lengths([](const Case&, int64_t b) { return b == 0 ? int64_t{0} : int64_t{100}; }));
  add("every row fully masked", 1, 2, 1, 65, 97, 32, 32,
      bool_mask_where([](int64_t, int64_t, int64_t, int64_t) { return false; }));
  add("D = 1", 1, 2, 1, 97, 65, 1, 1);
  add("D = 8, Dv = 111", 1, 1, 1, 129, 129, 8, 111);
  add("D = 203, Dv = 256", 1, 1, 1, 65, 63, 203, 256, causal(Causal::bottom_right));
  add("D = 256, Dv = 128", 1, 2, 1, 33, 97, 256, 128);
  add("L = 1, S = 1", 1, 1, 1, 1, 1, 8, 8);
  add("L = 2, S = 17", 1, 2, 1, 2, 17, 8, 8);
  add("L = 1025, S = 257", 1, 1, 1, 1025, 257, 32, 32, causal(Causal::bottom_right));
  add("L = 0", 1, 2, 1, 0, 17, 8, 8);
  add("S = 0", 1, 2, 1, 17, 0, 8, 8);
  add("decode L = 1, S = 3001, GQA 4", 1, 8, 2, 1, 3001, 64, 64);
  add("large logits x5", 1, 2, 1, 129, 257, 64, 64, bool_mask_ls(0.5)).input_scale = 5;
  add("large logits x5, dot", 1, 2, 1, 65, 97, 32, 32, causal(Causal::top_left)).score = Score::dot;
  specs.back().input_scale = 5;
  add("scale -0.3", 1, 4, 2, 97, 129, 64, 64, causal(Causal::bottom_right)).scale = -0.3;
  add("scale 0", 1, 2, 1, 97, 129, 32, 32, bool_mask_ls(0.5)).scale = 0.0;
  for (const Spec& s : specs) check_backward(s);
}

// Every mask kind and broadcast shape of the forward sweep, through the backward.
TEST_P(FlashBackward, Masks) {
  Tally tally("FlashBackward.Masks");
  const std::vector<cases::AttentionCase> shapes = cases::backward_mask_shapes();
  uint64_t idx = 0;
  for (const MaskSpec& m : mask_specs())
    for (const cases::AttentionCase& c : shapes) {
      Spec s = sized(c);
      s.name = m.name;
      s.setup = m.setup;
      s.seed = 17500 + idx++;
      check_backward(s);
    }
}

// Key tiles nobody sees (dk = dv = 0 exactly) and first tiles masked for some rows only.
TEST_P(FlashBackward, FullyMaskedFirstTile) {
  Tally tally("FlashBackward.FullyMaskedFirstTile");
  const std::vector<cases::AttentionCase> shapes = cases::first_tile_shapes();  // the first two
  uint64_t idx = 0;
  for (const MaskSpec& m : first_tile_masks()) {
    Spec s = sized(shapes[idx % 2]);
    s.name = m.name;
    s.setup = m.setup;
    s.seed = 17700 + idx++;
    check_backward(s);
  }
}

TEST_P(FlashBackward, NonFiniteInputsPoisonExactlyTheGradientsThatReadThem) {
  Tally tally("FlashBackward.NonFiniteInputs");
  const std::vector<cases::AttentionCase> shapes = cases::non_finite_shapes();
  uint64_t idx = 0;
  for (const Plant& p : plants()) {
    Spec s = sized(shapes[idx % shapes.size()]);
    s.name = p.name;
    s.setup = p.setup;
    s.seed = 18000 + idx++;
    check_backward(s);
  }
}

// `qkv bench attention`'s cases that it times backward, at 1/64 of their lengths.
TEST_P(FlashBackward, BenchmarkCases) {
  Tally tally("FlashBackward.BenchmarkCases");
  uint64_t idx = 0;
  for (const cases::AttentionCase& c : cases::bench_cases()) {
    if (!c.backward) continue;
    Spec s = sized(cases::scaled(c, kBenchScale));
    s.name = c.name;
    s.setup = causal(c.causal);
    s.seed = 20100 + idx++;
    check_backward(s);
  }
}

TEST_P(FlashBackward, ThreadCountsGiveTheSameBits) {
  if (on_cuda())
    GTEST_SKIP() << "Path::cuda has no thread count; its launches depend on the shape alone "
                    "(CudaF32Emulated.ReverseOrderGivesTheSameBits checks their determinism)";
  const std::vector<Spec> specs = [] {
    std::vector<Spec> v(3);
    v[0].setup = both(bool_mask_ls(0.7), causal(Causal::bottom_right));
    v[0].B = 2, v[0].Hq = 4, v[0].Hkv = 2, v[0].L = 129, v[0].S = 257, v[0].Dk = 64, v[0].Dv = 32;
    v[1].B = 1, v[1].Hq = 8, v[1].Hkv = 1, v[1].L = 97, v[1].S = 300, v[1].Dk = 21, v[1].Dv = 59;
    v[2].B = 1, v[2].Hq = 8, v[2].Hkv = 2, v[2].L = 1, v[2].S = 3001, v[2].Dk = 64, v[2].Dv = 64;
    for (size_t i = 0; i < v.size(); ++i) v[i].seed = 19000 + i;
    return v;
  }();
  for (const Spec& s : specs) {
    const Case c = build(s);
    SCOPED_TRACE(c.describe());
    const std::vector<double> g = dout_of(c);
    const AttentionGrads one = run_fused_backward(c, g, 1);
    for (int threads : {2, 3, 8}) {
      SCOPED_TRACE("threads " + std::to_string(threads));
      const AttentionGrads many = run_fused_backward(c, g, threads);
      EXPECT_TRUE(same_bits("dq", many.dq, one.dq));
      EXPECT_TRUE(same_bits("dk", many.dk, one.dk));
      EXPECT_TRUE(same_bits("dv", many.dv, one.dv));
      EXPECT_EQ(std::memcmp(&many.dscale, &one.dscale, sizeof(double)), 0)
          << "dscale " << many.dscale << " vs " << one.dscale;
    }
  }
}

TEST_P(FlashBackward, StridedViewsGiveTheBitsOfContiguousCopies) {
  const Case c = strided_case();
  SCOPED_TRACE(c.describe());
  const AttentionOptions o = options_for(c, Path::fused);
  const std::vector<double> g = dout_of(c);
  const AttentionGrads want = run_fused_backward(c, g);
  EXPECT_TRUE(backward_matches(c, g, want));
  for (auto view : {blhd_view, bhdl_view}) {
    const AttentionGrads got =
        qkv::attention_backward(view(g, c.out_shape()), view(c.q, c.q_shape()),
                                view(c.k, c.k_shape()), view(c.v, c.v_shape()), o);
    EXPECT_TRUE(same_bits("dq", got.dq, want.dq));
    EXPECT_TRUE(same_bits("dk", got.dk, want.dk));
    EXPECT_TRUE(same_bits("dv", got.dv, want.dv));
    EXPECT_EQ(got.dscale, want.dscale);
  }
}

}  // namespace
}  // namespace qkv_test::flash
