// The float64 reference path, timed: the baseline every fast kernel is measured against, on the
// cases of `qkv bench attention` (the registry of bench/cases/attention_cases.h) at their --quick
// sizes, every head. Reports GFLOP/s (the GFLOP counter, as a rate) with the registry's count:
// 4·B·Hq·L·S·D for the two matrix products, half when causal.
#include <benchmark/benchmark.h>

#include <random>
#include <string>

#include "cases/attention_cases.h"
#include "qkv/attention.h"

namespace {

qkv::Tensor normal(qkv::Shape shape, std::mt19937& rng) {
  // N(0, 1) data: random integers would collapse the softmax to one-hot (docs/CONVENTIONS.md §4.2).
  std::normal_distribution<float> n;
  qkv::Tensor t(std::move(shape), qkv::DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(rng);
  return t;
}

void reference_forward(benchmark::State& state, const qkv::cases::AttentionCase& c) {
  std::mt19937 rng(7);
  const qkv::Tensor q = normal({c.B, c.Hq, c.L, c.Dk}, rng),
                    k = normal({c.B, c.Hkv, c.S, c.Dk}, rng),
                    v = normal({c.B, c.Hkv, c.S, c.Dv}, rng);
  qkv::AttentionOptions o;
  o.causal = c.causal;
  o.path = qkv::Path::reference;
  for (auto _ : state) benchmark::DoNotOptimize(qkv::attention(q, k, v, o).out);
  state.counters["GFLOP"] = benchmark::Counter(
      qkv::cases::forward_flops(c) * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(qkv::cases::shape_string(c));
}

// BM_ReferenceForward/<case>, the default cases at --quick sizes (L·S ≤ 1024² a head).
[[maybe_unused]] const bool registered = [] {
  for (const qkv::cases::AttentionCase& c : qkv::cases::bench_cases())
    if (c.in_default)
      benchmark::RegisterBenchmark(("BM_ReferenceForward/" + c.name).c_str(), reference_forward,
                                   qkv::cases::quick(c))
          ->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace
