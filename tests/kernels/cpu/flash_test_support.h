// tests/kernels/cpu/flash_test_support.h — the shared harness of flash_forward_test.cpp and
// flash_backward_test.cpp: cases, runners, the tolerance rule and its checks, masks and plants.
//
// The fused fp32 attention (Path::fused: FlashAttention-2 tiling, vectorized, multithreaded)
// against the float64 reference, forward and backward.
//
// The rule (docs/CONVENTIONS.md §1.1): for the fused result X, the float64 reference R of the same
// float32 inputs and the plain fp32 naive result N of fp32_naive.h,
//   max|X − R| ≤ 2·max|N − R| + 1e-6  for out and logsumexp,
//   max|X − R| ≤ 4·max|N − R| + 1e-6  for dq, dk, dv,
// and NaN/±∞ exactly where R has them (for gradients: non-finite exactly where R is, NaN or ±∞
// being an accident of ∞ − ∞ against ∞·0); a row with nothing to attend to gives out and dq exactly
// 0 and a key nobody sees dk and dv exactly 0. ∂loss/∂scale, a scalar, is held to a derived
// rounding model (dscale_rounding_sigma in fp32_naive.h). Every case prints its parameters and seed
// when it fails, and each test prints how close it came to its tolerance.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cases/attention_cases.h"
#include "cases/naive_fp32.h"
#include "kernels/cpu/fp32_naive.h"
#include "kernels/cpu/vec_ops.h"
#include "kernels/reference/naive_attention.h"
#include "qkv/attention.h"
#include "qkv/tensor.h"
#include "simd_targets.h"
#if defined(QKV_SIMT_EMULATOR)
#include "kernels/cuda/emulated_backend.h"
#endif

namespace qkv_test::flash {

using qkv::AttentionGrads;
using qkv::AttentionOptions;
using qkv::AttentionResult;
using qkv::Causal;
using qkv::DType;
using qkv::Path;
using qkv::Score;
using qkv::Shape;
using qkv::Tensor;

// The rule of docs/CONVENTIONS.md §1.1, stated once in bench/cases/naive_fp32.h.
using qkv::cases::kFloor;
using qkv::cases::kGradFactor;
using qkv::cases::kOutputFactor;

// ---- which fused kernels ----

// The path the sweeps run as "the fused kernels": Path::fused on the CPU, or Path::cuda in a
// suite's Cuda instance — the GPU where one is present, else the CUDA kernels' own source on the
// SIMT emulator (tests/kernels/cuda). The same cases and the same tolerance rule hold on both.
inline Path& fused_path() {
  static Path path = Path::fused;
  return path;
}
inline bool on_cuda() { return fused_path() == Path::cuda; }

inline constexpr int64_t kCudaTarget = -1;  // the parameter of a suite's Cuda instance

// A suite run once per SIMD target (simd_targets.h) and once more on Path::cuda.
class PerFusedPath : public PerSimdTarget {
 protected:
  void SetUp() override {
    if (GetParam() != kCudaTarget) return PerSimdTarget::SetUp();
#if defined(QKV_SIMT_EMULATOR)
    device_ = std::make_unique<CudaOrEmulator>();
    fused_path() = Path::cuda;
    std::cout << "[ cuda     ] "
              << (device_->emulated() ? "the SIMT emulator (no GPU)"
                                      : qkv::cuda_device().description)
              << "\n";
#else
    GTEST_SKIP() << "Path::cuda: this build has no SIMT emulator (a sanitized build) and "
                 << qkv::cuda_device().description;
#endif
  }
  void TearDown() override {
    if (GetParam() != kCudaTarget) return PerSimdTarget::TearDown();
    fused_path() = Path::fused;
#if defined(QKV_SIMT_EMULATOR)
    device_.reset();
#endif
  }
  bool emulated() const {
#if defined(QKV_SIMT_EMULATOR)
    return device_ && device_->emulated();
#else
    return false;
#endif
  }

 private:
#if defined(QKV_SIMT_EMULATOR)
  std::unique_ptr<CudaOrEmulator> device_;
#endif
};

inline std::string fused_path_name(const testing::TestParamInfo<int64_t>& info) {
  return info.param == kCudaTarget ? "cuda" : simd_target_name(info);
}

// ---- cases ----

using CaseSetup = std::function<void(Case&)>;

// One problem of the sweep: sizes, data (N(0,1) from `seed`, times input_scale, rounded to
// float32), and `setup` for masks, causality, scale or planted NaNs.
struct Spec {
  std::string name;
  int64_t B = 1, Hq = 1, Hkv = 1, L = 1, S = 1, Dk = 8, Dv = 8;
  uint64_t seed = 1;
  Score score = Score::scaled_dot;
  std::optional<double> scale;
  double input_scale = 1;
  CaseSetup setup;
};

// The sweeps' shapes come from the case registry (bench/cases/attention_cases.h), shared with
// `qkv bench attention`; masks, causality where a sweep adds its own, scales and data are the
// tests'.
namespace cases = qkv::cases;

// A registry case's sizes as a Spec; its name, seed and setup are the caller's.
inline Spec sized(const cases::AttentionCase& c) {
  Spec s;
  s.B = c.B, s.Hq = c.Hq, s.Hkv = c.Hkv, s.L = c.L, s.S = c.S, s.Dk = c.Dk, s.Dv = c.Dv;
  return s;
}

// The benchmark's cases are checked at 1/64 of their sequence lengths (a decode step keeps its
// one query): 16k becomes 256, within what the float64 reference checks in a fraction of a second.
inline constexpr int64_t kBenchScale = 64;

inline Case build(const Spec& s) {
  Case c = make_case(s.score, s.B, s.Hq, s.Hkv, s.L, s.S, s.Dk, s.Dk, s.Dv, s.seed);
  c.scale = s.scale;
  for (auto* x : {&c.q, &c.k, &c.v})
    for (double& e : *x) e = static_cast<float>(e * s.input_scale);
  if (s.setup) s.setup(c);
  return c;
}

inline std::string label_of(const Spec& s, const Case& c) {
  std::ostringstream os;
  os << "[" << s.name << "] inputs x" << s.input_scale << " | " << c.describe();
  return os.str();
}

inline AttentionOptions options_for(const Case& c, Path path, int threads = 0) {
  AttentionOptions o;
  o.score = c.score;
  o.scale = c.scale;
  o.causal = c.causal;
  if (c.mask_kind != MaskKind::none) o.mask = tensor_of(c.mask_shape, c.mask, c.mask_dtype);
  o.key_lengths = c.key_lengths;
  o.need_logsumexp = true;
  o.path = path == Path::fused ? fused_path() : path;
  o.num_threads = threads;
  return o;
}

// The fused path on float32 tensors; the reference on float64 copies of the same values.
inline AttentionResult run_fused(const Case& c, int threads = 0) {
  return qkv::attention(
      tensor_of(c.q_shape(), c.q, DType::f32), tensor_of(c.k_shape(), c.k, DType::f32),
      tensor_of(c.v_shape(), c.v, DType::f32), options_for(c, Path::fused, threads));
}
inline AttentionResult run_reference(const Case& c) {
  return qkv::attention(tensor_of(c.q_shape(), c.q, DType::f64),
                        tensor_of(c.k_shape(), c.k, DType::f64),
                        tensor_of(c.v_shape(), c.v, DType::f64), options_for(c, Path::reference));
}

// dout ~ N(0,1), rounded to float32 so that every path differentiates the same loss.
inline std::vector<double> dout_of(const Case& c) {
  std::vector<double> g = Normal(c.seed + 77).vec(numel_of(c.out_shape()));
  for (double& e : g) e = static_cast<float>(e);
  return g;
}
inline AttentionGrads run_fused_backward(const Case& c, const std::vector<double>& g,
                                         int threads = 0) {
  return qkv::attention_backward(
      tensor_of(c.out_shape(), g, DType::f32), tensor_of(c.q_shape(), c.q, DType::f32),
      tensor_of(c.k_shape(), c.k, DType::f32), tensor_of(c.v_shape(), c.v, DType::f32),
      options_for(c, Path::fused, threads));
}
inline AttentionGrads run_reference_backward(const Case& c, const std::vector<double>& g) {
  return qkv::attention_backward(
      tensor_of(c.out_shape(), g, DType::f64), tensor_of(c.q_shape(), c.q, DType::f64),
      tensor_of(c.k_shape(), c.k, DType::f64), tensor_of(c.v_shape(), c.v, DType::f64),
      options_for(c, Path::reference));
}

// ---- the tolerance rule ----

// The worst max|X − R| / tol of a test, printed when the test ends: how much room is left.
// Also the largest value seen of a few named measurements (dscale's |N − R|/σ and |X − R|/σ).
class Tally {
 public:
  explicit Tally(std::string name)
      : name_(std::move(name)), start_(std::chrono::steady_clock::now()) {
    current_ = this;
  }
  ~Tally() {
    current_ = nullptr;
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::cout << "[ tally    ] " << name_ << " on " << qkv::cpu::simd_target() << ": " << cases_
              << " cases in " << s << " s; worst max|X-R|/tol = " << worst_;
    if (worst_ > 0) std::cout << " (" << worst_what_ << " of " << worst_case_ << ")";
    for (const auto& [what, value] : maxima_) std::cout << "; max " << what << " = " << value;
    std::cout << "\n";
  }
  static void note(std::string_view what, double ratio) {
    if (current_ && ratio > current_->worst_) {
      current_->worst_ = ratio;
      current_->worst_what_ = what;
      current_->worst_case_ = current_->label_;
    }
  }
  static void note_max(const std::string& what, double value) {
    if (!current_) return;
    auto it = std::find_if(current_->maxima_.begin(), current_->maxima_.end(),
                           [&](const auto& m) { return m.first == what; });
    if (it == current_->maxima_.end())
      current_->maxima_.emplace_back(what, value);
    else
      it->second = std::max(it->second, value);
  }
  static void begin_case(const std::string& label) {
    if (!current_) return;
    ++current_->cases_;
    current_->label_ = label;
  }

