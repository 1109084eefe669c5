#include "cases/attention_cases.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "qkv/attention.h"

namespace qkv::cases {

std::string_view to_string(Mask mask) {
  switch (mask) {
    case Mask::none:
      return "none";
    case Mask::key_lengths:
      return "key_lengths";
    case Mask::boolean:
      return "bool";
    case Mask::additive:
      return "float";
  }
  return "?";
}

AttentionCase scaled(AttentionCase c, int64_t factor) {
  if (c.scale_L) c.L = std::max<int64_t>(c.L / factor, 1);
  c.S = std::max<int64_t>(c.S / factor, 1);
  return c;
}

double forward_flops(const AttentionCase& c) {
  const double f = 2.0 * c.B * c.Hq * c.L * c.S * (c.Dk + c.Dv);
  return c.causal != Causal::none ? f / 2 : f;
}

double backward_flops(const AttentionCase& c) { return 2.5 * forward_flops(c); }

std::string shape_string(const AttentionCase& c) {
  std::ostringstream s;
  if (c.B != 1) s << "B" << c.B << " ";
  s << "H" << c.Hq;
  if (c.Hkv != c.Hq) s << "/" << c.Hkv;
  s << " L" << c.L << " S" << c.S;
  if (c.Dk == c.Dv)
    s << " D" << c.Dk;
  else
    s << " Dk" << c.Dk << " Dv" << c.Dv;
  return s.str();
}

// ---- the benchmark ----

namespace {

// A benchmark case: heads, lengths and one head dim.
AttentionCase bench(std::string name, int64_t H, int64_t Hkv, int64_t L, int64_t S, int64_t D,
                    Causal causal = Causal::none) {
  return {.name = std::move(name),
          .Hq = H,
          .Hkv = Hkv,
          .L = L,
          .S = S,
          .Dk = D,
          .Dv = D,
          .causal = causal};
}

}  // namespace

const std::vector<AttentionCase>& bench_cases() {
  static const std::vector<AttentionCase> cases = [] {
    constexpr Causal top_left = Causal::top_left;
    std::vector<AttentionCase> c{
        bench("1k", 8, 8, 1024, 1024, 64),
        bench("1k-causal", 8, 8, 1024, 1024, 64, top_left),
        bench("4k", 8, 8, 4096, 4096, 64),
        bench("4k-causal", 8, 8, 4096, 4096, 64, top_left),
        bench("16k", 8, 8, 16384, 16384, 64),
        bench("16k-causal", 8, 8, 16384, 16384, 64, top_left),
        bench("4k-d128", 4, 4, 4096, 4096, 128),
        bench("4k-gqa", 8, 2, 4096, 4096, 64),
        bench("decode", 32, 8, 1, 8192, 128),
        bench("long", 1, 1, 65536, 65536, 64),
    };
    c[8].scale_L = false;  // decode: one query row at any size
    c[9].backward = false, c[9].in_default = false;
    return c;
  }();
  return cases;
}

const AttentionCase* find_bench_case(std::string_view name) {
  for (const AttentionCase& c : bench_cases())
    if (c.name == name) return &c;
  return nullptr;
}

// ---- the kernel tests' sweeps ----

namespace {

// A sweep's case, named by its shape (and causal alignment, when it has one).
AttentionCase shape(int64_t B, int64_t Hq, int64_t Hkv, int64_t L, int64_t S, int64_t Dk,
                    int64_t Dv, Causal causal = Causal::none) {
  AttentionCase c{
      .B = B, .Hq = Hq, .Hkv = Hkv, .L = L, .S = S, .Dk = Dk, .Dv = Dv, .causal = causal};
  c.name = shape_string(c);
  if (causal != Causal::none) c.name += " causal " + std::string(qkv::to_string(causal));
  return c;
}

}  // namespace

const std::vector<int64_t>& tile_lengths() {
  static const std::vector<int64_t> n{0,   1,   2,   17,  63,  64,  65,  97,
                                      127, 128, 129, 255, 256, 257, 267, 1025};
  return n;
}

const std::vector<int64_t>& head_dims() {
  static const std::vector<int64_t> d{1, 8, 21, 32, 59, 64, 111, 128, 203, 256};
  return d;
}

std::vector<AttentionCase> length_sweep() {
  const std::vector<int64_t>& dims = head_dims();
  constexpr int64_t kRatios[] = {1, 2, 4, 8};
  constexpr Causal kCausal[] = {Causal::none, Causal::top_left, Causal::bottom_right};
  constexpr int64_t kBudget = 60'000'000;  // B·Hq·L·S·(Dk + Dv)
  std::vector<AttentionCase> cases;
  uint64_t idx = 0;
  for (int64_t L : tile_lengths())
    for (int64_t S : tile_lengths()) {
      int64_t B = 1 + static_cast<int64_t>(idx / 8 % 2);
      int64_t Hkv = 1 + static_cast<int64_t>(idx / 4 % 2);
      int64_t Hq = kRatios[idx % 4] * Hkv;
      int64_t Dk = dims[idx % 10];
      int64_t Dv = idx % 3 == 0 ? Dk : dims[(idx * 7 + 3) % 10];
      auto cost = [&] { return B * Hq * L * S * (Dk + Dv); };
      if (cost() > kBudget) B = 1;
      while (cost() > kBudget && Hq > 1) Hq /= 2, Hkv = std::min(Hkv, Hq);
      while (cost() > kBudget && (Dk > 32 || Dv > 32))
        Dk = std::max<int64_t>(Dk / 2, 1), Dv = std::max<int64_t>(Dv / 2, 1);
      cases.push_back(shape(B, Hq, Hkv, L, S, Dk, Dv, kCausal[idx / 16 % 3]));
      ++idx;
    }
  return cases;
}

std::vector<AttentionCase> head_dim_sweep() {
  const std::vector<int64_t>& dims = head_dims();
  std::vector<AttentionCase> cases;
  for (std::size_t di = 0; di < dims.size(); ++di) {
    const int64_t D = dims[di];
    const int64_t other = dims[(cases.size() * 3 + 5) % dims.size()];
    for (int64_t Dv : {D, other == D ? int64_t{7} : other}) {
      cases.push_back(shape(1, 2, 1, 65, 129, D, Dv));
      cases.push_back(shape(2, 2, 2, 17, 257, D, Dv));
    }
  }
  return cases;
}

std::vector<AttentionCase> gqa_sweep() {
  std::vector<AttentionCase> cases;
  for (int64_t ratio : {1, 2, 4, 8})
    for (int64_t hkv : {1, 2, 3}) cases.push_back(shape(2, ratio * hkv, hkv, 97, 129, 64, 32));
  return cases;
}

std::vector<AttentionCase> mask_shapes() {
  return {shape(2, 4, 2, 129, 257, 64, 64), shape(1, 2, 1, 267, 97, 21, 32),
          shape(2, 8, 2, 64, 1025, 32, 59), shape(1, 1, 1, 1025, 65, 128, 128),
          shape(2, 3, 3, 1, 300, 8, 8)};
}

std::vector<AttentionCase> backward_mask_shapes() {
  return {shape(2, 4, 2, 129, 257, 64, 32), shape(2, 2, 1, 267, 63, 21, 59)};
}

std::vector<AttentionCase> first_tile_shapes() {
  return {shape(1, 2, 1, 97, 300, 64, 64), shape(2, 2, 2, 130, 513, 32, 21),
          shape(1, 4, 1, 65, 267, 128, 128)};
}

std::vector<AttentionCase> masked_row_shapes() {
  return {shape(1, 2, 1, 97, 129, 64, 64), shape(2, 4, 2, 300, 65, 32, 21)};
}

std::vector<AttentionCase> large_logit_shapes() {
  return {shape(1, 2, 1, 129, 257, 64, 64), shape(2, 2, 2, 65, 97, 8, 8),
          shape(1, 1, 1, 257, 129, 128, 32)};
}

std::vector<AttentionCase> scale_shapes() {
  return {shape(1, 4, 2, 97, 257, 64, 59), shape(2, 2, 1, 129, 65, 21, 32)};
}

std::vector<AttentionCase> empty_shapes() {
  return {shape(1, 2, 1, 0, 5, 8, 8), shape(1, 1, 1, 0, 0, 8, 8), shape(2, 4, 2, 5, 0, 8, 21),
          shape(1, 1, 1, 130, 0, 64, 64), shape(2, 2, 1, 0, 129, 32, 16)};
}

std::vector<AttentionCase> decode_shapes() {
  return {shape(1, 32, 8, 1, 3001, 128, 128), shape(1, 8, 1, 1, 4099, 64, 64),
          shape(2, 4, 4, 1, 3000, 21, 32), shape(1, 8, 2, 4, 3072, 64, 64)};
}

std::vector<AttentionCase> non_finite_shapes() {
  return {shape(2, 4, 2, 200, 300, 32, 32), shape(2, 4, 2, 200, 300, 21, 59)};
}

std::vector<AttentionCase> unfused_length_sweep() {
  std::vector<AttentionCase> cases;
  for (int64_t L : {1, 2, 17, 97})
    for (int64_t S : {1, 17, 97}) cases.push_back(shape(2, 2, 2, L, S, 21, 21));
  return cases;
}

std::vector<AttentionCase> unfused_causal_sweep() {
  std::vector<AttentionCase> cases;
  for (Causal causal : {Causal::top_left, Causal::bottom_right})
    for (auto [L, S] : {std::pair<int64_t, int64_t>{17, 17}, {9, 30}, {30, 9}, {1, 40}})
      cases.push_back(shape(1, 2, 2, L, S, 8, 8, causal));
  return cases;
}

std::vector<AttentionCase> unfused_gqa_sweep() {
  std::vector<AttentionCase> cases;
  for (int64_t Hkv : {1, 2, 4}) cases.push_back(shape(2, 4, Hkv, 19, 23, 16, 16));
  cases.push_back(shape(1, 8, 2, 1, 300, 32, 32));  // decode
  return cases;
}

}  // namespace qkv::cases
