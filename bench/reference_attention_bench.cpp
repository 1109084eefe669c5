// The float64 reference path, timed: the baseline every fast kernel is measured against.
// Reports GFLOP/s (the GFLOP counter, as a rate) with the usual count of 4·B·H·L·S·D for the two
// matrix products.
#include <benchmark/benchmark.h>

#include <random>

#include "qkv/attention.h"

namespace {

qkv::Tensor normal(qkv::Shape shape, std::mt19937& rng) {
  // N(0, 1) data: random integers would collapse the softmax to one-hot (docs/CONVENTIONS.md §4.2).
  std::normal_distribution<float> n;
  qkv::Tensor t(std::move(shape), qkv::DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(rng);
  return t;
}

void BM_ReferenceForward(benchmark::State& state) {
  const int64_t L = state.range(0), D = state.range(1), H = 4;
  std::mt19937 rng(7);
  const qkv::Tensor q = normal({1, H, L, D}, rng), k = normal({1, H, L, D}, rng),
                    v = normal({1, H, L, D}, rng);
  for (auto _ : state) benchmark::DoNotOptimize(qkv::attention(q, k, v).out);
  const double flops = 4.0 * H * L * L * D;
  state.counters["GFLOP"] =
      benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ReferenceForward)->Args({128, 64})->Args({512, 64})->Unit(benchmark::kMillisecond);

}  // namespace