 private:
  static inline Tally* current_ = nullptr;
  std::string name_, label_, worst_what_, worst_case_;
  std::chrono::steady_clock::time_point start_;
  std::vector<std::pair<std::string, double>> maxima_;
  int cases_ = 0;
  double worst_ = 0;
};

// Which rows see nothing (out, dq exactly 0; logsumexp −∞) and which keys nobody sees (dk, dv
// exactly 0), from the mask semantics alone. One flag per row of the last dimension.
struct Blind {
  std::vector<char> rows;  // [B, Hq, L]
  std::vector<char> keys;  // [B, Hkv, S]
};
inline Blind blind_of(const Case& c) {
  Blind z;
  z.rows.assign(static_cast<size_t>(c.B * c.Hq * c.L), 1);
  z.keys.assign(static_cast<size_t>(c.B * c.Hkv * c.S), 1);
  const int64_t ratio = c.Hq / c.Hkv;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h)
      for (int64_t i = 0; i < c.L; ++i)
        for (int64_t j = 0; j < c.S; ++j)
          if (visible(c, b, h, i, j)) {
            z.rows[static_cast<size_t>((b * c.Hq + h) * c.L + i)] = 0;
            z.keys[static_cast<size_t>((b * c.Hkv + h / ratio) * c.S + j)] = 0;
          }
  return z;
}

struct Rule {
  double factor;
  // Rows (of the last dimension) that must be exactly 0 in X: nothing seen, nothing flows.
  const std::vector<char>* zero_rows = nullptr;
  // Outputs: NaN where R has NaN and the same ∞ where it has ∞. Gradients: non-finite exactly
  // where R is; NaN against ±∞ there is an accident of the order of operations (∞ − ∞ or ∞·0).
  bool exact_non_finite = true;
};

