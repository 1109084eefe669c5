// The bf16 / fp16 tensor-core kernels (tensor_core_forward.cuh, tensor_core_backward.cuh) run
// on the CPU through the SIMT emulator, judged against the float64 reference of the same rounded
// inputs by flash-attention's rule (tensor_core_test_support.h), and half16.cuh's conversions bit
// for bit against their definitions.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/half.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/flash_test_support.h"
#include "kernels/cuda/half16.cuh"
#include "kernels/cuda/tensor_core_backward.cuh"
#include "kernels/cuda/tensor_core_forward.cuh"
#include "kernels/cuda/tensor_core_test_support.h"

namespace qkv::cuda {
namespace {

using tc_test::Case;

// ---- half16.cuh: the conversions, bit for bit ----

uint32_t bits_of(float x) { return kernel::float_bits(x); }
float float_of(uint32_t b) { return kernel::bits_float(b); }

// The float32 inputs of the sweeps: every upper half with low halves at and around the
// roundings' boundaries (bf16 rounds away 16 bits, fp16 13 of a normal and more of a subnormal),
// plus random ones.
std::vector<uint32_t> sweep_inputs() {
  const uint32_t lows[] = {0x0000, 0x0001, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x3000,
                           0x5000, 0x7FFF, 0x8000, 0x8001, 0xC000, 0xE000, 0xF000, 0xFFFF};
  std::vector<uint32_t> v;
  std::mt19937 rng(7);
  for (uint32_t hi = 0; hi < 0x10000u; ++hi) {
    for (uint32_t lo : lows) v.push_back(hi << 16 | lo);
    v.push_back(hi << 16 | (rng() & 0xFFFFu));
  }
  return v;
}

// bf16: kernels/cpu/bf16.h's to_bf16 wherever its result is normal, zero of a zero, ±∞ or NaN;
// where to_bf16 flushes a subnormal result, half16.cuh keeps it: the nearest multiple of 2⁻¹³³
// (ties to even), computed here in float64.
TEST(CudaTensorCoreEmulated, Bf16RoundingIsToBf16ExceptThatSubnormalsAreKept) {
  int64_t subnormal = 0;
  for (uint32_t b : sweep_inputs()) {
    const float x = float_of(b);
    const uint16_t got = kernel::float_to_bf16(x);
    const uint16_t cpu = cpu::to_bf16(x);
    const bool flushed = (cpu & 0x7FFFu) == 0 && (b & 0x7FFFFFFFu) != 0;
    if (!flushed) {
      ASSERT_EQ(got, cpu) << std::hex << "x bits 0x" << b;
      continue;
    }
    ++subnormal;
    const double q = std::nearbyint(std::fabs(static_cast<double>(x)) / 0x1p-133);  // ties even
    // q ≤ 128 is the subnormal (or, at 128, the smallest normal) encoding itself.
    const uint16_t want = static_cast<uint16_t>(((b >> 16) & 0x8000u) | static_cast<uint32_t>(q));
    ASSERT_EQ(got, want) << std::hex << "x bits 0x" << b;
  }
  EXPECT_GT(subnormal, 1000);
  EXPECT_NE(kernel::float_to_bf16(1e-39f), 0);  // a float subnormal stays a bf16 subnormal
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float a = kernel::bf16_to_float(static_cast<uint16_t>(h));
    const float c = cpu::from_bf16(static_cast<uint16_t>(h));
    ASSERT_EQ(bits_of(a), bits_of(c));
  }
}

// fp16 against the format's definition, written in float64: value = q·ulp with ulp =
// 2^(max(E, −14) − 10), q = round-to-nearest-even(|x| / ulp); from 65520 up ±∞; NaN quiet with
// its top payload bits.
uint16_t f16_definition(float x) {
  const uint32_t b = bits_of(x);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  if (std::isnan(x)) return static_cast<uint16_t>(sign | 0x7E00u | ((b >> 13) & 0x3FFu));
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 65520.0) return static_cast<uint16_t>(sign | 0x7C00u);
  if (a == 0) return sign;
  int e2 = 0;
  std::frexp(a, &e2);  // a = f·2^e2, f in [0.5, 1): E = e2 − 1
  const int E = std::max(e2 - 1, -14);
  const double ulp = std::ldexp(1.0, E - 10);
  const double q = std::nearbyint(a / ulp);
  const double value = q * ulp;
  if (value < 0x1p-14) return static_cast<uint16_t>(sign | static_cast<uint32_t>(value / 0x1p-24));
  std::frexp(value, &e2);
  const int Ev = e2 - 1;
  const uint32_t m = static_cast<uint32_t>(value / std::ldexp(1.0, Ev - 10)) - 1024u;
  return static_cast<uint16_t>(sign | static_cast<uint32_t>(Ev + 15) << 10 | m);
}
double f16_value(uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return s * m * 0x1p-24;
  if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : s * HUGE_VAL;
  return s * std::ldexp(1.0 + m / 1024.0, e - 15);
}

