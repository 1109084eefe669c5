// `qkv bench perceiver`: the cost of latent queries. One cross-attention of N latent queries over
// an input of L keys and values (the Perceiver's read, O(N·L)) against one full self-attention
// over the input (O(L²)), both with the fused kernel, for L from 1k to 16k.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "bench/common.h"
#include "core/aligned.h"
#include "qkv/attention.h"
#include "qkv/blas.h"
#include "qkv/json.h"
#include "qkv/terminal.h"

namespace qkv::cli {

namespace {

struct Cost {
  double ms = 0, gflops = 0, peak_mib = 0;
};

// The worst |fused − float64 reference| over the first `rows` query rows. fp32 sums of up to
// 16k products of N(0, 1) values drift by ≲ L·ε·|term| ≈ 1e-3 at L = 16k; a wrong kernel is off
// by O(1).
double worst_error(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                   int64_t rows) {
  const Tensor qs = q.narrow(2, 0, rows);
  const Tensor ref =
      attention(qs.to(DType::f64), k.to(DType::f64), v.to(DType::f64), {.path = Path::reference})
          .out;
  const Tensor got = out.narrow(2, 0, rows).to(DType::f64);
  double worst = 0;
  for (int64_t i = 0; i < ref.numel(); ++i)
    worst = std::max(worst, std::abs(ref.data<double>()[i] - got.data<double>()[i]));
  return worst;
}

Cost measure(const Tensor& q, const Tensor& k, const Tensor& v, const bench::Settings& s) {
  const AttentionOptions options{.path = Path::fused, .num_threads = s.threads};
  const int64_t before = memory_current_bytes();
  memory_reset_peak();
  const Tensor out = attention(q, k, v, options).out;  // also the warm-up
  Cost c;
  c.peak_mib = static_cast<double>(memory_peak_bytes() - before) / (1 << 20);
  const double error = worst_error(q, k, v, out, std::min<int64_t>(q.dim(2), 8));
  if (!(error <= 1e-3))
    throw Error("qkv bench perceiver: the fused attention is " + std::to_string(error) +
                    " off the float64 reference at L = " + std::to_string(k.dim(2)),
                Error::Kind::runtime);
  const double seconds = bench::median_seconds([&] { attention(q, k, v, options); }, s.repeats,
                                               /*warm_up=*/false);
  const double flops = 4.0 * static_cast<double>(q.dim(2) * k.dim(2) * q.dim(3));
  c.ms = 1e3 * seconds;
  c.gflops = flops / seconds / 1e9;
  return c;
}

}  // namespace

int run_bench_perceiver(const BenchPerceiverArgs& args) {
  const bench::Settings s = bench::resolve(args.common);
  set_blas_threads(s.threads);
  const int64_t n = args.latents, d = 64;
  std::vector<int64_t> lengths = {1024, 2048, 4096, 8192, 16384};
  if (s.quick) lengths = {256, 512, 1024};
  std::mt19937_64 rng(1);
  Progress progress;
  const std::vector<int> w = {6, 4, 9, 9, 12, 11, 7, 7, 8, 8, 8};
  if (!s.json) {
    std::cout << "qkv bench perceiver: " << n << " latent queries cross-attending to L inputs "
              << "against self-attention over the L inputs\n(one head, d = " << d
              << ", fused kernel, float32, " << s.threads << " thread"
              << (s.threads == 1 ? "" : "s") << ", median of " << s.repeats << ")\n\n";
    std::cout << table_row({"L", "N", "cross ms", "self ms", "cross GFLOP", "self GFLOP", "FLOP ×",
                            "time ×", "N·L MiB", "L² MiB", "scratch"},
                           w)
              << "\n";
  }
  for (int64_t l : lengths) {
    progress.show("qkv bench perceiver: L = " + std::to_string(l));
    const Tensor latents = bench::normal_tensor({1, 1, n, d}, rng);
    const Tensor x = bench::normal_tensor({1, 1, l, d}, rng);
    const Tensor xv = bench::normal_tensor({1, 1, l, d}, rng);
    const Cost cross = measure(latents, x, xv, s);  // Q from the latents, K and V from the input
    const Cost self = measure(x, x, xv, s);         // Q, K and V all from the input
    const double cross_gflop = 4.0 * static_cast<double>(n * l * d) / 1e9;
    const double self_gflop = 4.0 * static_cast<double>(l * l * d) / 1e9;
    // What an unfused implementation would hold: the weights matrix, N×L or L×L floats.
    const double cross_mib = 4.0 * static_cast<double>(n * l) / (1 << 20);
    const double self_mib = 4.0 * static_cast<double>(l * l) / (1 << 20);
    progress.clear();
    if (s.json) {
      std::cout << nlohmann::json{{"L", l},
                                  {"N", n},
                                  {"d", d},
                                  {"cross_ms", number_json(cross.ms)},
                                  {"self_ms", number_json(self.ms)},
                                  {"cross_gflop", number_json(cross_gflop)},
                                  {"self_gflop", number_json(self_gflop)},
                                  {"cross_gflops", number_json(cross.gflops)},
                                  {"self_gflops", number_json(self.gflops)},
                                  {"flop_ratio", number_json(self_gflop / cross_gflop)},
                                  {"time_ratio", number_json(self.ms / cross.ms)},
                                  {"cross_weights_mib", number_json(cross_mib)},
                                  {"self_weights_mib", number_json(self_mib)},
                                  {"cross_scratch_mib", number_json(cross.peak_mib)},
                                  {"self_scratch_mib", number_json(self.peak_mib)},
                                  {"threads", s.threads},
                                  {"repeats", s.repeats}}
                       .dump()
                << "\n";
    } else {
      // Significant digits below 1, not fixed decimals: with more latents than inputs
      // (--latents 4096, L = 256) the ratios are below 1, and "%.0f" printed them as 0.
      const auto f = bench::fixed_or_significant;
      std::cout << table_row({std::to_string(l), std::to_string(n), f(cross.ms, 3), f(self.ms, 1),
                              f(cross_gflop, 4), f(self_gflop, 2), f(self_gflop / cross_gflop, 0),
                              f(self.ms / cross.ms, 0), f(cross_mib, 2), f(self_mib, 1),
                              f(std::max(cross.peak_mib, self.peak_mib), 1)},
                             w)
                << "\n";
    }
  }
  if (!s.json)
    std::cout << "\ncross: Q [N, d] from the latents, K and V [L, d] from the input: 4·N·L·d "
                 "FLOPs, linear in L.\nself: Q, K and V [L, d] from the input: 4·L²·d FLOPs, "
                 "quadratic. FLOP × and time × are\nself / cross (= L / N for the FLOPs). N·L and "
                 "L² MiB: the float32 weights an unfused\nattention would hold; the fused kernel "
                 "never forms them (scratch: its measured peak\nMiB beyond inputs and outputs).\n";
  return 0;
}

}  // namespace qkv::cli