// X (a float32 tensor of `shape`) against R and N under the rule.
inline ::testing::AssertionResult within_rule(std::string_view what, const Tensor& got,
                                              const Shape& shape, const std::vector<double>& naive,
                                              const std::vector<double>& ref, const Rule& rule) {
  if (auto ok = has_shape(what, got, shape, DType::f32); !ok) return ok;
  const std::vector<double> x = values_of(got);
  if (ref.size() != x.size() || naive.size() != x.size())
    return ::testing::AssertionFailure() << what << ": " << x.size() << " elements, reference "
                                         << ref.size() << ", naive " << naive.size();
  const int64_t last = shape.empty() ? 1 : std::max<int64_t>(shape.back(), 1);
  int64_t misses = 0;
  std::ostringstream os;
  auto miss = [&](size_t i, const std::string& why) {
    if (misses++ < 4)
      os << "\n  " << what << index_string(shape, static_cast<int64_t>(i)) << ": " << why
         << " (X = " << x[i] << ", R = " << ref[i] << ", N = " << naive[i] << ")";
  };
  double max_xr = 0, max_nr = 0, max_ref = 0;
  int64_t at_xr = -1, at_nr = -1;
  for (size_t i = 0; i < x.size(); ++i) {
    const double r = ref[i], g = x[i], n = naive[i];
    if (!std::isfinite(r)) {
      const bool same = !rule.exact_non_finite ? !std::isfinite(g)
                        : std::isnan(r)        ? std::isnan(g)
                                               : g == r;
      if (!same) miss(i, "non-finite pattern differs from R");
      continue;
    }
    if (!std::isfinite(g)) {
      miss(i, "X is not finite where R is");
      continue;
    }
    if (rule.zero_rows && (*rule.zero_rows)[i / static_cast<size_t>(last)] && g != 0)
      miss(i, "must be exactly 0 (a row that sees nothing, or a key nobody sees)");
    if (!std::isfinite(n)) {
      miss(i, "the naive fp32 N is not finite where R is: the yardstick is broken");
      continue;
    }
    max_ref = std::max(max_ref, std::abs(r));
    if (std::abs(n - r) > max_nr) max_nr = std::abs(n - r), at_nr = static_cast<int64_t>(i);
    if (std::abs(g - r) > max_xr) max_xr = std::abs(g - r), at_xr = static_cast<int64_t>(i);
  }
  const double tol = qkv::cases::rule_tolerance(max_nr, rule.factor);
  std::ostringstream stats;
  stats << what << ": max|X-R| = " << max_xr;
  if (at_xr >= 0) stats << " at " << index_string(shape, at_xr);
  stats << ", max|N-R| = " << max_nr;
  if (at_nr >= 0) stats << " at " << index_string(shape, at_nr);
  stats << ", tol = " << rule.factor << "*max|N-R| + " << kFloor << " = " << tol;
  if (misses)
    return ::testing::AssertionFailure()
           << misses << " of " << x.size() << " elements of " << what
           << " break the non-finite/zero pattern" << os.str() << "\n  " << stats.str();
  // A yardstick far from the reference would make the rule vacuous: fp32 does far better.
  if (max_nr > 1e-3 * (1 + max_ref))
    return ::testing::AssertionFailure() << "the naive fp32 result is too far from the reference "
                                         << "for the rule to mean anything: " << stats.str();
  Tally::note(what, max_xr / tol);
  if (max_xr > tol) {
    const double r = ref[static_cast<size_t>(at_xr)];
    return ::testing::AssertionFailure()
           << stats.str() << " — exceeded: X = " << x[static_cast<size_t>(at_xr)] << ", R = " << r;
  }
  return ::testing::AssertionSuccess() << stats.str();
}

inline ::testing::AssertionResult forward_matches(const Case& c, const AttentionResult& x) {
  const AttentionResult r = run_reference(c);
  const NaiveForward n = naive_forward<float>(c);
  const Blind blind = blind_of(c);
  if (auto ok = within_rule("out", x.out, c.out_shape(), n.out, values_of(r.out),
                            {.factor = kOutputFactor, .zero_rows = &blind.rows});
      !ok)
    return ok;
  return within_rule("logsumexp", x.logsumexp, c.lse_shape(), n.lse, values_of(r.logsumexp),
                     {.factor = kOutputFactor});
}

// ∂loss/∂scale within one σ of the rounding model (dscale_rounding_sigma in fp32_naive.h). σ
// over-estimates the standard deviation of a float32 computation: every component takes u per
// operation and Σ|terms| where the true spread is smaller. Measured over the 79 backward cases
// here: |N − R| ≤ 0.09σ for the textbook fp32 backward, |X − R| ≤ 0.10σ for the fused kernel; so
// 1σ leaves a 10× margin over both, while a relative error of 1e-4 in dscale fails
// (FlashChecker.BackwardCheckHasTeeth: there σ = 2.5e-5·|dscale|).
inline constexpr double kDscaleSigmas = 1;