TEST(CudaTensorCoreEmulated, F16RoundingIsTheFormatsDefinition) {
  for (uint32_t b : sweep_inputs()) {
    const float x = float_of(b);
    ASSERT_EQ(kernel::float_to_f16(x), f16_definition(x)) << std::hex << "x bits 0x" << b;
  }
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float a = kernel::f16_to_float(static_cast<uint16_t>(h));
    const double want = f16_value(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(a));
      // The payload survives the round trip (quiet NaNs unchanged).
      if (h & 0x200u) ASSERT_EQ(kernel::float_to_f16(a), h);
      continue;
    }
    ASSERT_EQ(static_cast<double>(a), want) << std::hex << h;
    ASSERT_EQ(std::signbit(a), (h & 0x8000u) != 0);
    ASSERT_EQ(kernel::float_to_f16(a), h);  // every half is a float that rounds to itself
  }
  EXPECT_EQ(kernel::float_to_f16(65504.0f), 0x7BFFu);
  EXPECT_EQ(kernel::float_to_f16(65519.99f), 0x7BFFu);
  EXPECT_EQ(kernel::float_to_f16(65520.0f), 0x7C00u);
  EXPECT_EQ(kernel::float_to_f16(0x1p-25f), 0x0000u);         // the tie with 0: to even
  EXPECT_EQ(kernel::float_to_f16(0x1.000002p-25f), 0x0001u);  // just above: the smallest
  EXPECT_EQ(kernel::float_to_f16(0x1.ff8p-15f), 0x03FFu);     // the largest subnormal
  EXPECT_EQ(kernel::float_to_f16(0x1.ffcp-15f), 0x0400u);     // its tie with 2⁻¹⁴: to even, up
}

// DeviceArray rounds host floats with core/half.h, written apart from half16.cuh: the inputs it
// uploads are the bits the kernels' own rounding would give, subnormals, ties and NaNs included.
TEST(CudaTensorCoreEmulated, DeviceArraysRoundingIsTheKernels) {
  for (uint32_t b : sweep_inputs()) {
    const float x = float_of(b);
    ASSERT_EQ(qkv::float_to_bf16(x), kernel::float_to_bf16(x)) << std::hex << "x bits 0x" << b;
    ASSERT_EQ(qkv::float_to_half(x), kernel::float_to_f16(x)) << std::hex << "x bits 0x" << b;
  }
}

// Runs a problem through the kernels, the reference and N; checks every tensor.
void expect_run(tc_test::Problem16& run, bool backward = true) {
  const Case& c = run.c;
  run.run_kernels(kernel::tc::forward, kernel::tc::backward, backward);
  run.finish_forward_values();
  run.reference(backward);
  run.naive(backward);
  const double u = tc_test::unit_roundoff(c.element);
  std::vector<tc_test::Verdict> verdicts;
  verdicts.push_back(tc_test::check("out", run.out.values, run.r_out, run.n_out, u, run.zero_out));
  verdicts.push_back(tc_test::check("logsumexp", run.lse, run.r_lse, run.n_lse, 0x1p-21));
  if (backward) {
    verdicts.push_back(tc_test::check("dq", run.dq.values, run.r_dq, run.n_dq, u, run.zero_dq));
    verdicts.push_back(tc_test::check("dk", run.dk.values, run.r_dk, run.n_dk, u, run.zero_dk));
    verdicts.push_back(tc_test::check("dv", run.dv.values, run.r_dv, run.n_dv, u, run.zero_dv));
  }
  for (const auto& v : verdicts) EXPECT_EQ(v.failure, "");
  if (std::getenv("QKV_TC_VERBOSE")) {
    std::printf("%s\n ", c.str().c_str());
    const char* names[] = {"out", "lse", "dq", "dk", "dv"};
    for (size_t i = 0; i < verdicts.size(); ++i)
      std::printf(" %s %.2e/%.2e(N)", names[i], verdicts[i].err_x, verdicts[i].err_n);
    std::printf("\n");
  }
}
void expect_case(const Case& c, bool backward = true) {
  SCOPED_TRACE(c.str());
  tc_test::Problem16 run(c);
  expect_run(run, backward);
}

Case make(Element e, int L, int S, int Dk, int Dv, Causal causal = Causal::none) {
  Case c;
  c.element = e, c.L = L, c.S = S, c.Dk = Dk, c.Dv = Dv, c.causal = causal;
  c.seed = static_cast<uint32_t>(L * 1000003 + S * 1009 + Dk * 31 + Dv + static_cast<int>(causal));
  return c;
}

const Element kElements[] = {Element::bf16, Element::f16};

// The fast paths (D = 64, 128): sizes around the 64-row and 64-key tiles, L ≠ S, both causal
// alignments (top-left with L > S leaves rows past S seeing all keys; bottom-right with L > S
// leaves the first rows seeing none).
TEST(CudaTensorCoreEmulated, FastHeadDimsMatchTheReference) {
  for (Element e : kElements) {
    expect_case(make(e, 1, 1, 64, 64));
    expect_case(make(e, 17, 65, 64, 64));
    expect_case(make(e, 130, 64, 64, 64, Causal::top_left));
    expect_case(make(e, 65, 257, 64, 64, Causal::bottom_right));
    expect_case(make(e, 130, 17, 64, 64, Causal::bottom_right));
    expect_case(make(e, 64, 130, 128, 128));
    expect_case(make(e, 257, 65, 128, 128, Causal::top_left));
    expect_case(make(e, 17, 130, 128, 128, Causal::bottom_right));
  }
}

// Other head dims run padded (64, 128 or 256 wide) with zeros; Dk ≠ Dv too.
TEST(CudaTensorCoreEmulated, GenericHeadDimsMatchTheReference) {
  for (Element e : kElements) {
    expect_case(make(e, 17, 65, 1, 1));
    expect_case(make(e, 65, 17, 40, 40, Causal::top_left));
    expect_case(make(e, 64, 64, 96, 96, Causal::bottom_right));
    expect_case(make(e, 17, 64, 200, 200));
    expect_case(make(e, 17, 65, 40, 96));
  }
}

// GQA 4/2 with key lengths (0 included: batch 1 sees nothing), a keep mask with a row that keeps
// nothing, and a bias with −∞ entries.
TEST(CudaTensorCoreEmulated, GqaKeyLengthsAndMasksMatchTheReference) {
  for (Element e : kElements) {
    Case c = make(e, 65, 130, 64, 64, Causal::bottom_right);
    c.B = 2, c.Hq = 4, c.Hkv = 2, c.key_lengths = {100, 0};
    expect_case(c);
    Case k = make(e, 70, 65, 64, 64);
    k.B = 2, k.Hq = 2, k.Hkv = 1, k.keep = true, k.masked_row = true;
    expect_case(k);
    Case b = make(e, 17, 130, 128, 128, Causal::top_left);
    b.Hq = 2, b.Hkv = 2, b.bias = true;
    expect_case(b);
  }
}

// NaN in a query row poisons that row; in a key or value row, the rows that see it; rows that
// cannot see it (causal) stay clean. S = 0: every row sees nothing.
TEST(CudaTensorCoreEmulated, NonFiniteRowsAndEmptyKeysFollowTheContract) {
  for (Element e : kElements) {
    Case q = make(e, 65, 64, 64, 64, Causal::top_left);
    q.nan_q = 3;
    expect_case(q);
    Case k = make(e, 65, 64, 64, 64, Causal::top_left);
    k.nan_k = 10;
    expect_case(k);
    Case v = make(e, 65, 64, 64, 64, Causal::top_left);
    v.nan_v = 20;
    expect_case(v);
    expect_case(make(e, 17, 0, 64, 64));
  }
}

// The CPU kernels' plants (kernels/cpu/flash_test_support.h: NaN and ±∞ in q, k and v rows,
// seen and masked, by causality, key lengths, a keep mask and a bias), forward and backward, on
// the shape the fp32 kernels' emulated tests give them, the inputs rounded to 16 bits. Backward,
// a row or key that cannot see the bad element must stay finite (no 0·NaN in dS·K, dSᵀ·Q) and
// exactly 0 where it sees nothing; the rows that see it are non-finite exactly where R is.
tc_test::Problem16 planted(Element e, const qkv_test::flash::Plant& plant, int D, uint64_t seed) {
  namespace flash = qkv_test::flash;
  flash::Spec s;
  s.B = 2, s.Hq = 4, s.Hkv = 2, s.L = 152, s.S = 260, s.Dk = D, s.Dv = D;
  s.seed = seed, s.setup = plant.setup;
  const qkv_test::Case f = flash::build(s);
  Case c;
  c.element = e, c.B = 2, c.Hq = 4, c.Hkv = 2, c.L = 152, c.S = 260, c.Dk = D, c.Dv = D;
  c.causal = f.causal, c.seed = static_cast<uint32_t>(seed);
  tc_test::Problem16 run(c);
  auto take = [&](tc_test::Array& a, const std::vector<double>& from) {
    for (int64_t x = 0; x < a.size(); ++x) {
      a.bits[x] = tc_test::to16(e, static_cast<float>(from[x]));
      a.values[x] = tc_test::from16(e, a.bits[x]);
    }
  };
  take(run.q, f.q), take(run.k, f.k), take(run.v, f.v);
  run.scale = static_cast<float>(f.scale_value());
  run.lengths.assign(f.key_lengths.begin(), f.key_lengths.end());
  if (f.mask_kind != qkv_test::MaskKind::none) {
    const int r = static_cast<int>(f.mask_shape.size());
    for (int d = 0; d < 4; ++d) run.mask_dims[d] = d >= 4 - r ? f.mask_shape[d - (4 - r)] : 1;
    if (f.mask_kind == qkv_test::MaskKind::boolean) {
      run.mask_kind = MaskKind::keep;
      run.keep.assign(f.mask.size(), 0);
      for (size_t x = 0; x < f.mask.size(); ++x) run.keep[x] = f.mask[x] != 0;
    } else {
      run.mask_kind = MaskKind::bias;
      run.bias.assign(f.mask.begin(), f.mask.end());
    }
  }
  return run;
}

