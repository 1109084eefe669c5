// `qkv bench attention`'s cases and data: what its CPU run (attention.cpp) and its GPU run
// (attention_gpu.cpp, --device cuda) share — the cases it runs, the N(0, 1) data of each, the
// checked slices and a case's JSON fields.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/attention_check.h"
#include "bench/bench.h"
#include "cases/attention_cases.h"
#include "kernels/cpu/flash_attention.h"
#include "qkv/attention.h"

namespace qkv::cli::attention_bench {

// The cases: bench/cases/attention_cases.h, shared with the kernel tests and bench/.
using Case = cases::AttentionCase;

// The benchmark runs one head dim (D = Dk = Dv), no mask, and causal only top-left with L = S
// (the checked slices rely on it): what its cases in the registry are. Throws for another.
void check_runnable(const Case& c);
// Whether the case is causal (top-left, by check_runnable).
bool causal(const Case& c);
// All of the registry's cases (--quick: their quick sizes), in its order.
std::vector<Case> all_cases(bool quick);
// The --case names in order (the default cases without any); an unknown name is a usage error.
std::vector<Case> selected_cases(const std::vector<std::string>& names, bool quick);

// Everything one case needs, generated once.
struct Data {
  Tensor q, k, v, dout;
  cpu::FlashProblem problem;
  AttentionOptions options;  // the fused path through the public API
};
// The fused kernel's problem on [B, H, L, D] float32 tensors, scaled-dot at its default scale.
cpu::FlashProblem problem_of(const Tensor& q, const Tensor& k, const Tensor& v, Causal causal);
Data make_data(const Case& c, int threads, uint64_t seed, Precision precision);
// The same data for a case whether it runs alone (--case) or with the others: FNV-1a of its name.
uint64_t seed_of(const std::string& name);
int64_t numel(const Case& c, int64_t heads, int64_t rows);
// The checked slices: the last 32 query rows of the first and the last query head (the last
// reads the last kv head, which checks the grouped-query mapping).
std::vector<bench::Slice> make_slices(const Case& c, const Data& d);

std::optional<double> ms(std::optional<double> seconds);
nlohmann::json num(std::optional<double> x);  // null when empty
// A case's name and shape, as both --list and every result row give them.
nlohmann::json case_json(const Case& c);

// --device cuda (attention_gpu.cpp).
int run_on_gpu(const BenchAttentionArgs& args);

}  // namespace qkv::cli::attention_bench