inline ::testing::AssertionResult dscale_matches(const Case& c, const std::vector<double>& g,
                                                 double x, double n, double r) {
  if (!std::isfinite(r)) {
    if (!std::isfinite(x)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "dscale = " << x << ", reference " << r;
  }
  const double sigma = dscale_rounding_sigma(c, g);
  const double tol = kDscaleSigmas * sigma;
  std::ostringstream stats;
  stats << "dscale: X = " << x << ", R = " << r << ", N = " << n << "; |X-R| = " << std::abs(x - r)
        << ", |N-R| = " << std::abs(n - r) << ", sigma = " << sigma << ", tol = " << kDscaleSigmas
        << " sigma = " << tol << " (" << (r != 0 ? tol / std::abs(r) : 0) << " of |R|)";
  if (sigma > 0) {
    if (r != 0) Tally::note_max("dscale tol/|R|", tol / std::abs(r));
    Tally::note_max("dscale |N-R|/sigma", std::abs(n - r) / sigma);
    Tally::note_max("dscale |X-R|/sigma", std::abs(x - r) / sigma);
  }
  if (!(std::abs(n - r) <= tol))
    return ::testing::AssertionFailure()
           << "the rounding model does not cover the naive fp32 backward: " << stats.str();
  Tally::note("dscale", tol > 0 ? std::abs(x - r) / tol : (x == r ? 0 : 1e300));
  if (!(std::abs(x - r) <= tol)) return ::testing::AssertionFailure() << stats.str();
  return ::testing::AssertionSuccess() << stats.str();
}

inline ::testing::AssertionResult backward_matches(const Case& c, const std::vector<double>& g,
                                                   const AttentionGrads& x) {
  const AttentionGrads r = run_reference_backward(c, g);
  const NaiveGrads n = naive_backward<float>(c, g);
  const Blind blind = blind_of(c);
  auto rule = [](const std::vector<char>& zeros) {
    return Rule{.factor = kGradFactor, .zero_rows = &zeros, .exact_non_finite = false};
  };
  if (auto ok = within_rule("dq", x.dq, c.q_shape(), n.dq, values_of(r.dq), rule(blind.rows)); !ok)
    return ok;
  if (auto ok = within_rule("dk", x.dk, c.k_shape(), n.dk, values_of(r.dk), rule(blind.keys)); !ok)
    return ok;
  if (auto ok = within_rule("dv", x.dv, c.v_shape(), n.dv, values_of(r.dv), rule(blind.keys)); !ok)
    return ok;
  return dscale_matches(c, g, x.dscale, n.dscale, r.dscale);
}

// Runs one case; an exception (say "not implemented") fails the case, not the whole sweep.
inline void check_forward(const Spec& s) {
  const Case c = build(s);
  const std::string label = label_of(s, c);
  SCOPED_TRACE(label);
  Tally::begin_case(label);
  try {
    EXPECT_TRUE(forward_matches(c, run_fused(c)));
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw: " << e.what();
  }
}

inline void check_backward(const Spec& s) {
  const Case c = build(s);
  const std::string label = label_of(s, c) + " dout seed " + std::to_string(c.seed + 77);
  SCOPED_TRACE(label);
  Tally::begin_case(label);
  try {
    const std::vector<double> g = dout_of(c);
    EXPECT_TRUE(backward_matches(c, g, run_fused_backward(c, g)));
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw: " << e.what();
  }
}

// ---- masks ----

inline CaseSetup causal(Causal kind) {
  return [kind](Case& c) { c.causal = kind; };
}
inline CaseSetup bool_mask_ls(double p) {
  return [p](Case& c) { set_bool_mask(c, {c.L, c.S}, p, c.seed + 1); };
}
inline CaseSetup key_lengths(std::function<int64_t(const Case&, int64_t b)> len) {
  return [len](Case& c) {
    c.key_lengths.resize(static_cast<size_t>(c.B));
    for (int64_t b = 0; b < c.B; ++b) c.key_lengths[static_cast<size_t>(b)] = len(c, b);
  };
}
inline CaseSetup both(CaseSetup a, CaseSetup b) {
  return [a, b](Case& c) { a(c), b(c); };
}
// A bool mask [B, Hq, L, S] given by a predicate.
inline CaseSetup bool_mask_where(
    std::function<bool(int64_t b, int64_t h, int64_t i, int64_t j)> keep) {
  return [keep](Case& c) {
    c.mask_kind = MaskKind::boolean;
    c.mask_dtype = DType::b8;
    c.mask_shape = {c.B, c.Hq, c.L, c.S};
    c.mask.assign(static_cast<size_t>(c.B * c.Hq * c.L * c.S), 0.0);
    size_t at = 0;
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.Hq; ++h)
        for (int64_t i = 0; i < c.L; ++i)
          for (int64_t j = 0; j < c.S; ++j) c.mask[at++] = keep(b, h, i, j) ? 1.0 : 0.0;
  };
}
// A float32 mask [L, S] given by a function (−∞ masks).
inline CaseSetup float_mask_ls(std::function<double(int64_t i, int64_t j)> value) {
  return [value](Case& c) {
    c.mask_kind = MaskKind::additive;
    c.mask_dtype = DType::f32;
    c.mask_shape = {c.L, c.S};
    c.mask.resize(static_cast<size_t>(c.L * c.S));
    for (int64_t i = 0; i < c.L; ++i)
      for (int64_t j = 0; j < c.S; ++j)
        c.mask[static_cast<size_t>(i * c.S + j)] = static_cast<float>(value(i, j));
  };
}

