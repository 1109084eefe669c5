// tests/simd_targets.h — runs a test suite once per SIMD target: every instruction set the
// Highway kernels were compiled for that this CPU can run (on an AVX-512 machine AVX3, AVX2, SSE4,
// SSSE3 and the scalar fallback), not only the one runtime dispatch would pick. A machine with
// less tests less; the names say which ran (Simd/FlashForward.Masks/AVX2).
//
//   QKV_PER_SIMD_TARGET(FlashForward);   // once per suite, instead of TEST's implicit fixture
//   TEST_P(FlashForward, Masks) { ... }  // each test of the suite as TEST_P
#pragma once

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/vec_ops.h"

namespace qkv_test {

// The targets compiled into the kernels (HWY_TARGETS: the same flags build them and this file)
// that this CPU supports, best first.
inline std::vector<int64_t> runnable_simd_targets() {
  hwy::SetSupportedTargetsForTest(0);  // the CPU's own answer, not a previous test's mock
  return hwy::SupportedAndGeneratedTargets();
}

inline std::string simd_target_name(const testing::TestParamInfo<int64_t>& info) {
  return hwy::TargetName(info.param);
}

// Dispatches every Highway kernel to the parameter's target for the duration of one test.
class PerSimdTarget : public testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    hwy::SetSupportedTargetsForTest(GetParam());
    // Dispatch really moved: the kernels report the target they run on.
    ASSERT_STREQ(qkv::cpu::simd_target(), hwy::TargetName(GetParam()));
  }
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }
};

// Whether `target` has fused multiply-add: without it (SSE4 and older) Highway's MulAdd is a
// multiply and an add, rounded twice.
inline bool target_has_fma(int64_t target) {
#if HWY_ARCH_X86
  return (target & (HWY_AVX2 | HWY_AVX3 | HWY_AVX3_DL)) != 0;
#else
  return target != HWY_SCALAR;
#endif
}

}  // namespace qkv_test

#define QKV_PER_SIMD_TARGET(Suite)                                                                \
  class Suite : public ::qkv_test::PerSimdTarget {};                                              \
  INSTANTIATE_TEST_SUITE_P(Simd, Suite, ::testing::ValuesIn(::qkv_test::runnable_simd_targets()), \
                           ::qkv_test::simd_target_name)
