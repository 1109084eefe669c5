// qkv_bf16_tile_bench: the bf16 tiles of kernels/cpu/bf16_tile.h against the float32 tiles of
// qk_tile.h and pv_tile.h on the same shapes, one thread: S = Q·Kᵀ and O += P·V for 256 query
// rows × 512 keys at D = 64 and 128, GFLOP/s (2·m·n·D flops a product), the median of 7 runs of
// at least 0.1 s each after a warm-up. The bf16 path runs twice on machines with AVX512_BF16:
// with vdpbf16ps and with its float32 emulation. Before timing, it checks that both bf16 paths
// give the same bits.
//
//   build/bench/qkv_bf16_tile_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/bf16_tile.h"
#include "kernels/cpu/pv_tile.h"
#include "kernels/cpu/qk_tile.h"
#include "kernels/cpu/vec_ops.h"

namespace {

using namespace qkv::cpu;

std::vector<float> normal(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, 1);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

// GFLOP/s of f, which does `flops` floating-point operations.
template <class F>
double gflops(double flops, F&& f) {
  using clock = std::chrono::steady_clock;
  f();  // warm-up
  std::vector<double> rates;
  for (int run = 0; run < 7; ++run) {
    int64_t reps = 0;
    const auto t0 = clock::now();
    double seconds = 0;
    do {
      f();
      ++reps;
      seconds = std::chrono::duration<double>(clock::now() - t0).count();
    } while (seconds < 0.1);
    rates.push_back(flops * static_cast<double>(reps) / seconds * 1e-9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace

int main() {
  const int64_t m = 256, n = 512;
  const bool has_dot = bf16_uses_dot();
  std::printf("target %s, vdpbf16ps %s; 1 thread, %lld rows x %lld keys, GFLOP/s\n", simd_target(),
              has_dot ? "yes" : "no", static_cast<long long>(m), static_cast<long long>(n));
  std::printf("%-4s %-3s %10s %10s %10s %14s\n", "D", "op", "fp32", "bf16", "bf16 emul",
              "bf16/fp32");
  for (int64_t D : {64, 128}) {
    const auto qf = normal(m * D, 1), kf = normal(n * D, 2), pf = normal(m * n, 3);
    const double flops = 2.0 * static_cast<double>(m * n * D);
    // float32.
    std::vector<float> kt(padded_keys(n) * D), s(m * padded_keys(n)), vpack(n * D), o(m * D);
    pack_keys(kf.data(), D, n, D, kt.data());
    KeyTile keys{kf.data(), D, n, kt.data(), n};
    pack_values(kf.data(), D, n, D, vpack.data(), n, 0);
    const double qk32 = gflops(flops, [&] {
      qk_tile(qf.data(), D, m, keys, D, s.data(), padded_keys(n), QkForm::kOuter);
    });
    const double pv32 = gflops(flops, [&] {
      pv_tile(pf.data(), n, m, ValueRows{vpack.data(), D, n}, 0, n, D, o.data(), D);
    });
    // bf16.
    std::vector<bf16> q(m * bf16_row(D)), kb(bf16_key_panel_elems(n, D)),
        vb(bf16_value_panel_elems(n, D)), p(m * n);
    round_bf16_rows(qf.data(), D, m, D, q.data(), bf16_row(D));
    pack_keys_bf16(kf.data(), D, n, D, kb.data());
    pack_values_bf16(kf.data(), D, n, D, vb.data(), n, 0);
    round_bf16_rows(pf.data(), n, m, n, p.data(), n);
    auto qk16 = [&] {
      qk_tile_bf16(q.data(), bf16_row(D), m, kb.data(), n, n, D, s.data(), padded_keys(n));
    };
    auto pv16 = [&] { pv_tile_bf16(p.data(), n, m, vb.data(), n, 0, n, D, o.data(), D); };
    if (has_dot) {  // validate: the two paths' bits
      std::vector<float> s1(s.size()), o1(o.size(), 0.0f), o2(o.size(), 0.0f);
      qk16();
      s1 = s;
      pv_tile_bf16(p.data(), n, m, vb.data(), n, 0, n, D, o1.data(), D);
      set_bf16_dot(false);
      qk16();
      pv_tile_bf16(p.data(), n, m, vb.data(), n, 0, n, D, o2.data(), D);
      set_bf16_dot(true);
      if (std::memcmp(s1.data(), s.data(), s.size() * 4) ||
          std::memcmp(o1.data(), o2.data(), o.size() * 4)) {
        std::fprintf(stderr, "qkv_bf16_tile_bench: vdpbf16ps and the emulation differ\n");
        return 1;
      }
    }
    const double qk16_rate = gflops(flops, qk16), pv16_rate = gflops(flops, pv16);
    double qk_emul = qk16_rate, pv_emul = pv16_rate;
    if (has_dot) {
      set_bf16_dot(false);
      qk_emul = gflops(flops, qk16);
      pv_emul = gflops(flops, pv16);
      set_bf16_dot(true);
    }
    std::printf("%-4lld %-3s %10.1f %10.1f %10.1f %13.2fx\n", static_cast<long long>(D), "qk", qk32,
                qk16_rate, qk_emul, qk16_rate / qk32);
    std::printf("%-4lld %-3s %10.1f %10.1f %10.1f %13.2fx\n", static_cast<long long>(D), "pv", pv32,
                pv16_rate, pv_emul, pv16_rate / pv32);
  }
  return 0;
}