struct MaskSpec {
  const char* name;
  CaseSetup setup;
};

inline const std::vector<MaskSpec>& mask_specs() {
  static const std::vector<MaskSpec> specs = {
      {"none", nullptr},
      {"bool [L,S] p=0.5", bool_mask_ls(0.5)},
      {"bool [B,1,1,S] p=0.7",
       [](Case& c) {
         set_bool_mask(c, {c.B, 1, 1, c.S}, 0.7, c.seed + 2);
       }},
      {"bool [B,Hq,L,S] p=0.8",
       [](Case& c) {
         set_bool_mask(c, {c.B, c.Hq, c.L, c.S}, 0.8, c.seed + 3);
       }},
      {"bool [1,Hq,1,S] p=0.6",
       [](Case& c) {
         set_bool_mask(c, {1, c.Hq, 1, c.S}, 0.6, c.seed + 4);
       }},
      {"bool [S] p=0.6", [](Case& c) { set_bool_mask(c, {c.S}, 0.6, c.seed + 5); }},
      {"bool [L,S] p=0.05 (whole tiles empty)", bool_mask_ls(0.05)},
      {"float32 [L,S] finite",
       [](Case& c) {
         set_float_mask(c, {c.L, c.S}, 0, DType::f32, c.seed + 6);
       }},
      {"float32 [B,Hq,L,S] -inf p=0.3",
       [](Case& c) {
         set_float_mask(c, {c.B, c.Hq, c.L, c.S}, 0.3, DType::f32, c.seed + 7);
       }},
      {"float64 [B,1,L,S] -inf p=0.2 (not float32 values)",
       [](Case& c) {
         set_float_mask(c, {c.B, 1, c.L, c.S}, 0.2, DType::f64, c.seed + 8);
       }},
      {"causal top_left", causal(Causal::top_left)},
      {"causal bottom_right", causal(Causal::bottom_right)},
      {"key_lengths {129 or S, S-1}", key_lengths([](const Case& c, int64_t b) {
         return b == 0 ? std::min<int64_t>(c.S, 129) : c.S - 1;
       })},
      {"key_lengths {0, S}",
       key_lengths([](const Case& c, int64_t b) { return b == 0 ? 0 : c.S; })},
      {"bool [L,S] p=0.7 + top_left + key_lengths {S/2+1}",
       both(both(bool_mask_ls(0.7), causal(Causal::top_left)),
            key_lengths([](const Case& c, int64_t) { return c.S / 2 + 1; }))},
      {"float32 [B,1,1,S] -inf p=0.1 + bottom_right",
       both(
           [](Case& c) {
             set_float_mask(c, {c.B, 1, 1, c.S}, 0.1, DType::f32, c.seed + 9);
           },
           causal(Causal::bottom_right))},
  };
  return specs;
}

// A first key tile (of 64, 128 or 256) with nothing visible must not poison the running max
// (exp(−∞ − (−∞)) = NaN), and a first tile far below the rest must be rescaled away.
inline const std::vector<MaskSpec>& first_tile_masks() {
  static const std::vector<MaskSpec> masks = {
      {"bool: keys 0..129 masked in every row",
       bool_mask_where([](int64_t, int64_t, int64_t, int64_t j) { return j >= 130; })},
      {"bool: keys 0..255 masked in every row",
       bool_mask_where([](int64_t, int64_t, int64_t, int64_t j) { return j >= 256; })},
      {"bool: keys 0..129 masked in odd rows only",
       bool_mask_where(
           [](int64_t, int64_t, int64_t i, int64_t j) { return i % 2 == 0 || j >= 130; })},
      {"bool: keys 0..127 masked in head 1, rows 0..63 see only keys >= 200",
       bool_mask_where([](int64_t, int64_t h, int64_t i, int64_t j) {
         return (h != 1 || j >= 128) && (i >= 64 || j >= 200);
       })},
      {"float: -inf on keys 0..255, finite after", float_mask_ls([](int64_t i, int64_t j) {
         return j < 256 ? -kInf : 0.01 * ((i * 7 + j) % 13);
       })},
      {"float: -inf on keys 0..127 + bottom_right",
       both(float_mask_ls([](int64_t, int64_t j) { return j < 128 ? -kInf : 0.0; }),
            causal(Causal::bottom_right))},
      {"float: keys 0..127 at -60 (finite: seen but negligible)",
       float_mask_ls([](int64_t, int64_t j) { return j < 128 ? -60.0 : 0.0; })},
      {"float: keys >= 128 at -60 (the first tile holds the max)",
       float_mask_ls([](int64_t, int64_t j) { return j >= 128 ? -60.0 : 0.0; })},
      {"float: -1000 on every key (a finite shift, not a mask)",
       float_mask_ls([](int64_t, int64_t) { return -1000.0; })},
      {"float: +1000 on every key", float_mask_ls([](int64_t, int64_t) { return 1000.0; })},
      {"float: first tile -inf, later keys -1000",
       float_mask_ls([](int64_t, int64_t j) { return j < 128 ? -kInf : -1000.0; })},
  };
  return masks;
}

