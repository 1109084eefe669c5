// The tests of the kernels that multiply through OpenBLAS — the unfused attention path and the
// model's dense layers — once more under each OpenBLAS kernel family this CPU can run. Debian's
// OpenBLAS (DYNAMIC_ARCH) picks its SGEMM kernels by CPU, and they round differently — Haswell's
// even rounds one element differently for different numbers of columns, which once broke the fused
// backward on AVX2 machines only (issue 11; the fused kernels now multiply with their own
// qk_tile and pv_tile) — so a machine with AVX-512 would otherwise never run the AVX2 kernels,
// nor one with AVX2 the AVX and SSE ones. OPENBLAS_CORETYPE forces a family; it is read once when
// the library loads, so each family runs in a child process: this test program again, filtered
// to those suites on the best SIMD target.
#include <cblas.h>
#include <gtest/gtest.h>
#include <hwy/targets.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cli/cli_runner.h"
#include "simd_targets.h"

namespace {

// OpenBLAS runs the kernel family OPENBLAS_CORETYPE asks for (in the children started below), or
// the one it picked for this CPU.
TEST(OpenBlasCores, TheCoreInUseIsTheOneAskedFor) {
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  const std::string in_use = openblas_get_corename();
  std::cout << "[ cores    ] OpenBLAS runs its " << in_use << " kernels\n";
  if (forced)
    EXPECT_STRCASEEQ(in_use.c_str(), forced);
  else
    EXPECT_FALSE(in_use.empty());
}

TEST(OpenBlasCores, FusedKernelTestsPassOnEveryCoreThisCpuRuns) {
  __builtin_cpu_init();
  struct Core {
    const char* name;
    bool runs;
  };
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  const Core cores[] = {
      {"SkylakeX", avx512},
      {"Haswell", __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")},
      {"Sandybridge", __builtin_cpu_supports("avx") != 0},
      {"Nehalem", __builtin_cpu_supports("sse4.2") != 0},
  };
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_GT(len, 0);
  self[len] = '\0';
  const std::string best = hwy::TargetName(qkv_test::runnable_simd_targets().front());
  const std::string filter = "--gtest_filter=Simd/UnfusedAttention*/" + best + ":Simd/Dense*/" +
                             best + ":Simd/BertEmbedTest*/" + best +
                             ":OpenBlasCores.TheCoreInUseIsTheOneAskedFor";
  std::string ran;
  for (const Core& core : cores) {
    if (!core.runs) continue;
    ::setenv("OPENBLAS_CORETYPE", core.name, 1);
    const auto r = qkv::testing::run_program(self, {filter, "--gtest_brief=1"});
    ::unsetenv("OPENBLAS_CORETYPE");
    EXPECT_EQ(r.exit_code, 0) << "OPENBLAS_CORETYPE=" << core.name << "\n" << r.describe();
    ran += std::string(ran.empty() ? "" : ", ") + core.name;
  }
  std::cout << "[ cores    ] OpenBLAS families run: " << ran << " (SIMD target " << best << ")\n";
  EXPECT_FALSE(ran.empty());
}

}  // namespace
