// tests/kernels/cpu/flash_forward_test.cpp — the fused fp32 attention forward (Path::fused) against
// the float64 reference: the sweep, bitwise identities, what the fused path refuses, the checker.
// The tolerance rule and the harness: flash_test_support.h.
//
// The sweep follows issue 3: L, S ∈ {1, 2, 17, 97, 267, 1025} and the tile sizes 64, 128, 256 ± 1;
// D ∈ {1, 8, 21, 32, 59, 64, 111, 128, 203, 256}; Dv ≠ Dk; GQA ratios 1, 2, 4, 8 and Hkv = 1; every
// mask kind and broadcast shape; fully masked first tiles and rows; large logits; L = 0, S = 0;
// the decode shape; negative and zero scales; NaN and ∞ inputs; strided views; thread counts.
// Combinations, not the Cartesian product: the float64 reference runs at ~3 GFLOP/s. The shapes
// are the case registry's (bench/cases/attention_cases.h), and so are `qkv bench attention`'s
// cases, checked here at 1/64 of their lengths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/flash_test_support.h"
#include "simd_targets.h"

namespace qkv_test::flash {
namespace {

// ---- forward ----

// Each test runs once per SIMD target and once on Path::cuda (Cuda/FlashForward.*/cuda: the GPU,
// or without one the CUDA kernels' own source on the SIMT emulator).
QKV_PER_FUSED_PATH(FlashForward);

// L × S over the awkward sizes and the tile boundaries 64, 128, 256 ± 1, both causal alignments,
// with the head dims, Dv ≠ Dk and GQA ratios rotating through the combinations
// (cases::length_sweep: heads, then head dims, shrink on big L·S).
TEST_P(FlashForward, SequenceLengthsAroundTiles) {
  Tally tally("FlashForward.SequenceLengthsAroundTiles");
  uint64_t idx = 0;
  for (const cases::AttentionCase& c : cases::length_sweep()) {
    Spec s = sized(c);
    s.seed = 100 + idx++;
    s.setup = causal(c.causal);
    s.name = std::string("causal ") + causal_name(c.causal);
    check_forward(s);
  }
}

// Every head dim, with Dv = Dk and Dv ≠ Dk, on shapes that cross tiles, GQA rotating.
TEST_P(FlashForward, HeadDims) {
  Tally tally("FlashForward.HeadDims");
  uint64_t idx = 0;
  for (const cases::AttentionCase& shape : cases::head_dim_sweep()) {
    Spec s = sized(shape);
    s.seed = 1000 + idx;
    switch (idx % 3) {
      case 0:
        s.name = "none";
        break;
      case 1:
        s.name = "causal bottom_right";
        s.setup = causal(Causal::bottom_right);
        break;
      default:
        s.name = "key_lengths {S-3, 64}";
        s.setup = key_lengths([](const Case& c, int64_t b) { return b == 0 ? c.S - 3 : 64; });
    }
    check_forward(s);
    ++idx;
  }
}

// GQA ratios 1, 2, 4, 8 with one, two and three kv heads (Hkv = 1: multi-query).
TEST_P(FlashForward, GroupedQueryHeads) {
  Tally tally("FlashForward.GroupedQueryHeads");
  uint64_t idx = 0;
  for (const cases::AttentionCase& shape : cases::gqa_sweep()) {
    Spec s = sized(shape);
    s.name = idx % 2 ? "causal top_left" : "bool [B,Hq,L,S] p=0.8";
    s.setup = idx % 2 ? causal(Causal::top_left) : CaseSetup([](Case& c) {
      set_bool_mask(c, {c.B, c.Hq, c.L, c.S}, 0.8, 5);
    });
    s.seed = 2000 + idx++;
    check_forward(s);
  }
}

// Every mask kind and broadcast shape, on shapes around the tiles, with GQA and Dv ≠ Dk.
TEST_P(FlashForward, Masks) {
  Tally tally("FlashForward.Masks");
  const std::vector<cases::AttentionCase> shapes = cases::mask_shapes();
  uint64_t idx = 0;
  for (const MaskSpec& m : mask_specs())
    for (const cases::AttentionCase& c : shapes) {
      Spec s = sized(c);
      s.name = m.name;
      s.setup = m.setup;
      s.seed = 3000 + idx++;
      check_forward(s);
    }
}

TEST_P(FlashForward, FullyMaskedFirstTile) {
  Tally tally("FlashForward.FullyMaskedFirstTile");
  const std::vector<cases::AttentionCase> shapes = cases::first_tile_shapes();
  uint64_t idx = 0;
  for (const MaskSpec& m : first_tile_masks())
    for (std::size_t shape = 0; shape < shapes.size(); ++shape) {
      Spec s = sized(shapes[shape]);
      s.name = m.name;
      s.setup = m.setup;
      if (shape == 2) s.input_scale = 5;  // large logits too
      s.seed = 4000 + idx++;
      check_forward(s);
    }
}

// Rows with nothing to attend to: out exactly 0, logsumexp −∞ (the rule's pattern checks).
TEST_P(FlashForward, EveryRowFullyMasked) {
  Tally tally("FlashForward.EveryRowFullyMasked");
  const std::vector<MaskSpec> masks = {
      {"bool all false [B,Hq,L,S]",
       bool_mask_where([](int64_t, int64_t, int64_t, int64_t) { return false; })},
      {"float all -inf [L,S]", float_mask_ls([](int64_t, int64_t) { return -kInf; })},
      {"key_lengths all 0", key_lengths([](const Case&, int64_t) { return 0; })},
      {"bool [B,1,1,S] all false + top_left", both(
                                                  [](Case& c) {
                                                    set_bool_mask(c, {c.B, 1, 1, c.S}, 0.0, 1);
                                                  },
                                                  causal(Causal::top_left))},
      {"bottom_right, L > S: the first L - S rows see nothing; rest masked by key_lengths 0",
       both(causal(Causal::bottom_right),
            key_lengths([](const Case& c, int64_t b) { return b == 0 ? 0 : c.S; }))},
  };
  const std::vector<cases::AttentionCase> shapes = cases::masked_row_shapes();
  uint64_t idx = 0;
  for (const MaskSpec& m : masks)
    for (const cases::AttentionCase& c : shapes) {
      Spec s = sized(c);
      s.name = m.name;
      s.setup = m.setup;
      s.seed = 5000 + idx++;
      check_forward(s);
    }
}

// Inputs ×5: logits of tens to hundreds, where an unshifted exp overflows.
TEST_P(FlashForward, LargeLogits) {
  Tally tally("FlashForward.LargeLogits");
  const std::vector<cases::AttentionCase> shapes = cases::large_logit_shapes();
  const MaskSpec masks[] = {{"none", nullptr},
                            {"causal top_left", causal(Causal::top_left)},
                            {"bool [L,S] p=0.5", bool_mask_ls(0.5)}};
  uint64_t idx = 0;
  for (Score score : {Score::scaled_dot, Score::dot})
    for (const cases::AttentionCase& c : shapes)
      for (const MaskSpec& m : masks) {
        Spec s = sized(c);
        s.name = std::string(m.name) + " score " + score_name(score);
        s.setup = m.setup;
        s.score = score;
        s.input_scale = 5;
        s.seed = 6000 + idx++;
        check_forward(s);
      }
}

// Negative, zero and unusual scales; the dot score's default scale of 1.
TEST_P(FlashForward, Scales) {
  Tally tally("FlashForward.Scales");
  const std::vector<cases::AttentionCase> shapes = cases::scale_shapes();
  uint64_t idx = 0;
  for (double scale : {-0.3, 0.0, -1.0, 2.5, 1e-3})
    for (int shape = 0; shape < 2; ++shape) {
      Spec s = sized(shapes[shape]);
      s.scale = scale;
      s.score = shape ? Score::dot : Score::scaled_dot;
      s.name = shape ? "bool [L,S] p=0.6, score dot" : "causal bottom_right";
      s.setup = shape ? bool_mask_ls(0.6) : causal(Causal::bottom_right);
      s.seed = 7000 + idx++;
      check_forward(s);
    }
  Spec s;
  s.name = "dot, default scale";
  s.score = Score::dot;
  s.B = 1, s.Hq = 2, s.Hkv = 2, s.L = 65, s.S = 129, s.Dk = 32, s.Dv = 32, s.seed = 7100;
  check_forward(s);
}

// L = 0 (nothing to compute) and S = 0 (every row sees nothing: out 0, logsumexp −∞).
TEST_P(FlashForward, EmptyShapes) {
  Tally tally("FlashForward.EmptyShapes");
  uint64_t idx = 0;
  for (const cases::AttentionCase& c : cases::empty_shapes())
    for (int mask = 0; mask < 3; ++mask) {
      Spec s = sized(c);
      s.name = mask == 0 ? "none" : mask == 1 ? "causal bottom_right" : "bool [L,S] p=0.5";
      s.setup = mask == 0 ? nullptr : mask == 1 ? causal(Causal::bottom_right) : bool_mask_ls(0.5);
      s.seed = 8000 + idx++;
      check_forward(s);
    }
}

// Decoding: one query (or a few) against thousands of keys, GQA; the kernel may split the keys
// across threads and merge the partial logsumexps, so splits that see nothing must merge cleanly.
TEST_P(FlashForward, DecodeLongKeys) {
  Tally tally("FlashForward.DecodeLongKeys");
  const std::vector<MaskSpec> masks = {
      {"none", nullptr},
      {"causal bottom_right (sees every key)", causal(Causal::bottom_right)},
      {"causal top_left (sees key 0 only)", causal(Causal::top_left)},
      {"key_lengths {S - 501}", key_lengths([](const Case& c, int64_t) { return c.S - 501; })},
      {"bool [B,Hq,L,S]: keys 0..1999 masked",
       bool_mask_where([](int64_t, int64_t, int64_t, int64_t j) { return j >= 2000; })},
      {"bool [B,Hq,L,S] p=0.02",
       [](Case& c) {
         set_bool_mask(c, {c.B, c.Hq, c.L, c.S}, 0.02, 3);
       }},
      {"float32 [B,1,1,S] -inf p=0.5",
       [](Case& c) {
         set_float_mask(c, {c.B, 1, 1, c.S}, 0.5, DType::f32, 4);
       }},
  };
  const std::vector<cases::AttentionCase> shapes = cases::decode_shapes();
  uint64_t idx = 0;
  for (const MaskSpec& m : masks)
    for (const cases::AttentionCase& c : shapes) {
      Spec s = sized(c);
      s.name = m.name;
      s.setup = m.setup;
      s.seed = 9000 + idx++;
      check_forward(s);
    }
  Spec s;  // one batch entry sees nothing at all, the other everything
  s.name = "key_lengths {0, S}";
  s.setup = key_lengths([](const Case& c, int64_t b) { return b == 0 ? 0 : c.S; });
  s.B = 2, s.Hq = 8, s.Hkv = 2, s.L = 1, s.S = 3001, s.Dk = 64, s.Dv = 64, s.seed = 9100;
  check_forward(s);
}

TEST_P(FlashForward, NonFiniteInputsPoisonExactlyTheRowsThatReadThem) {
  Tally tally("FlashForward.NonFiniteInputs");
  uint64_t idx = 0;
  const std::vector<cases::AttentionCase> shapes = cases::non_finite_shapes();
  for (const Plant& p : plants())
    for (const cases::AttentionCase& c : shapes) {
      Spec s = sized(c);
      s.name = p.name;
      s.setup = p.setup;
      s.seed = 10000 + idx++;
      check_forward(s);
    }
}

// `qkv bench attention`'s cases, the shapes it times, at 1/64 of their lengths.
TEST_P(FlashForward, BenchmarkCases) {
  Tally tally("FlashForward.BenchmarkCases");
  uint64_t idx = 0;
  for (const cases::AttentionCase& c : cases::bench_cases()) {
    Spec s = sized(cases::scaled(c, kBenchScale));
    s.name = c.name;
    s.setup = causal(c.causal);
    s.seed = 20000 + idx++;
    check_forward(s);
  }
}

// A NaN in a float mask is a NaN logit: its row is NaN, as in the reference.
TEST_P(FlashForward, NanInFloatMaskPoisonsItsRow) {
  Tally tally("FlashForward.NanInFloatMask");
  Spec s;
  s.name = "float32 [L,S] with NaN at [5, 9] and [100, 290]";
  s.setup = [](Case& c) {
    set_float_mask(c, {c.L, c.S}, 0.1, DType::f32, 11);
    c.mask[static_cast<size_t>(5 * c.S + 9)] = kNaN;
    c.mask[static_cast<size_t>(100 * c.S + 290)] = kNaN;
  };
  s.B = 1, s.Hq = 2, s.Hkv = 1, s.L = 130, s.S = 300, s.Dk = 64, s.Dv = 64, s.seed = 10500;
  check_forward(s);
}

// ---- bitwise identities ----

// give the bits of the contiguous copies (and the rule holds for them).
TEST_P(FlashForward, StridedViewsGiveTheBitsOfContiguousCopies) {
  const Case c = strided_case();
  SCOPED_TRACE(c.describe());
  const AttentionOptions o = options_for(c, Path::fused);
  const AttentionResult want = run_fused(c);
  EXPECT_TRUE(forward_matches(c, want));
  using View = std::function<Tensor(const std::vector<double>&, const Shape&)>;
  const std::pair<const char*, View> views[] = {{"[B,L,H,D].transpose(1,2)", blhd_view},
                                                {"[B,H,D,L].transpose(2,3)", bhdl_view}};
  for (const auto& [name, view] : views) {
    SCOPED_TRACE(name);
    const Tensor q = view(c.q, c.q_shape()), k = view(c.k, c.k_shape()), v = view(c.v, c.v_shape());
    ASSERT_FALSE(q.is_contiguous());
    const AttentionResult got = qkv::attention(q, k, v, o);
    EXPECT_TRUE(same_bits("out", got.out, want.out));
    EXPECT_TRUE(same_bits("logsumexp", got.logsumexp, want.logsumexp));
    // Mixed: only q strided.
    const AttentionResult mixed = qkv::attention(q, tensor_of(c.k_shape(), c.k, DType::f32),
                                                 tensor_of(c.v_shape(), c.v, DType::f32), o);
    EXPECT_TRUE(same_bits("out (q strided only)", mixed.out, want.out));
  }
  // Rank 3: [L, H, D] memory viewed as [H, L, D].
  Spec s3;
  s3.B = 1, s3.Hq = 4, s3.Hkv = 2, s3.L = 65, s3.S = 129, s3.Dk = 32, s3.Dv = 32, s3.seed = 11001;
  const Case c3 = build(s3);
  auto rank3 = [](const std::vector<double>& x, const Shape& s4) {
    // s4 = [1, H, L, D]; store [L, H, D] and view [H, L, D].
    std::vector<float> lhd(x.size());
    for (int64_t h = 0; h < s4[1]; ++h)
      for (int64_t l = 0; l < s4[2]; ++l)
        for (int64_t d = 0; d < s4[3]; ++d)
          lhd[static_cast<size_t>((l * s4[1] + h) * s4[3] + d)] =
              static_cast<float>(x[static_cast<size_t>((h * s4[2] + l) * s4[3] + d)]);
    return Tensor::from({s4[2], s4[1], s4[3]}, lhd).transpose(0, 1);
  };
  const AttentionOptions o3 = options_for(c3, Path::fused);
  const AttentionResult r3 = qkv::attention(rank3(c3.q, c3.q_shape()), rank3(c3.k, c3.k_shape()),
                                            rank3(c3.v, c3.v_shape()), o3);
  const AttentionResult r4 = run_fused(c3);
  EXPECT_TRUE(same_bits("rank-3 strided out", r3.out, r4.out.reshape({4, 65, 32})));
  EXPECT_TRUE(same_bits("rank-3 strided logsumexp", r3.logsumexp, r4.logsumexp.reshape({4, 65})));
}

// A strided mask (a transposed view) reads like its contiguous copy.
TEST_P(FlashForward, StridedMaskGivesTheBitsOfItsContiguousCopy) {
  Spec s;
  s.setup = bool_mask_ls(0.6);
  s.B = 1, s.Hq = 2, s.Hkv = 1, s.L = 97, s.S = 130, s.Dk = 32, s.Dv = 32, s.seed = 11100;
  const Case c = build(s);
  SCOPED_TRACE(c.describe());
  AttentionOptions o = options_for(c, Path::fused);
  const AttentionResult want = run_fused(c);
  std::vector<double> sl(c.mask.size());
  for (int64_t i = 0; i < c.L; ++i)
    for (int64_t j = 0; j < c.S; ++j)
      sl[static_cast<size_t>(j * c.L + i)] = c.mask[static_cast<size_t>(i * c.S + j)];
  o.mask = tensor_of({c.S, c.L}, sl, DType::b8).transpose(0, 1);
  const AttentionResult got = qkv::attention(tensor_of(c.q_shape(), c.q, DType::f32),
                                             tensor_of(c.k_shape(), c.k, DType::f32),
                                             tensor_of(c.v_shape(), c.v, DType::f32), o);
  EXPECT_TRUE(same_bits("out", got.out, want.out));
  EXPECT_TRUE(same_bits("logsumexp", got.logsumexp, want.logsumexp));
}

// Rank-2 [L, D] and rank-3 [H, L, D] inputs give rank-2 and rank-3 results with the bits of the
// rank-4 problem.
TEST_P(FlashForward, RanksTwoAndThree) {
  Spec s;
  s.setup = causal(Causal::top_left);
  s.B = 1, s.Hq = 1, s.Hkv = 1, s.L = 129, s.S = 97, s.Dk = 21, s.Dv = 8, s.seed = 11200;
  const Case c = build(s);
  SCOPED_TRACE(c.describe());
  const AttentionResult r4 = run_fused(c);
  const AttentionOptions o = options_for(c, Path::fused);
  const AttentionResult r2 = qkv::attention(tensor_of({c.L, c.Dk}, c.q, DType::f32),
                                            tensor_of({c.S, c.Dk}, c.k, DType::f32),
                                            tensor_of({c.S, c.Dv}, c.v, DType::f32), o);
  EXPECT_TRUE(same_bits("rank-2 out", r2.out, r4.out.reshape({c.L, c.Dv})));
  EXPECT_TRUE(same_bits("rank-2 logsumexp", r2.logsumexp, r4.logsumexp.reshape({c.L})));
  const AttentionResult r3 = qkv::attention(tensor_of({1, c.L, c.Dk}, c.q, DType::f32),
                                            tensor_of({1, c.S, c.Dk}, c.k, DType::f32),
                                            tensor_of({1, c.S, c.Dv}, c.v, DType::f32), o);
  EXPECT_TRUE(same_bits("rank-3 out", r3.out, r4.out.reshape({1, c.L, c.Dv})));
}

// Results are bitwise identical for any thread count (docs/CONVENTIONS.md §3), including the decode
// shape where the keys may be split across threads.
TEST_P(FlashForward, ThreadCountsGiveTheSameBits) {
  if (on_cuda())
    GTEST_SKIP() << "Path::cuda has no thread count; its launches depend on the shape alone "
                    "(CudaF32Emulated.ReverseOrderGivesTheSameBits checks their determinism)";
  const std::vector<Spec> specs = [] {
    std::vector<Spec> v(5);
    v[0].name = "none";
    v[0].B = 2, v[0].Hq = 4, v[0].Hkv = 2, v[0].L = 129, v[0].S = 257, v[0].Dk = 64, v[0].Dv = 64;
    v[1].name = "bool [L,S] + top_left";
    v[1].setup = both(bool_mask_ls(0.7), causal(Causal::top_left));
    v[1].B = 1, v[1].Hq = 8, v[1].Hkv = 2, v[1].L = 267, v[1].S = 97, v[1].Dk = 21, v[1].Dv = 59;
    v[2].name = "decode";
    v[2].B = 1, v[2].Hq = 32, v[2].Hkv = 8, v[2].L = 1, v[2].S = 3001, v[2].Dk = 128, v[2].Dv = 128;
    v[3].name = "decode, one head, key_lengths";
    v[3].setup = key_lengths([](const Case& c, int64_t) { return c.S - 700; });
    v[3].B = 1, v[3].Hq = 1, v[3].Hkv = 1, v[3].L = 1, v[3].S = 4099, v[3].Dk = 64, v[3].Dv = 64;
    v[4].name = "causal bottom_right, long";
    v[4].setup = causal(Causal::bottom_right);
    v[4].B = 1, v[4].Hq = 2, v[4].Hkv = 1, v[4].L = 1025, v[4].S = 1025, v[4].Dk = 32, v[4].Dv = 32;
    for (size_t i = 0; i < v.size(); ++i) v[i].seed = 12000 + i;
    return v;
  }();
  for (const Spec& s : specs) {
    const Case c = build(s);
    SCOPED_TRACE(label_of(s, c));
    const AttentionResult one = run_fused(c, 1);
    for (int threads : {2, 3, 4, 8}) {
      SCOPED_TRACE("threads " + std::to_string(threads));
      const AttentionResult many = run_fused(c, threads);
      EXPECT_TRUE(same_bits("out", many.out, one.out));
      EXPECT_TRUE(same_bits("logsumexp", many.logsumexp, one.logsumexp));
    }
  }
}

// Path::automatic takes the fused path where it applies (same bits), and falls back to the
// reference where it does not (weights asked for) instead of failing.
TEST_P(FlashForward, AutomaticPathPicksFusedWhereItApplies) {
  if (on_cuda()) GTEST_SKIP() << "Path::automatic never picks the GPU for host tensors";
  Spec s;
  s.setup = bool_mask_ls(0.7);
  s.B = 1, s.Hq = 4, s.Hkv = 2, s.L = 97, s.S = 129, s.Dk = 64, s.Dv = 64, s.seed = 13000;
  const Case c = build(s);
  SCOPED_TRACE(c.describe());
  const AttentionResult fused = run_fused(c);
  const AttentionResult automatic = qkv::attention(
      tensor_of(c.q_shape(), c.q, DType::f32), tensor_of(c.k_shape(), c.k, DType::f32),
      tensor_of(c.v_shape(), c.v, DType::f32), options_for(c, Path::automatic));
  EXPECT_TRUE(same_bits("out", automatic.out, fused.out));
  EXPECT_TRUE(same_bits("logsumexp", automatic.logsumexp, fused.logsumexp));

  AttentionOptions o = options_for(c, Path::automatic);
  o.need_weights = true;
  const AttentionResult with_weights = qkv::attention(tensor_of(c.q_shape(), c.q, DType::f32),
                                                      tensor_of(c.k_shape(), c.k, DType::f32),
                                                      tensor_of(c.v_shape(), c.v, DType::f32), o);
  EXPECT_TRUE(with_weights.weights.defined());
  EXPECT_TRUE(forward_matches(c, with_weights));

  // need_logsumexp = false: the same out, no logsumexp.
  AttentionOptions no_lse = options_for(c, Path::fused);
  no_lse.need_logsumexp = false;
  const AttentionResult bare = qkv::attention(tensor_of(c.q_shape(), c.q, DType::f32),
                                              tensor_of(c.k_shape(), c.k, DType::f32),
                                              tensor_of(c.v_shape(), c.v, DType::f32), no_lse);
  EXPECT_TRUE(same_bits("out without logsumexp", bare.out, fused.out));
  EXPECT_FALSE(bare.logsumexp.defined());
}

// ---- what the fused path refuses ----

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// `call` must throw qkv::Error (a usage error) whose message names one of `words`.
void expect_refusal(const std::string& what, const std::function<void()>& call,
                    const std::vector<std::string>& words) {
  SCOPED_TRACE(what);
  try {
    call();
    ADD_FAILURE() << "Path::fused accepted " << what;
  } catch (const qkv::Error& e) {
    EXPECT_EQ(e.kind(), qkv::Error::Kind::invalid_argument) << e.what();
    const std::string msg = lower(e.what());
    bool named = false;
    for (const std::string& w : words) named = named || msg.find(lower(w)) != std::string::npos;
    EXPECT_TRUE(named) << "the message does not say why: \"" << e.what() << "\"";
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw something other than qkv::Error: " << e.what();
  }
}

TEST(FlashErrors, FusedPathRefusesWhatItDoesNotCover) {
  for (Score score : every_score()) {
    Case c = make_case(score, 1, 2, 1, 5, 7, 8, 8, 8, 14000);
    round_to_float(c);
    AttentionOptions o = options_of(c, DType::f32, Path::fused);
    o.need_weights = o.need_scores = false;
    const Tensor q = tensor_of(c.q_shape(), c.q, DType::f32),
                 k = tensor_of(c.k_shape(), c.k, DType::f32),
                 v = tensor_of(c.v_shape(), c.v, DType::f32);
    const Tensor dout = tensor_of(c.out_shape(), dout_of(c), DType::f32);
    const std::string name(qkv::to_string(score));
    if (score == Score::scaled_dot || score == Score::dot) {
      EXPECT_NO_THROW(qkv::attention(q, k, v, o)) << name;
      EXPECT_NO_THROW(qkv::attention_backward(dout, q, k, v, o)) << name;
    } else {
      expect_refusal("score " + name, [&] { qkv::attention(q, k, v, o); }, {name, "score"});
      expect_refusal("score " + name + " (backward)",
                     [&] { qkv::attention_backward(dout, q, k, v, o); }, {name, "score"});
    }
  }

  Case c = make_case(Score::scaled_dot, 1, 2, 1, 5, 7, 8, 8, 8, 14001);
  round_to_float(c);
  const AttentionOptions o = options_for(c, Path::fused);
  auto t = [&](const std::vector<double>& x, const Shape& s, DType dt) {
    return tensor_of(s, x, dt);
  };
  const Tensor q32 = t(c.q, c.q_shape(), DType::f32), k32 = t(c.k, c.k_shape(), DType::f32),
               v32 = t(c.v, c.v_shape(), DType::f32);
  const Tensor q64 = t(c.q, c.q_shape(), DType::f64), k64 = t(c.k, c.k_shape(), DType::f64),
               v64 = t(c.v, c.v_shape(), DType::f64);
  const std::vector<double> g = dout_of(c);
  const Tensor d32 = t(g, c.out_shape(), DType::f32), d64 = t(g, c.out_shape(), DType::f64);
  expect_refusal("float64 q, k, v", [&] { qkv::attention(q64, k64, v64, o); }, {"float64"});
  expect_refusal("float64 k only", [&] { qkv::attention(q32, k64, v32, o); }, {"float64"});
  expect_refusal("float64 v only", [&] { qkv::attention(q32, k32, v64, o); }, {"float64"});
  expect_refusal("float64 (backward)", [&] { qkv::attention_backward(d64, q64, k64, v64, o); },
                 {"float64"});
  AttentionOptions none = o;
  none.normalize = qkv::Normalize::none;
  expect_refusal("normalize none", [&] { qkv::attention(q32, k32, v32, none); },
                 {"normalize", "none"});
  expect_refusal("normalize none (backward)",
                 [&] { qkv::attention_backward(d32, q32, k32, v32, none); }, {"normalize", "none"});
  AttentionOptions weights = o;
  weights.need_weights = true;
  expect_refusal("need_weights", [&] { qkv::attention(q32, k32, v32, weights); }, {"weights"});
  AttentionOptions scores = o;
  scores.need_scores = true;
  expect_refusal("need_scores", [&] { qkv::attention(q32, k32, v32, scores); }, {"scores"});
}

// ---- the checker has teeth ----

// The rule accepts the fused result and rejects it with one element off by 1e-4, a NaN, a
// nonzero where the reference has an exact 0, or a finite logsumexp where it has −∞.
TEST(FlashChecker, ForwardCheckHasTeeth) {
  const Case c = build(teeth_spec());
  SCOPED_TRACE(c.describe());
  const AttentionResult x = run_fused(c);
  const AttentionResult r = run_reference(c);
  const NaiveForward n = naive_forward<float>(c);
  const std::vector<double> rout = values_of(r.out), rlse = values_of(r.logsumexp);
  const Blind blind = blind_of(c);
  auto out_ok = [&](const Tensor& t) {
    return within_rule("out", t, c.out_shape(), n.out, rout,
                       {.factor = kOutputFactor, .zero_rows = &blind.rows});
  };
  auto lse_ok = [&](const Tensor& t) {
    return within_rule("logsumexp", t, c.lse_shape(), n.lse, rlse, {.factor = kOutputFactor});
  };
  ASSERT_TRUE(out_ok(x.out));
  ASSERT_TRUE(lse_ok(x.logsumexp));
  // Batch 0 sees nothing (key_lengths 0): its rows are the first half.
  const int64_t half_out = x.out.numel() / 2, half_lse = x.logsumexp.numel() / 2;
  auto perturbed = [](const Tensor& t, int64_t i, float value, bool add) {
    Tensor p = t.clone();
    float* d = p.data<float>();
    d[i] = add ? d[i] + value : value;
    return p;
  };
  EXPECT_FALSE(out_ok(perturbed(x.out, half_out + 5, 1e-4f, true)));
  EXPECT_FALSE(out_ok(perturbed(x.out, x.out.numel() - 1, -1e-4f, true)));
  EXPECT_FALSE(out_ok(perturbed(x.out, half_out + 7, kNaN, false)));
  EXPECT_FALSE(out_ok(perturbed(x.out, 3, 1e-30f, false)));  // a masked row must be exactly 0
  EXPECT_FALSE(lse_ok(perturbed(x.logsumexp, half_lse + 3, 1e-4f, true)));
  EXPECT_FALSE(lse_ok(perturbed(x.logsumexp, 0, -1e30f, false)));  // −∞ expected
  EXPECT_FALSE(lse_ok(perturbed(x.logsumexp, half_lse, kInf, false)));
}

}  // namespace
}  // namespace qkv_test::flash