TEST(CudaTensorCoreEmulated, TheCpuPlantsOfNanAndInfPoisonExactlyWhatReadsThem) {
  uint64_t idx = 0;
  for (const qkv_test::flash::Plant& plant : qkv_test::flash::plants()) {
    const int D = idx % 2 ? 40 : 64;
    for (Element e : kElements) {
      tc_test::Problem16 run = planted(e, plant, D, 18000 + idx);
      SCOPED_TRACE(std::string(plant.name) + " | " + run.c.str());
      expect_run(run);
    }
    ++idx;
  }
}

// The rule rejects a result moved 1.05× its allowance past R (and accepts N itself).
TEST(CudaTensorCoreEmulated, TheCheckerRejectsAPerturbedResult) {
  for (Element e : kElements) {
    tc_test::Problem16 run(make(e, 17, 65, 64, 64));
    run.run_kernels(kernel::tc::forward, kernel::tc::backward, true);
    run.finish_forward_values();
    run.reference(true);
    run.naive(true);
    const double u = tc_test::unit_roundoff(e);
    EXPECT_EQ(tc_test::check("dq", run.n_dq, run.r_dq, run.n_dq, u).failure, "");
    const tc_test::Verdict ok = tc_test::check("dq", run.dq.values, run.r_dq, run.n_dq, u);
    ASSERT_EQ(ok.failure, "");
    std::vector<float> moved = run.dq.values;
    moved[5] = static_cast<float>(run.r_dq[5] + 1.05 * ok.allowed);
    EXPECT_NE(tc_test::check("dq", moved, run.r_dq, run.n_dq, u).failure, "");
    std::vector<float> out = run.out.values;
    out[0] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_NE(tc_test::check("out", out, run.r_out, run.n_out, u).failure, "");
  }
}

// The same bits with the block's threads run in reverse order between barriers: no thread reads
// shared memory that another writes without a barrier in between. And the same bits twice.
TEST(CudaTensorCoreEmulated, ReversedThreadOrderGivesTheSameBits) {
  for (Element e : kElements) {
    Case c = make(e, 65, 130, 64, 64, Causal::bottom_right);
    c.Hq = 2, c.Hkv = 1;
    tc_test::Problem16 a(c), b(c);
    a.run_kernels(kernel::tc::forward, kernel::tc::backward, true);
    simt::set_order(simt::Order::reverse);
    b.run_kernels(kernel::tc::forward, kernel::tc::backward, true);
    simt::set_order(simt::Order::forward);
    EXPECT_EQ(a.out.bits, b.out.bits);
    EXPECT_EQ(a.dq.bits, b.dq.bits);
    EXPECT_EQ(a.dk.bits, b.dk.bits);
    EXPECT_EQ(a.dv.bits, b.dv.bits);
  }
  // And with a plant: the backward's loads that zero ±∞ and NaN (no flags, no shuffles there).
  const auto& plant = qkv_test::flash::plants()[2];  // NaN in k, top-left: some rows see it
  tc_test::Problem16 a = planted(Element::bf16, plant, 64, 18002),
                     b = planted(Element::bf16, plant, 64, 18002);
  a.run_kernels(kernel::tc::forward, kernel::tc::backward, true);
  simt::set_order(simt::Order::reverse);
  b.run_kernels(kernel::tc::forward, kernel::tc::backward, true);
  simt::set_order(simt::Order::forward);
  EXPECT_EQ(a.out.bits, b.out.bits);
  EXPECT_EQ(a.dq.bits, b.dq.bits);
  EXPECT_EQ(a.dk.bits, b.dk.bits);
  EXPECT_EQ(a.dv.bits, b.dv.bits);
}

}  // namespace
}  // namespace qkv::cuda
