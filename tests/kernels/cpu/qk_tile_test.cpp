// The score tile of the fused kernels (kernels/cpu/qk_tile.h): every score a function of its query
// row, its key row and the tile's row count alone — the same bits whatever the number of keys,
// their offset in the tile or the other rows — and exactly the multiply-add chain it promises.
#include "kernels/cpu/qk_tile.h"

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

// Scores of rows [i0, i0 + m) against keys [j0, j0 + n) of q: [*, D] and k: [*, D], as the
// kernels call it: keys read in place (row stride D), a fresh transpose scratch.
std::vector<float> tile(const std::vector<float>& q, const std::vector<float>& k, int64_t D,
                        int64_t i0, int64_t m, int64_t j0, int64_t n) {
  const int64_t lds = padded_keys(n) + 16;  // leading dimensions other than the minimum
  std::vector<float> kt(D * (lds + 32)), s(m * lds, -1.0f);
  KeyTile keys{k.data() + j0 * D, D, n, kt.data()};
  qk_tile(q.data() + i0 * D, D, m, keys, D, s.data(), lds);
  std::vector<float> out(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) out[i * n + j] = s[i * lds + j];
  return out;
}

QKV_PER_SIMD_TARGET(QkTile);

// Past kDotRows rows: s_ij = fma(q[D−1], k[D−1], … fma(q[0], k[0], 0)), bit for bit, on targets
// with FMA; a multiply and an add per step without it.
TEST_P(QkTile, ManyRowsAreOneMultiplyAddChainInOrder) {
  const bool fma = target_has_fma(GetParam());
  for (int64_t D : {1, 7, 8, 21, 64, 111, 128}) {
    const int64_t m = 13, n = 45;
    const auto q = normal(m * D, 1 + D, 3), k = normal(n * D, 2 + D, 3);
    const auto s = tile(q, k, D, 0, m, 0, n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float chain = 0;
        for (int64_t d = 0; d < D; ++d) {
          const float a = q[i * D + d], b = k[j * D + d];
          chain = fma ? std::fma(a, b, chain) : a * b + chain;
        }
        ASSERT_TRUE(same_bits(s[i * n + j], chain))
            << "D=" << D << " i=" << i << " j=" << j << ": " << s[i * n + j] << " vs " << chain;
      }
  }
}

// The bug this kernel fixed: the forward and the backward multiply different tiles (65 keys in
// one, 97 or 256 in the other; rows 0..129 or 4..129) and must get the same bits for the scores
// they share. Both forms: rows > kDotRows and ≤ kDotRows.
TEST_P(QkTile, ScoresDoNotDependOnTheTileShape) {
  for (int64_t D : {5, 32, 64, 128}) {
    const int64_t rows = 130, keys = 300;
    const auto q = normal(rows * D, 10 + D, 5), k = normal(keys * D, 20 + D, 5);
    for (int64_t m : {int64_t{130}, int64_t{5}, int64_t{4}, int64_t{3}, int64_t{1}}) {
      const auto whole = tile(q, k, D, 0, m, 0, keys);
      struct Part {
        int64_t i0, m, j0, n;
      };
      // Same rows per tile (the kernels' contract), other key counts and offsets; for the many-row
      // form other row subsets too.
      std::vector<Part> parts = {{0, m, 0, 65}, {0, m, 0, 97}, {0, m, 17, 256}, {0, m, 299, 1}};
      if (m >= 4 + 2 * kDotRows)
        parts.push_back({4, m - 4, 3, 200}), parts.push_back({1, 6, 0, 16});
      for (const Part& p : parts) {
        const auto part = tile(q, k, D, p.i0, p.m, p.j0, p.n);
        for (int64_t i = 0; i < p.m; ++i)
          for (int64_t j = 0; j < p.n; ++j)
            ASSERT_TRUE(same_bits(part[i * p.n + j], whole[(p.i0 + i) * keys + p.j0 + j]))
                << "D=" << D << " m=" << m << " part rows " << p.i0 << "+" << p.m << " keys "
                << p.j0 << "+" << p.n << " at (" << i << ", " << j << ")";
      }
    }
  }
}

// A tile's rows scored a few at a time in the tile's form (qk_form of its row count, as the
// forward does) are the tile's scores, in both forms, for any split of the rows.
TEST_P(QkTile, RowsTakenAFewAtATimeInTheTilesFormAreTheTilesScores) {
  for (int64_t D : {5, 64}) {
    const int64_t keys = 100;
    for (int64_t rows : {int64_t{3}, int64_t{4}, int64_t{50}}) {
      const auto q = normal(rows * D, 60 + D, 3), k = normal(keys * D, 61 + D, 3);
      const auto whole = tile(q, k, D, 0, rows, 0, keys);
      for (int64_t step : {int64_t{1}, int64_t{2}, int64_t{24}}) {
        const int64_t lds = padded_keys(keys);
        std::vector<float> kt(D * lds), s(step * lds);
        KeyTile kt_tile{k.data(), D, keys, kt.data()};
        for (int64_t i0 = 0; i0 < rows; i0 += step) {
          const int64_t m = std::min(step, rows - i0);
          qk_tile(q.data() + i0 * D, D, m, kt_tile, D, s.data(), lds, qk_form(rows));
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < keys; ++j)
              ASSERT_TRUE(same_bits(s[i * lds + j], whole[(i0 + i) * keys + j]))
                  << "D=" << D << " rows=" << rows << " step=" << step << " (" << i0 + i << ", "
                  << j << ")";
        }
      }
    }
  }
}

