// tests/kernels/cuda/flash_f32_emulated_test.cpp — the float32 CUDA attention kernels
// (flash_f32_forward.cuh, flash_f32_backward.cuh), their own source run on the SIMT emulator,
// against the float64 reference by docs/CONVENTIONS.md §1.1's rule (the CPU kernels' harness,
// tests/kernels/cpu/flash_test_support.h): out and logsumexp within 2·max|N − R| + 1e-6, dq, dk,
// dv within 4·max|N − R| + 1e-6, NaN and ±∞ where R has them, exact zeros where nothing is seen.
//
// ReverseOrderGivesTheSameBits runs cases of every kernel variant twice, the second time with each
// block's fibers in reverse order, and wants the same bits: a missing __syncthreads would let a
// thread read a tile another has not yet written (or has overwritten). Shapes stay small
// (L, S ≤ 300): the emulator runs a block's 128 threads as fibers, one block after another, and
// most of its time goes into switching them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/emulated_kernels.h"
#include "kernels/cuda/flash_cuda_test_support.h"
#include "kernels/cuda/flash_f32_backward.cuh"
#include "kernels/cuda/flash_f32_forward.cuh"

namespace qkv_test::flash {
namespace {

using qkv::simt::Order;
using qkv_test::cuda::DeviceCase;
using qkv_test::cuda::Stored;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Options {
  bool q_blhd = false;    // q stored [B, L, Hq, Dk]
  bool out_blhd = false;  // out stored [B, L, Hq, Dv]
  bool backward = true;
  bool reverse = false;  // run again in reverse order: the same bits
  int launches = 0;      // where nonzero, how many launches the forward must make (2: split keys)
};

cuda::Forward forward_in(Order order, const DeviceCase& d, const Case& c, const Options& o) {
  qkv::simt::set_order(order);
  qkv::simt::counters() = {};
  cuda::Forward f = cuda::run_forward(qkv::cuda::kernel::f32::forward, d, c, o.out_blhd);
  qkv::simt::set_order(Order::forward);
  return f;
}

cuda::Backward backward_in(Order order, const DeviceCase& d, const Case& c, const cuda::Forward& f,
                           const std::vector<double>& g) {
  qkv::simt::set_order(order);
  cuda::Backward b = cuda::run_backward(qkv::cuda::kernel::f32::backward, d, c, f, g);
  qkv::simt::set_order(Order::forward);
  return b;
}

// dq, dk, dv by the rule (no ∂loss/∂scale: the kernels do not compute it).
::testing::AssertionResult grads_match(const Case& c, const std::vector<double>& g,
                                       const cuda::Backward& x) {
  const AttentionGrads r = run_reference_backward(c, g);
  const NaiveGrads n = naive_backward<float>(c, g);
  const Blind blind = blind_of(c);
  auto rule = [](const std::vector<char>& zeros) {
    return Rule{.factor = kGradFactor, .zero_rows = &zeros, .exact_non_finite = false};
  };
  if (auto ok = within_rule("dq", cuda::fetch(x.dq, c.q_shape()), c.q_shape(), n.dq,
                            values_of(r.dq), rule(blind.rows));
      !ok)
    return ok;
  if (auto ok = within_rule("dk", cuda::fetch(x.dk, c.k_shape()), c.k_shape(), n.dk,
                            values_of(r.dk), rule(blind.keys));
      !ok)
    return ok;
  return within_rule("dv", cuda::fetch(x.dv, c.v_shape()), c.v_shape(), n.dv, values_of(r.dv),
                     rule(blind.keys));
}

// One case: forward (and backward) checked by the rule; with o.reverse, run again in reverse
// order for the same bits.
void check(const Spec& s, const Options& o = {}) {
  const Case c = build(s);
  const std::string label = label_of(s, c);
  SCOPED_TRACE(label);
  Tally::begin_case(label);
  try {
    const DeviceCase d = cuda::upload(c, o.q_blhd);
    const cuda::Forward f = forward_in(Order::forward, d, c, o);
    if (o.launches) EXPECT_EQ(qkv::simt::counters().launches, o.launches);
    AttentionResult x;
    x.out = f.out_tensor(c);
    x.logsumexp = f.lse_tensor(c);
    EXPECT_TRUE(forward_matches(c, x));
    if (o.reverse) {
      const cuda::Forward fr = forward_in(Order::reverse, d, c, o);
      EXPECT_TRUE(same_bits(f.out.data, fr.out.data) && same_bits(f.lse, fr.lse) &&
                  same_bits(f.max, fr.max) && same_bits(f.log_sum, fr.log_sum))
          << "the forward's bits change with the order of the threads";
    }
    if (!o.backward) return;
    const std::vector<double> g = dout_of(c);
    SCOPED_TRACE("dout seed " + std::to_string(c.seed + 77));
    const cuda::Backward b = backward_in(Order::forward, d, c, f, g);
    EXPECT_TRUE(grads_match(c, g, b));
    if (o.reverse) {
      const cuda::Backward br = backward_in(Order::reverse, d, c, f, g);
      EXPECT_TRUE(same_bits(b.dq.data, br.dq.data) && same_bits(b.dk.data, br.dk.data) &&
                  same_bits(b.dv.data, br.dv.data))
          << "the backward's bits change with the order of the threads";
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw: " << e.what();
  }
}

Spec shape(const std::string& name, int64_t B, int64_t Hq, int64_t Hkv, int64_t L, int64_t S,
           int64_t Dk, int64_t Dv, uint64_t seed, CaseSetup setup = nullptr) {
  Spec s;
  s.name = name;
  s.B = B, s.Hq = Hq, s.Hkv = Hkv, s.L = L, s.S = S, s.Dk = Dk, s.Dv = Dv, s.seed = seed;
  s.setup = std::move(setup);
  return s;
}

// L and S around the tiles (16, 32, 64 rows or keys) and the awkward sizes, L ≠ S, causal in
// both alignments (bottom-right with L > S leaves the first rows blind).
TEST(CudaF32Emulated, SequenceLengthsAroundTiles) {
  Tally tally("CudaF32Emulated.SequenceLengthsAroundTiles");
  const int64_t sizes[][2] = {{1, 1},   {2, 17},   {17, 2},   {63, 65},
                              {65, 64}, {97, 130}, {130, 97}, {267, 64}};
  const Causal kinds[] = {Causal::none, Causal::top_left, Causal::bottom_right};
  uint64_t idx = 0;
  for (const auto& ls : sizes)
    for (Causal k : kinds) {
      if (ls[0] * ls[1] > 20000 && k != Causal::bottom_right) continue;
      check(shape(causal_name(k), 1, 2, 1, ls[0], ls[1], 21, 32, 100 + idx++, causal(k)));
    }
}

// Each tile variant (head dims ≤ 64, ≤ 128, ≤ 256) with Dv = Dk and Dv ≠ Dk.
TEST(CudaF32Emulated, HeadDims) {
  Tally tally("CudaF32Emulated.HeadDims");
  const int64_t dims[][2] = {{1, 1},    {8, 8},    {21, 64},   {64, 21},   {111, 111},
                             {128, 64}, {64, 128}, {203, 203}, {256, 256}, {256, 8}};
  uint64_t idx = 0;
  for (const auto& d : dims) {
    const bool big = d[0] > 128 || d[1] > 128;
    check(shape(idx % 2 ? "causal bottom_right" : "none", 1, 2, 2, big ? 33 : 70, big ? 40 : 97,
                d[0], d[1], 1000 + idx, idx % 2 ? causal(Causal::bottom_right) : nullptr));
    ++idx;
  }
}

// Grouped-query heads: 4 query heads on 2 and on 1 kv head, causal both ways, L ≠ S.
TEST(CudaF32Emulated, GroupedQueryHeads) {
  Tally tally("CudaF32Emulated.GroupedQueryHeads");
  check(shape("GQA 4/2 top_left", 2, 4, 2, 70, 97, 32, 32, 2000, causal(Causal::top_left)));
  check(shape("GQA 4/1 bottom_right", 1, 4, 1, 97, 70, 64, 48, 2001, causal(Causal::bottom_right)));
  check(shape("GQA 4/1 none", 1, 4, 1, 17, 130, 128, 128, 2002));
}

// Every mask kind and broadcast shape of the CPU sweep (keep and bias, −∞ in a bias, key lengths
// 0 and S − 1, combinations with causality) on one shape with GQA and Dv ≠ Dk.
TEST(CudaF32Emulated, Masks) {
  Tally tally("CudaF32Emulated.Masks");
  uint64_t idx = 0;
  for (const MaskSpec& m : mask_specs())
    check(shape(m.name, 2, 4, 2, 33, 70, 24, 16, 3000 + idx++, m.setup));
}

// Rows that see nothing: out and dq exactly 0, logsumexp −∞; keys nobody sees: dk, dv 0.
TEST(CudaF32Emulated, FullyMaskedRows) {
  Tally tally("CudaF32Emulated.FullyMaskedRows");
  check(shape("bool [B,Hq,L,S]: rows 3 and 40..47 masked, keys < 70 masked in head 1", 1, 2, 1, 65,
              97, 16, 16, 4000, bool_mask_where([](int64_t, int64_t h, int64_t i, int64_t j) {
                return i != 3 && (i < 40 || i >= 48) && (h != 1 || j >= 70);
              })));
  check(shape("float -inf on keys 0..63 of every row, finite after", 1, 2, 1, 33, 130, 16, 16, 4001,
              float_mask_ls([](int64_t i, int64_t j) {
                return j < 64 ? -kInf : 0.01 * ((i * 7 + j) % 13);
              })));
  check(shape("bottom_right with L > S: the first rows see nothing", 2, 2, 2, 97, 40, 16, 16, 4002,
              causal(Causal::bottom_right)));
  check(shape("key_lengths {0, 0}", 2, 2, 1, 17, 65, 16, 16, 4003,
              key_lengths([](const Case&, int64_t) { return int64_t{0}; })));
}

// Inputs ×5 (logits of tens; hundreds with the dot score's scale 1), where an unshifted exp
// overflows and the base-2 logits' rounding grows with |x|; and scales negative, zero and large.
TEST(CudaF32Emulated, LargeLogitsAndScales) {
  Tally tally("CudaF32Emulated.LargeLogitsAndScales");
  uint64_t idx = 0;
  for (Score score : {Score::scaled_dot, Score::dot})
    for (CaseSetup setup : {CaseSetup(nullptr), causal(Causal::top_left), bool_mask_ls(0.5)}) {
      Spec s = shape(std::string("x5 ") + score_name(score), 1, 2, 1, 65, 97, 64, 64, 7000 + idx++,
                     setup);
      s.score = score;
      s.input_scale = 5;
      check(s);
    }
  for (double scale : {-0.3, 0.0, 2.5}) {
    Spec s = shape("scale " + std::to_string(scale), 1, 4, 2, 40, 70, 21, 32, 7100 + idx++,
                   causal(Causal::bottom_right));
    s.scale = scale;
    check(s);
  }
}

// NaN and ∞ in q, k, v: the CPU sweep's plants (flash_test_support.h), forward and backward, on
// the smallest shapes that hold their positions (row 150 of head 3, key 250 of kv head 1).
TEST(CudaF32Emulated, NonFiniteInputsPoisonExactlyTheRowsThatReadThem) {
  Tally tally("CudaF32Emulated.NonFiniteInputs");
  uint64_t idx = 0;
  for (const Plant& p : plants()) {
    Spec s = shape("", 2, 4, 2, 152, 260, idx % 2 ? 21 : 8, idx % 2 ? 24 : 8, 0);
    s.name = p.name;
    s.setup = p.setup;
    s.seed = 10000 + idx++;
    check(s);
  }
}

// S = 0 (every row blind), L = 0 and B = 0 (nothing to do), and a head dim over the kernels'.
TEST(CudaF32Emulated, EmptyShapes) {
  Tally tally("CudaF32Emulated.EmptyShapes");
  check(shape("S = 0", 2, 2, 1, 17, 0, 8, 8, 5000));
  check(
      shape("S = 0 causal bottom_right", 1, 2, 2, 3, 0, 8, 8, 5001, causal(Causal::bottom_right)));
  check(shape("L = 0", 1, 2, 1, 0, 17, 8, 8, 5002));
  check(shape("B = 0", 0, 2, 1, 5, 17, 8, 8, 5003));
  const Case c = build(shape("Dk = 257", 1, 1, 1, 2, 2, 257, 8, 5004));
  const DeviceCase d = cuda::upload(c);
  try {
    cuda::run_forward(qkv::cuda::kernel::f32::forward, d, c);
    ADD_FAILURE() << "Dk = 257 was not refused";
  } catch (const qkv::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Dk = 257"), std::string::npos) << e.what();
  }
}

// Decoding: one query against 300 keys takes the split-KV path (2 launches: the splits and the
// combine), with splits that see nothing (top_left: key 0 only; key lengths) merging cleanly.
TEST(CudaF32Emulated, DecodeSplitsTheKeys) {
  Tally tally("CudaF32Emulated.DecodeSplitsTheKeys");
  const std::vector<MaskSpec> masks = {
      {"none", nullptr},
      {"causal top_left (sees key 0 only)", causal(Causal::top_left)},
      {"causal bottom_right (sees every key)", causal(Causal::bottom_right)},
      {"key_lengths {0, 150}",
       key_lengths([](const Case&, int64_t b) { return b == 0 ? int64_t{0} : int64_t{150}; })},
      {"bool [B,Hq,L,S]: keys < 200 masked",
       bool_mask_where([](int64_t, int64_t, int64_t, int64_t j) { return j >= 200; })},
      {"float32 [B,1,1,S] -inf p=0.5",
       [](Case& c) {
         set_float_mask(c, {c.B, 1, 1, c.S}, 0.5, DType::f32, 4);
       }},
  };
  Options o;
  o.launches = 2;
  uint64_t idx = 0;
  for (const MaskSpec& m : masks) {
    const bool wide = idx % 2;  // the ≤ 128 variant (32-key tiles) every other mask
    check(shape(m.name, 2, 4, 2, 1, 300, wide ? 100 : 64, wide ? 72 : 64, 6000 + idx++, m.setup),
          o);
  }
  // NaN in a value the query sees, in one split only; and NaN in a key of a split it does not see.
  check(shape("NaN in v[0,1,250,3], visible", 2, 4, 2, 1, 300, 64, 64, 6100,
              [](Case& c) { c.v[static_cast<size_t>((1 * c.S + 250) * c.Dv + 3)] = kNaN; }),
        o);
  check(shape("NaN in k[1,0,280,0] beyond key_lengths {300, 200}", 2, 4, 2, 1, 300, 64, 64, 6101,
              [](Case& c) {
                c.key_lengths = {300, 200};
                c.k[static_cast<size_t>(((1 * c.Hkv + 0) * c.S + 280) * c.Dk + 0)] = kNaN;
              }),
        o);
}

// q stored [B, L, Hq, Dk] and out written [B, L, Hq, Dv]: the same bits as contiguous arrays.
TEST(CudaF32Emulated, StridedQueryAndOutput) {
  Tally tally("CudaF32Emulated.StridedQueryAndOutput");
  const Spec s = shape("strided", 2, 4, 2, 97, 130, 64, 32, 11000,
                       both(bool_mask_ls(0.8), causal(Causal::bottom_right)));
  Options strided;
  strided.q_blhd = strided.out_blhd = true;
  check(s, strided);
  const Case c = build(s);
  const DeviceCase contiguous = cuda::upload(c), blhd = cuda::upload(c, true);
  const cuda::Forward a = forward_in(Order::forward, contiguous, c, {});
  const cuda::Forward b = forward_in(Order::forward, blhd, c, strided);
  std::vector<float> bo(a.out.data.size());
  const qkv::Tensor t = b.out_tensor(c);
  std::memcpy(bo.data(), t.data<float>(), bo.size() * sizeof(float));
  EXPECT_TRUE(same_bits(a.out.data, bo) && same_bits(a.lse, b.lse));
}

// Each tile variant, the split keys and GQA with masks, forward and backward, in both orders.
TEST(CudaF32Emulated, ReverseOrderGivesTheSameBits) {
  Tally tally("CudaF32Emulated.ReverseOrderGivesTheSameBits");
  Options o;
  o.reverse = true;
  check(shape("<= 64, bool [L,S] + top_left", 1, 4, 2, 70, 97, 64, 40, 12000,
              both(bool_mask_ls(0.7), causal(Causal::top_left))),
        o);
  check(shape("<= 128, float32 [B,Hq,L,S] -inf p=0.3", 1, 2, 1, 40, 70, 128, 100, 12001,
              [](Case& c) {
                set_float_mask(c, {c.B, c.Hq, c.L, c.S}, 0.3, DType::f32, c.seed + 7);
              }),
        o);
  check(
      shape("<= 256, bottom_right", 1, 2, 2, 20, 37, 203, 256, 12002, causal(Causal::bottom_right)),
      o);
  o.launches = 2;
  check(
      shape("split keys, key_lengths {0, 250}", 2, 4, 2, 1, 300, 64, 64, 12003,
            key_lengths([](const Case&, int64_t b) { return b == 0 ? int64_t{0} : int64_t{250}; })),
      o);
}

// The rule rejects the kernels' result moved a little: one element of out off by 1e-4, a NaN,
// a nonzero in a blind row, a finite logsumexp where it is −∞, and one element of each gradient
// off by its tolerance's worth.
TEST(CudaF32Emulated, CheckerRejectsAPerturbedResult) {
  const Case c = build(teeth_spec());  // batch 0 sees nothing (key_lengths 0)
  SCOPED_TRACE(c.describe());
  const DeviceCase d = cuda::upload(c);
  const cuda::Forward f = cuda::run_forward(qkv::cuda::kernel::f32::forward, d, c);
  const AttentionResult r = run_reference(c);
  const NaiveForward n = naive_forward<float>(c);
  const Blind blind = blind_of(c);
  auto out_ok = [&](const std::vector<float>& o) {
    return within_rule("out", Tensor::from(c.out_shape(), o), c.out_shape(), n.out,
                       values_of(r.out), {.factor = kOutputFactor, .zero_rows = &blind.rows});
  };
  auto lse_ok = [&](const std::vector<float>& l) {
    return within_rule("logsumexp", Tensor::from(c.lse_shape(), l), c.lse_shape(), n.lse,
                       values_of(r.logsumexp), {.factor = kOutputFactor});
  };
  ASSERT_TRUE(out_ok(f.out.data));
  ASSERT_TRUE(lse_ok(f.lse));
  const size_t half_out = f.out.data.size() / 2, half_lse = f.lse.size() / 2;
  auto moved = [](std::vector<float> x, size_t i, float value, bool add) {
    x[i] = add ? x[i] + value : value;
    return x;
  };
  EXPECT_FALSE(out_ok(moved(f.out.data, half_out + 5, 1e-4f, true)));
  EXPECT_FALSE(out_ok(moved(f.out.data, half_out + 7, kNaN, false)));
  EXPECT_FALSE(out_ok(moved(f.out.data, 3, 1e-30f, false)));
  EXPECT_FALSE(lse_ok(moved(f.lse, half_lse + 3, 1e-4f, true)));
  EXPECT_FALSE(lse_ok(moved(f.lse, 0, -1e30f, false)));

  const std::vector<double> g = dout_of(c);
  const cuda::Backward b = cuda::run_backward(qkv::cuda::kernel::f32::backward, d, c, f, g);
  ASSERT_TRUE(grads_match(c, g, b));
  cuda::Backward x = b;
  x.dk.data[x.dk.data.size() - 1] += 1e-3f;
  EXPECT_FALSE(grads_match(c, g, x));
  x = b;
  x.dq.data[x.dq.data.size() - 2] -= 1e-3f;
  EXPECT_FALSE(grads_match(c, g, x));
  x = b;
  x.dv.data[0] = 1e-30f;  // batch 0's keys: nobody sees them, dv must be exactly 0
  EXPECT_FALSE(grads_match(c, g, x));
}

// softmax_rows.cuh, the GPU backend's own kernel on the emulator: rows from a logsumexp alone —
// max = lse, log_sum = 0 — with a row that saw no key (−∞) and NaN kept in both; 300 rows take two
// blocks of 256 threads, the second one partly idle.
TEST(CudaSoftmaxRowsEmulated, RowsFromLogsumexpKeepEmptyAndNanRows) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  std::vector<float> lse(300);
  for (std::size_t i = 0; i < lse.size(); ++i) lse[i] = 0.25f * static_cast<float>(i) - 30.0f;
  lse[7] = -inf;
  lse[299] = std::numeric_limits<float>::quiet_NaN();
  lse[100] = -std::numeric_limits<float>::max();
  std::vector<float> max(lse.size() + 1, 7.0f), log_sum(lse.size() + 1, 7.0f);
  qkv::simt::counters() = {};
  qkv_test::emulated::rows_from_logsumexp(lse.data(), static_cast<int64_t>(lse.size()),
                                          {max.data(), log_sum.data()}, nullptr);
  EXPECT_EQ(qkv::simt::counters().launches, 1);
  EXPECT_EQ(qkv::simt::counters().blocks, 2);
  for (std::size_t i = 0; i < lse.size(); ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    if (i == 299) {
      EXPECT_TRUE(std::isnan(max[i]) && std::isnan(log_sum[i]));
      continue;
    }
    EXPECT_EQ(max[i], lse[i]);
    EXPECT_EQ(log_sum[i], i == 7 ? -inf : 0.0f);
  }
  EXPECT_EQ(max[300], 7.0f);  // nothing written past n
  EXPECT_EQ(log_sum[300], 7.0f);
}

}  // namespace
}  // namespace qkv_test::flash
