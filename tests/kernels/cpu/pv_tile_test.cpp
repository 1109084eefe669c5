// The output update of the fused forward (kernels/cpu/pv_tile.h): o += P·V with every output
// element one multiply-add chain over the keys in order — bit for bit, on every SIMD target,
// whatever the head dimension (vector panels and the scalar tail), the rows or the number of keys
// (passes over the keys split the chain without reordering it).
#include "kernels/cpu/pv_tile.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/kernel_samples.h"
#include "simd_targets.h"

namespace qkv::cpu {
namespace {

using qkv_test::normal;
using qkv_test::same_bits;
using qkv_test::target_has_fma;

// o (m × Dv, row stride ldo) += p (m × n, row stride ldp) · v (n × Dv, row stride ldv), as the
// chain pv_tile.h promises, in float: fma on targets with FMA, a multiply and an add without.
std::vector<float> chain(const std::vector<float>& p, int64_t ldp, const std::vector<float>& v,
                         int64_t ldv, std::vector<float> o, int64_t ldo, int64_t m, int64_t n,
                         int64_t Dv, bool fma) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < Dv; ++c) {
      float acc = o[i * ldo + c];
      for (int64_t j = 0; j < n; ++j) {
        const float a = p[i * ldp + j], b = v[j * ldv + c];
        acc = fma ? std::fma(a, b, acc) : a * b + acc;
      }
      o[i * ldo + c] = acc;
    }
  return o;
}

QKV_PER_SIMD_TARGET(PvTile);

TEST_P(PvTile, EachOutputIsOneMultiplyAddChainOverTheKeysInOrder) {
  const bool fma = target_has_fma(GetParam());
  for (int64_t Dv : {1, 7, 8, 21, 32, 64, 111, 128}) {
    for (int64_t m : {1, 3, 4, 13, 24}) {
      for (int64_t n : {1, 45, 300, 700}) {
        // Leading dimensions other than the minimum, as the kernels pass them.
        const int64_t ldp = n + 5, ldv = Dv + 3, ldo = Dv + 2;
        const auto p = normal(m * ldp, 1 + n, 0.1f), v = normal(n * ldv, 2 + Dv, 2);
        const auto o0 = normal(m * ldo, 3 + m, 1);
        auto o = o0;
        pv_tile(p.data(), ldp, m, v.data(), ldv, n, Dv, o.data(), ldo);
        const auto want = chain(p, ldp, v, ldv, o0, ldo, m, n, Dv, fma);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t c = 0; c < Dv; ++c)
            ASSERT_TRUE(same_bits(o[i * ldo + c], want[i * ldo + c]))
                << "Dv=" << Dv << " m=" << m << " n=" << n << " (" << i << ", " << c
                << "): " << o[i * ldo + c] << " vs " << want[i * ldo + c];
          // Beyond Dv, between rows: untouched.
          for (int64_t c = Dv; c < ldo && i + 1 < m; ++c)
            ASSERT_TRUE(same_bits(o[i * ldo + c], o0[i * ldo + c])) << "Dv=" << Dv << " pad";
        }
      }
    }
  }
}

// Packed values (pack_values: panels of kValuePanel columns) give the in-place bits, for a tile
// that starts anywhere among the packed keys; a tile packed in pieces equals one packed whole.
TEST_P(PvTile, PackedValuesGiveTheInPlaceBits) {
  for (int64_t Dv : {1, 7, 32, 40, 64, 100, 128}) {
    const int64_t keys = 301, ldv = Dv + 3, m = 13;
    const auto v = normal(keys * ldv, 20 + Dv, 2);
    std::vector<float> packed(keys * Dv, NAN);
    for (int64_t j0 = 0; j0 < keys; j0 += 128)  // in pieces, as the fused kernels pack tiles
      pack_values(v.data() + j0 * ldv, ldv, std::min<int64_t>(128, keys - j0), Dv, packed.data(),
                  keys, j0);
    for (auto [j0, n] : {std::pair<int64_t, int64_t>{0, 301}, {17, 200}, {256, 45}}) {
      const int64_t ldp = n + 1;
      const auto p = normal(m * ldp, 21 + n, 0.1f), o0 = normal(m * Dv, 22, 1);
      auto in_place = o0, from_packed = o0;
      pv_tile(p.data(), ldp, m, v.data() + j0 * ldv, ldv, n, Dv, in_place.data(), Dv);
      pv_tile(p.data(), ldp, m, ValueRows{packed.data(), 0, keys}, j0, n, Dv, from_packed.data(),
              Dv);
      for (int64_t x = 0; x < m * Dv; ++x)
        ASSERT_TRUE(same_bits(from_packed[x], in_place[x]))
            << "Dv=" << Dv << " j0=" << j0 << " n=" << n << " at " << x;
    }
  }
}

// The check above is not vacuous: the same products summed in another order (the keys reversed)
// give other bits somewhere.
TEST_P(PvTile, TheChainCheckSeesAnotherOrder) {
  const bool fma = target_has_fma(GetParam());
  const int64_t m = 4, n = 300, Dv = 64;
  const auto p = normal(m * n, 7, 0.1f), v = normal(n * Dv, 8, 2);
  std::vector<float> o(m * Dv, 0.0f);
  pv_tile(p.data(), n, m, v.data(), Dv, n, Dv, o.data(), Dv);
  std::vector<float> p_rev(m * n), v_rev(n * Dv);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) p_rev[i * n + j] = p[i * n + n - 1 - j];
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < Dv; ++c) v_rev[j * Dv + c] = v[(n - 1 - j) * Dv + c];
  const auto reversed =
      chain(p_rev, n, v_rev, Dv, std::vector<float>(m * Dv, 0.0f), Dv, m, n, Dv, fma);
  int64_t differ = 0;
  for (int64_t x = 0; x < m * Dv; ++x) differ += !same_bits(o[x], reversed[x]);
  EXPECT_GT(differ, 0);
}

// NaN and ∞ in P or V reach only the outputs that read them.
TEST_P(PvTile, NonFiniteInputsReachOnlyTheirOutputs) {
  const int64_t m = 6, n = 50, Dv = 40;
  auto p = normal(m * n, 9, 0.1f), v = normal(n * Dv, 10, 1);
  p[2 * n + 11] = NAN;         // row 2, every column
  v[30 * Dv + 17] = INFINITY;  // column 17, every row whose p[·][30] ≠ 0
  for (int64_t i = 0; i < m; ++i) p[i * n + 30] = i == 4 ? 0.0f : p[i * n + 30];
  std::vector<float> o(m * Dv, 0.0f);
  pv_tile(p.data(), n, m, v.data(), Dv, n, Dv, o.data(), Dv);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < Dv; ++c) {
      // 0·∞ is NaN: row 4 sees the ∞ through a zero weight, as a plain P·V does.
      const bool bad = i == 2 || c == 17;
      EXPECT_EQ(std::isfinite(o[i * Dv + c]), !bad) << i << ", " << c;
    }
}

}  // namespace
}  // namespace qkv::cpu