// Keys packed beforehand (pack_keys, as the fused forward packs a whole tile once) give the bits
// of keys read in place, also when only the first n of the packed keys are scored (a tile cut
// short by causality or key lengths): the panels keep the widths of the keys packed.
TEST_P(QkTile, PackedKeysGiveTheInPlaceScores) {
  for (int64_t D : {3, 64, 128}) {
    const int64_t rows = 30, packed_n = 300;
    const auto q = normal(rows * D, 70 + D, 3), k = normal(packed_n * D, 71 + D, 3);
    const auto whole = tile(q, k, D, 0, rows, 0, packed_n);
    std::vector<float> kt(padded_keys(packed_n) * D, NAN);
    pack_keys(k.data(), D, packed_n, D, kt.data());
    for (int64_t n : {int64_t{300}, int64_t{290}, int64_t{49}, int64_t{1}}) {
      const int64_t lds = padded_keys(packed_n);
      std::vector<float> s(rows * lds);
      KeyTile packed{nullptr, 0, n, kt.data(), packed_n};
      qk_tile(q.data(), D, rows, packed, D, s.data(), lds);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < n; ++j)
          ASSERT_TRUE(same_bits(s[i * lds + j], whole[i * packed_n + j]))
              << "D=" << D << " n=" << n << " (" << i << ", " << j << ")";
    }
  }
}

// The row max qk_tile takes on the way (the forward's running max) is the max of each row's
// first n scores — not of the padding or the packed keys past n — and only raises what it is
// given; in both forms.
TEST_P(QkTile, RowMaxIsTheMaxOfTheScoredKeys) {
  for (int64_t D : {7, 64}) {
    const int64_t packed_n = 200;
    // Keys past n score far higher: a max that looked at them would show it.
    auto k = normal(packed_n * D, 80 + D, 1);
    for (int64_t j = 150; j < packed_n; ++j)
      for (int64_t x = 0; x < D; ++x) k[j * D + x] *= 100;
    std::vector<float> kt(padded_keys(packed_n) * D);
    pack_keys(k.data(), D, packed_n, D, kt.data());
    for (int64_t rows : {int64_t{3}, int64_t{13}}) {
      const auto q = normal(rows * D, 81 + D, 1);
      for (int64_t n : {int64_t{150}, int64_t{100}, int64_t{49}, int64_t{9}, int64_t{1}}) {
        const int64_t lds = padded_keys(packed_n);
        std::vector<float> s(rows * lds);
        std::vector<float> row_max(rows, -INFINITY);
        row_max[1] = 1e6f;  // already above every score: stays
        KeyTile keys{k.data(), D, n, kt.data(), packed_n};
        qk_tile(q.data(), D, rows, keys, D, s.data(), lds, qk_form(rows), row_max.data());
        for (int64_t i = 0; i < rows; ++i) {
          float want = i == 1 ? 1e6f : -INFINITY;
          for (int64_t j = 0; j < n; ++j) want = std::max(want, s[i * lds + j]);
          ASSERT_EQ(row_max[i], want) << "D=" << D << " rows=" << rows << " n=" << n << " i=" << i;
        }
      }
    }
  }
}

// Both forms are dot products to float32 accuracy: |s − q·k| ≤ D·u·Σ|q_d k_d| (the worst case
// of a sum of D rounded terms, u = 2⁻²⁴), against float64.
TEST_P(QkTile, WithinTheRoundingOfADotProduct) {
  for (int64_t m : {int64_t{3}, int64_t{9}}) {
    for (int64_t D : {1, 3, 16, 59, 256}) {
      const int64_t n = 33;
      const auto q = normal(m * D, 30 + D, 4), k = normal(n * D, 40 + D, 4);
      const auto s = tile(q, k, D, 0, m, 0, n);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double exact = 0, mag = 0;
          for (int64_t d = 0; d < D; ++d) {
            exact += static_cast<double>(q[i * D + d]) * k[j * D + d];
            mag += std::abs(static_cast<double>(q[i * D + d]) * k[j * D + d]);
          }
          EXPECT_LE(std::abs(s[i * n + j] - exact), D * 0x1.0p-24 * mag)
              << "m=" << m << " D=" << D << " (" << i << ", " << j << ")";
        }
    }
  }
}

// NaN and ∞ stay in the scores of the rows and keys that hold them, and nowhere else.
TEST_P(QkTile, NonFiniteInputsReachOnlyTheirScores) {
  for (int64_t m : {int64_t{2}, int64_t{8}}) {
    const int64_t D = 24, n = 40;
    auto q = normal(m * D, 50, 1), k = normal(n * D, 51, 1);
    q[1 * D + 5] = NAN;
    k[7 * D + 0] = INFINITY;
    const auto s = tile(q, k, D, 0, m, 0, n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        EXPECT_EQ(std::isfinite(s[i * n + j]), i != 1 && j != 7)
            << "m=" << m << " " << i << ", " << j;
  }
}

}  // namespace
}  // namespace qkv::cpu