// NaN and ∞: a NaN or ∞ in q_i or in a visible k_j poisons the rows that read it; in a visible v_j
// it makes those rows' outputs NaN; masked keys are never read (their NaNs change nothing).
struct Plant {
  const char* name;
  CaseSetup setup;
};
inline const std::vector<Plant>& plants() {
  static const std::vector<Plant> p = {
      {"NaN in q[1,2,70,5]",
       [](Case& c) { c.q[static_cast<size_t>(((1 * c.Hq + 2) * c.L + 70) * c.Dk + 5)] = kNaN; }},
      {"+inf in q[0,1,3,0] with scale 0",
       [](Case& c) {
         c.scale = 0.0;
         c.q[static_cast<size_t>(((0 * c.Hq + 1) * c.L + 3) * c.Dk + 0)] = kInf;
       }},
      {"NaN in k[0,1,150,2], top_left: rows >= 150 of heads 2, 3 read it",
       [](Case& c) {
         c.causal = Causal::top_left;
         c.k[static_cast<size_t>(((0 * c.Hkv + 1) * c.S + 150) * c.Dk + 2)] = kNaN;
       }},
      {"-inf in k[1,0,40,1], visible to all",
       [](Case& c) { c.k[static_cast<size_t>(((1 * c.Hkv + 0) * c.S + 40) * c.Dk + 1)] = -kInf; }},
      {"NaN in k[0,0,250,0] beyond key_lengths {140, S}",
       [](Case& c) {
         c.key_lengths = {140, c.S};
         c.k[static_cast<size_t>(((0 * c.Hkv + 0) * c.S + 250) * c.Dk + 0)] = kNaN;
       }},
      {"+inf in v[0,1,10,3], visible to all",
       [](Case& c) { c.v[static_cast<size_t>(((0 * c.Hkv + 1) * c.S + 10) * c.Dv + 3)] = kInf; }},
      {"NaN in v[1,1,20,0] and k[1,1,21,0], keys 20, 21 masked by bool [L,S]",
       [](Case& c) {
         set_bool_mask(c, {c.L, c.S}, 0.9, c.seed + 1);
         for (int64_t i = 0; i < c.L; ++i)
           for (int64_t j : {20, 21}) c.mask[static_cast<size_t>(i * c.S + j)] = 0;
         c.v[static_cast<size_t>(((1 * c.Hkv + 1) * c.S + 20) * c.Dv + 0)] = kNaN;
         c.k[static_cast<size_t>(((1 * c.Hkv + 1) * c.S + 21) * c.Dk + 0)] = kNaN;
       }},
      {"NaN in k[0,0,200,*] and v[0,0,201,*], keys 200, 201 -inf in a float mask",
       [](Case& c) {
         set_float_mask(c, {c.B, c.Hq, c.L, c.S}, 0.0, DType::f32, c.seed + 2);
         for (int64_t b = 0; b < c.B; ++b)
           for (int64_t h = 0; h < c.Hq; ++h)
             for (int64_t i = 0; i < c.L; ++i)
               for (int64_t j : {200, 201})
                 c.mask[static_cast<size_t>(((b * c.Hq + h) * c.L + i) * c.S + j)] = -kInf;
         for (int64_t d = 0; d < c.Dk; ++d) c.k[static_cast<size_t>(200 * c.Dk + d)] = kNaN;
         for (int64_t d = 0; d < c.Dv; ++d) c.v[static_cast<size_t>(201 * c.Dv + d)] = kNaN;
       }},
      {"NaN in v[0,0,77,1] of a visible key whose weight underflows (mask -300)",
       [](Case& c) {
         c.mask_kind = MaskKind::additive;
         c.mask_dtype = DType::f32;
         c.mask_shape = {c.S};
         c.mask.assign(static_cast<size_t>(c.S), 0.0);
         c.mask[77] = -300;
         c.v[static_cast<size_t>(77 * c.Dv + 1)] = kNaN;
       }},
  };
  return p;
}

