// attention_data.h: the attention bench's cases, data, slices and JSON fields.
#include "bench/attention_data.h"

#include <algorithm>
#include <random>
#include <set>

#include "bench/common.h"
#include "qkv/json.h"

namespace qkv::cli::attention_bench {
namespace {

cpu::View view_of(const Tensor& t) {
  return {.data = t.data<float>(), .stride = {t.strides()[0], t.strides()[1], t.strides()[2]}};
}

}  // namespace

cpu::FlashProblem problem_of(const Tensor& q, const Tensor& k, const Tensor& v, Causal causal) {
  return {.B = q.dim(0),
          .Hq = q.dim(1),
          .Hkv = k.dim(1),
          .L = q.dim(2),
          .S = k.dim(2),
          .Dk = q.dim(3),
          .Dv = v.dim(3),
          .scale = static_cast<float>(default_scale(Score::scaled_dot, q.dim(3))),
          .causal = causal,
          .q = view_of(q),
          .k = view_of(k),
          .v = view_of(v)};
}

// The benchmark runs one head dim (D = Dk = Dv), no mask, and causal only top-left with L = S
// (the checked slices rely on it): what its cases in the registry are.
void check_runnable(const Case& c) {
  if (c.Dk != c.Dv || c.mask != cases::Mask::none ||
      (c.causal != Causal::none && (c.causal != Causal::top_left || c.L != c.S)))
    throw Error("bench attention: case " + c.name + " (" + cases::shape_string(c) + ", causal " +
                    std::string(to_string(c.causal)) + ", mask " +
                    std::string(cases::to_string(c.mask)) +
                    ") is not one this benchmark runs: Dk = Dv, no mask, causal top-left on L = S",
                Error::Kind::runtime);
}

// Whether the case is causal (top-left, by check_runnable).
bool causal(const Case& c) { return c.causal != Causal::none; }

// All of the registry's cases (--quick: their quick sizes), in its order.
std::vector<Case> all_cases(bool quick) {
  std::vector<Case> all;
  for (const Case& c : cases::bench_cases()) {
    all.push_back(quick ? cases::quick(c) : c);
    check_runnable(all.back());
  }
  return all;
}

std::vector<Case> selected_cases(const std::vector<std::string>& names, bool quick) {
  const std::vector<Case> all = all_cases(quick);
  if (names.empty()) {
    std::vector<Case> chosen;
    for (const Case& c : all)
      if (c.in_default) chosen.push_back(c);
    return chosen;
  }
  std::vector<Case> chosen;
  std::set<std::string> seen;
  for (const std::string& name : names) {
    auto it = std::find_if(all.begin(), all.end(), [&](const Case& c) { return c.name == name; });
    if (it == all.end()) {
      std::string known;
      for (const Case& c : all) known += (known.empty() ? "" : ", ") + c.name;
      throw Error("--case '" + name + "' is unknown; expected one of: " + known);
    }
    if (seen.insert(name).second) chosen.push_back(*it);
  }
  return chosen;
}

Data make_data(const Case& c, int threads, uint64_t seed, Precision precision) {
  std::mt19937_64 rng(seed);
  Data d;
  d.q = bench::normal_tensor({c.B, c.Hq, c.L, c.Dk}, rng);
  d.k = bench::normal_tensor({c.B, c.Hkv, c.S, c.Dk}, rng);
  d.v = bench::normal_tensor({c.B, c.Hkv, c.S, c.Dk}, rng);
  if (c.backward) d.dout = bench::normal_tensor({c.B, c.Hq, c.L, c.Dk}, rng);
  d.problem = problem_of(d.q, d.k, d.v, c.causal);
  d.problem.precision = precision;
  d.options.causal = c.causal;
  d.options.precision = precision;
  d.options.path = Path::fused;
  d.options.num_threads = threads;
  return d;
}

// The same data for a case whether it runs alone (--case) or with the others: FNV-1a of its name.
uint64_t seed_of(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  return h;
}

int64_t numel(const Case& c, int64_t heads, int64_t rows) { return c.B * heads * rows * c.Dk; }

// The checked slices: the last 32 query rows of the first and the last query head (the last
// reads the last kv head, which checks the grouped-query mapping).
std::vector<bench::Slice> make_slices(const Case& c, const Data& d) {
  std::vector<bench::Slice> slices;
  for (int64_t h : {int64_t{0}, c.Hq - 1}) {
    slices.push_back(bench::make_slice(d.q, d.k, d.v, d.dout, causal(c), h, 32, c.backward,
                                       d.options.precision));
    if (c.Hq == 1) break;
  }
  return slices;
}

std::optional<double> ms(std::optional<double> seconds) {
  if (!seconds) return std::nullopt;
  return *seconds * 1e3;
}

nlohmann::json num(std::optional<double> x) { return x ? number_json(*x) : nlohmann::json(); }

// A case's name and shape, as both --list and every result row give them.
nlohmann::json case_json(const Case& c) {
  return {{"case", c.name}, {"B", c.B}, {"Hq", c.Hq}, {"Hkv", c.Hkv},
          {"L", c.L},       {"S", c.S}, {"D", c.Dk},  {"causal", causal(c)}};
}

}  // namespace qkv::cli::attention_bench