// ---- bitwise identities ----

inline ::testing::AssertionResult same_bits(std::string_view what, const Tensor& a,
                                            const Tensor& b) {
  if (a.defined() != b.defined())
    return ::testing::AssertionFailure() << what << ": defined differs";
  if (!a.defined()) return ::testing::AssertionSuccess();
  if (a.shape() != b.shape() || a.dtype() != b.dtype() || a.dtype() != DType::f32)
    return ::testing::AssertionFailure()
           << what << ": " << shape_string(a.shape()) << " " << qkv::dtype_name(a.dtype()) << " vs "
           << shape_string(b.shape()) << " " << qkv::dtype_name(b.dtype());
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  const float* pa = ca.data<float>();
  const float* pb = cb.data<float>();
  int64_t differ = 0, first = -1;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (std::memcmp(pa + i, pb + i, sizeof(float)) != 0) {
      if (first < 0) first = i;
      ++differ;
    }
  if (differ)
    return ::testing::AssertionFailure()
           << what << ": " << differ << " of " << a.numel()
           << " elements differ in their bits, first " << index_string(a.shape(), first) << ": "
           << pa[first] << " vs " << pb[first];
  return ::testing::AssertionSuccess();
}

// Values stored [B, L, H, D] (as a projection writes them), viewed as [B, H, L, D]: no copy.
inline Tensor blhd_view(const std::vector<double>& x, const Shape& s) {
  std::vector<float> blhd(x.size());
  for (int64_t b = 0; b < s[0]; ++b)
    for (int64_t h = 0; h < s[1]; ++h)
      for (int64_t l = 0; l < s[2]; ++l)
        for (int64_t d = 0; d < s[3]; ++d)
          blhd[static_cast<size_t>(((b * s[2] + l) * s[1] + h) * s[3] + d)] =
              static_cast<float>(x[static_cast<size_t>(((b * s[1] + h) * s[2] + l) * s[3] + d)]);
  return Tensor::from({s[0], s[2], s[1], s[3]}, blhd).transpose(1, 2);
}
// Values stored [B, H, D, L], viewed as [B, H, L, D]: the last dimension is strided.
inline Tensor bhdl_view(const std::vector<double>& x, const Shape& s) {
  std::vector<float> bhdl(x.size());
  for (int64_t bh = 0; bh < s[0] * s[1]; ++bh)
    for (int64_t l = 0; l < s[2]; ++l)
      for (int64_t d = 0; d < s[3]; ++d)
        bhdl[static_cast<size_t>((bh * s[3] + d) * s[2] + l)] =
            static_cast<float>(x[static_cast<size_t>((bh * s[2] + l) * s[3] + d)]);
  return Tensor::from({s[0], s[1], s[3], s[2]}, bhdl).transpose(2, 3);
}

inline Case strided_case() {
  Spec s;
  s.name = "strided";
  s.setup = both(bool_mask_ls(0.8), causal(Causal::bottom_right));
  s.B = 2, s.Hq = 4, s.Hkv = 2, s.L = 97, s.S = 130, s.Dk = 64, s.Dv = 32, s.seed = 11000;
  return build(s);
}

// [B, L, H, D] memory seen through transpose(1, 2), and views with a strided last dimension,
// ---- the checker has teeth ----

inline Spec teeth_spec() {
  Spec s;
  s.name = "teeth";
  s.setup = key_lengths([](const Case&, int64_t b) { return b == 0 ? int64_t{0} : int64_t{129}; });
  s.B = 2, s.Hq = 2, s.Hkv = 1, s.L = 97, s.S = 129, s.Dk = 64, s.Dv = 64, s.seed = 15000;
  return s;
}

}  // namespace qkv_test::flash

#define QKV_PER_FUSED_PATH(Suite)                                                                 \
  class Suite : public ::qkv_test::flash::PerFusedPath {};                                        \
  INSTANTIATE_TEST_SUITE_P(Simd, Suite, ::testing::ValuesIn(::qkv_test::runnable_simd_targets()), \
                           ::qkv_test::simd_target_name);                                         \
  INSTANTIATE_TEST_SUITE_P(Cuda, Suite, ::testing::Values(::qkv_test::flash::kCudaTarget),        \
                           ::qkv_test::flash::fused_path_name)
