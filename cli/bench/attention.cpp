// `qkv bench attention`: the fused kernel's forward and backward GFLOP/s on the cases of issue 3,
// beside this machine's SGEMM rate, the float64 reference, and the unfused OpenBLAS math path;
// with --device cuda, the GPU kernels' TFLOP/s on the same cases and data (issue 32).
#include "qkv/attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bench/attention_check.h"
#include "bench/attention_data.h"
#include "bench/bench.h"
#include "bench/common.h"
#include "cases/attention_cases.h"
#include "core/aligned.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/flash_attention.h"
#include "kernels/cpu/unfused_attention.h"
#include "kernels/cpu/vec_ops.h"
#include "output.h"
#include "qkv/json.h"
#include "qkv/terminal.h"
#include "qkv/threads.h"

namespace qkv::cli {
namespace {

using bench::Settings;
using namespace attention_bench;

// The reference path materializes float64 scores (and for causal a float64 bias) per head: timed
// only up to 4096² per head, and on one head — it is single-threaded, so its rate is per head.
constexpr int64_t kReferenceMaxScores = int64_t{4096} * 4096;
// The unfused path holds one L×S float matrix per worker (two in the backward).
constexpr double kUnfusedMaxBytes = 8.0 * (1 << 30);

struct Row {
  Case c;
  int threads = 1;                // the run's --threads (one count of a sweep)
  double sgemm = 0;               // GFLOP/s, measured just before the case
  bench::SgemmCeiling ceiling{};  // the same measurement, with its threads and CPU share
  std::optional<double> fwd{}, bwd{}, ref{}, unfused{}, unfused_bwd{};  // GFLOP/s
  std::optional<double> fwd_ms{}, bwd_ms{}, ref_ms{}, unfused_ms{}, unfused_bwd_ms{};
  std::optional<double> peak_mib{}, unfused_peak_mib{};
  std::optional<double> fwd_error{}, bwd_error{};  // max|X − R| on the checked slices
  Precision precision = Precision::fp32;
  // bf16: max|X − R| against float64 of the unrounded inputs, on the same slices.
  std::optional<double> fwd_exact_error{}, bwd_exact_error{};
  // How much of `threads` cores the timed fused forward got (the unfused one's without it); well
  // under 1 means other work on the machine took the rest, and the rates are low.
  std::optional<double> cpu_share{};
};

std::optional<double> gflops(double flops, std::optional<double> seconds) {
  if (!seconds || *seconds <= 0) return std::nullopt;
  return flops / *seconds / 1e9;
}

// Runs f, first untimed with `check` on its result (validation, and the warm-up), then timed.
// Returns the peak scratch MiB of the first run and the median seconds of the timed runs.
struct Timed {
  double peak_mib = 0, seconds = 0;
  double cpu_share = 0;  // CPU time of the timed runs / (their wall time × threads)
};
template <class Run, class Check>
Timed validate_and_time(const Settings& s, Run&& run, Check&& check) {
  Timed t;
  const int64_t before = memory_current_bytes();
  memory_reset_peak();
  run();
  t.peak_mib = static_cast<double>(memory_peak_bytes() - before) / (1 << 20);
  check();
  const double cpu0 = bench::cpu_seconds(),
               wall = bench::seconds_of(
                   [&] { t.seconds = bench::median_seconds(run, s.repeats, /*warm_up=*/false); });
  t.cpu_share = (bench::cpu_seconds() - cpu0) / (wall * s.threads);
  return t;
}

// The fused backward's dq, dk, dv: finite, dq on the slices' rows, and dk and dv (which sum over
// every row) on the slices as problems of their own, through the public API. The largest error.
// bf16: also the largest error against float64 of the unrounded inputs, into *exact.
double check_fused_backward(const Case& c, const std::vector<bench::Slice>& slices,
                            const std::vector<float>& dq, const std::vector<float>& dk,
                            const std::vector<float>& dv, int threads,
                            std::optional<double>* exact = nullptr) {
  bench::check_finite(c.name, "the fused backward's dq", dq.data(), dq.size());
  bench::check_finite(c.name, "the fused backward's dk", dk.data(), dk.size());
  bench::check_finite(c.name, "the fused backward's dv", dv.data(), dv.size());
  double e = 0;
  for (const bench::Slice& sl : slices) {
    e = std::max(e, bench::check_dq_rows(c.name, "fused", sl, dq.data()));
    AttentionOptions opt = sl.options;
    opt.path = Path::fused, opt.num_threads = threads;
    const AttentionGrads g = attention_backward(sl.dout, sl.q, sl.k, sl.v, opt);
    e = std::max(e, bench::check_backward(c.name, "fused", sl, g.dq.data<float>(),
                                          g.dk.data<float>(), g.dv.data<float>()));
    if (exact)
      *exact = std::max({exact->value_or(0.0), bench::exact_dq_rows_error(sl, dq.data()),
                         bench::exact_backward_error(sl, g.dq.data<float>(), g.dk.data<float>(),
                                                     g.dv.data<float>())});
  }
  return e;
}

// The unfused backward's dq, dk, dv: finite, dq on the slices' rows, dk and dv on each slice as a
// problem of its own through the same kernel.
void check_unfused_backward(const Case& c, const std::vector<bench::Slice>& slices,
                            const std::vector<float>& dq, const std::vector<float>& dk,
                            const std::vector<float>& dv, int threads) {
  bench::check_finite(c.name, "the unfused backward's dq", dq.data(), dq.size());
  bench::check_finite(c.name, "the unfused backward's dk", dk.data(), dk.size());
  bench::check_finite(c.name, "the unfused backward's dv", dv.data(), dv.size());
  for (const bench::Slice& sl : slices) {
    bench::check_dq_rows(c.name, "unfused", sl, dq.data());
    const cpu::FlashProblem sp = problem_of(sl.q, sl.k, sl.v, sl.options.causal);
    std::vector<float> so(sl.rows * c.Dk), sl_lse(sl.rows);
    std::vector<float> sdq(sl.rows * c.Dk), sdk(c.S * c.Dk), sdv(c.S * c.Dk);
    cpu::unfused_forward(sp, so.data(), sl_lse.data(), threads);
    cpu::unfused_backward(sp, sl.dout.data<float>(), sl_lse.data(), sdq.data(), sdk.data(),
                          sdv.data(), threads);
    bench::check_backward(c.name, "unfused", sl, sdq.data(), sdk.data(), sdv.data());
  }
}

class Bench {
 public:
  Bench(const Settings& s, Precision precision) : s_(s), precision_(precision) {}

  Row run(const Case& c, uint64_t seed, Progress& progress, const std::string& tag) {
    Row row{.c = c, .threads = s_.threads, .precision = precision_};
    auto stage = [&](const std::string& what) { progress.show(tag + " " + c.name + ": " + what); };
    // The yardstick just before the case: on a shared machine the load changes within a run.
    stage("OpenBLAS SGEMM 2048³");
    row.ceiling = bench::sgemm_ceiling(2048, s_.threads, s_.repeats);
    row.sgemm = row.ceiling.gflops;
    stage("data and float64 reference slices");
    const Data d = make_data(c, s_.threads, seed, precision_);
    const std::vector<bench::Slice> slices = make_slices(c, d);
    const double flops = cases::forward_flops(c);
    fused_error_.clear();
    try {
      fused(c, d, slices, row, flops, stage);
    } catch (const Error& e) {
      // The fused path is not there (yet) or does not apply to this case: say so, show "—".
      // A wrong result is a runtime error and ends the benchmark.
      if (e.kind() == Error::Kind::runtime) throw;
      fused_error_ = e.what();
      row.fwd = row.bwd = row.fwd_ms = row.bwd_ms = row.peak_mib = std::nullopt;
    }
    if (precision_ == Precision::fp32) unfused(c, d, slices, row, flops, stage);  // fp32 only
    reference(c, d, row, flops, stage);
    return row;
  }

  bool fused_unavailable() const { return !fused_error_.empty(); }
  const std::string& fused_error() const { return fused_error_; }

 private:
  template <class Stage>
  void fused(const Case& c, const Data& d, const std::vector<bench::Slice>& slices, Row& row,
             double flops, Stage& stage) {
    stage("fused forward");
    Tensor out;
    const Timed fwd = validate_and_time(
        s_, [&] { out = attention(d.q, d.k, d.v, d.options).out; },
        [&] {
          bench::check_finite(c.name, "the fused forward's output", out.data<float>(), out.numel());
          double e = 0;
          for (const bench::Slice& sl : slices)
            e = std::max(e, bench::check_forward(c.name, "fused", sl, out.data<float>()));
          row.fwd_error = e;
          if (precision_ == Precision::bf16) {
            double x = 0;
            for (const bench::Slice& sl : slices)
              x = std::max(x, bench::exact_forward_error(sl, out.data<float>()));
            row.fwd_exact_error = x;
          }
        });
    row.fwd = gflops(flops, fwd.seconds), row.fwd_ms = ms(fwd.seconds);
    row.peak_mib = fwd.peak_mib;
    row.cpu_share = fwd.cpu_share;
    if (!c.backward) return;

    stage("fused backward");
    // The backward kernel alone, given the forward's output and softmax statistics (what a training
    // step runs, and what PyTorch's backward times): the public attention_backward would also redo
    // the forward. The timed dq is checked on the slices' rows; dk and dv, which sum over every
    // row, on the slices as problems of their own, through the public API.
    const cpu::FlashProblem& p = d.problem;
    std::vector<float> o(numel(c, c.Hq, c.L)), row_max(c.B * c.Hq * c.L), row_sum(row_max.size());
    std::vector<float> dq(numel(c, c.Hq, c.L)), dk(numel(c, c.Hkv, c.S)), dv(dk.size());
    const cpu::SoftmaxStats stats{row_max.data(), row_sum.data()};
    cpu::flash_forward(p, o.data(), nullptr, s_.threads, stats);
    double dscale = 0;
    const Timed bwd = validate_and_time(
        s_,
        [&] {
          cpu::flash_backward(p, o.data(), d.dout.data<float>(), stats, dq.data(), dk.data(),
                              dv.data(), &dscale, s_.threads);
        },
        [&] {
          row.bwd_error =
              check_fused_backward(c, slices, dq, dk, dv, s_.threads,
                                   precision_ == Precision::bf16 ? &row.bwd_exact_error : nullptr);
        });
    row.bwd = gflops(cases::backward_flops(c), bwd.seconds), row.bwd_ms = ms(bwd.seconds);
  }

  template <class Stage>
  void unfused(const Case& c, const Data& d, const std::vector<bench::Slice>& slices, Row& row,
               double flops, Stage& stage) {
    const double matrix =
        4.0 * c.L * c.S * static_cast<double>(std::min<int64_t>(s_.threads, c.B * c.Hq));
    if (matrix > kUnfusedMaxBytes) return;
    stage("unfused forward");
    const cpu::FlashProblem& p = d.problem;
    std::vector<float> out(numel(c, c.Hq, c.L)), lse(c.B * c.Hq * c.L);
    const Timed fwd = validate_and_time(
        s_, [&] { cpu::unfused_forward(p, out.data(), lse.data(), s_.threads); },
        [&] {
          bench::check_finite(c.name, "the unfused forward's output", out.data(), out.size());
          for (const bench::Slice& sl : slices)
            bench::check_forward(c.name, "unfused", sl, out.data());
        });
    row.unfused = gflops(flops, fwd.seconds), row.unfused_ms = ms(fwd.seconds);
    row.unfused_peak_mib = fwd.peak_mib;
    if (!row.cpu_share) row.cpu_share = fwd.cpu_share;
    if (!c.backward || 2 * matrix > kUnfusedMaxBytes) return;

    stage("unfused backward");
    std::vector<float> dq(numel(c, c.Hq, c.L)), dk(numel(c, c.Hkv, c.S)), dv(dk.size());
    const Timed bwd = validate_and_time(
        s_,
        [&] {
          cpu::unfused_backward(p, d.dout.data<float>(), lse.data(), dq.data(), dk.data(),
                                dv.data(), s_.threads);
        },
        [&] { check_unfused_backward(c, slices, dq, dk, dv, s_.threads); });
    row.unfused_bwd = gflops(cases::backward_flops(c), bwd.seconds),
    row.unfused_bwd_ms = ms(bwd.seconds);
  }

  template <class Stage>
  void reference(const Case& c, const Data& d, Row& row, double flops, Stage& stage) {
    if (c.L * c.S > kReferenceMaxScores) return;
    stage("float64 reference forward (one head)");
    // Head 0 of batch 0 (it reads kv head 0), float32 in, as a user would call it.
    auto head = [](const Tensor& t, int64_t L, int64_t D) {
      Tensor h({1, 1, L, D}, DType::f32);
      std::copy_n(t.data<float>(), L * D, h.data<float>());
      return h;
    };
    const Tensor q1 = head(d.q, c.L, c.Dk), k1 = head(d.k, c.S, c.Dk), v1 = head(d.v, c.S, c.Dk);
    AttentionOptions o;
    o.causal = c.causal;
    o.path = Path::reference;
    const double t = bench::median_seconds([&] { (void)attention(q1, k1, v1, o); }, s_.repeats);
    row.ref = gflops(flops / (c.B * c.Hq), t), row.ref_ms = ms(t);
  }

  Settings s_;
  Precision precision_;
  std::string fused_error_;
};

// An optional number: number_json (qkv/json.h) where measured, null where not.

// A sweep's figures for one row: fwd, bwd and the SGEMM ceiling per thread, and their speed-ups
// over `base`, the same case at the sweep's smallest count (itself for that count: exactly 1).
nlohmann::json sweep_json(const Row& r, const Row& base) {
  const double t = r.threads;
  auto per_thread = [t](std::optional<double> g) -> std::optional<double> {
    if (!g) return std::nullopt;
    return *g / t;
  };
  return {{"speedup_base_threads", base.threads},
          {"gflops_per_thread",
           {{"fwd", num(per_thread(r.fwd))},
            {"bwd", num(per_thread(r.bwd))},
            {"sgemm", number_json(r.sgemm / t)}}},
          {"speedup",
           {{"fwd", num(bench::ratio(r.fwd, base.fwd))},
            {"bwd", num(bench::ratio(r.bwd, base.bwd))},
            {"sgemm", num(bench::ratio(r.sgemm, base.sgemm))}}}};
}

nlohmann::json to_json(const Row& r, const Settings& s, const Row* base) {
  const Case& c = r.c;
  const double sgemm = r.sgemm;
  nlohmann::json j = case_json(c);
  j.update(
      {{"threads", s.threads},
       {"precision", std::string(to_string(r.precision))},
       {"fwd_error_vs_float64", num(r.fwd_exact_error)},
       {"bwd_error_vs_float64", num(r.bwd_exact_error)},
       {"cores", num_cores()},
       {"simd", cpu::simd_target()},
       {"openblas_core", openblas_get_corename()},
       {"openblas_config", bench::openblas_config()},
       {"openblas_threading", bench::openblas_threading()},
       {"sgemm_blas_threads", r.ceiling.blas_threads},
       {"sgemm_threads_working",
        r.ceiling.threads_working ? nlohmann::json(*r.ceiling.threads_working) : nlohmann::json()},
       {"sgemm_cpu_share", number_json(r.ceiling.cpu_share)},
       {"repeats", s.repeats},
       {"quick", s.quick},
       {"fwd_gflops", num(r.fwd)},
       {"bwd_gflops", num(r.bwd)},
       {"sgemm_gflops", number_json(sgemm)},
       {"fwd_sgemm_ratio", num(bench::ratio(r.fwd, sgemm))},
       {"bwd_sgemm_ratio", num(bench::ratio(r.bwd, sgemm))},
       {"ref_gflops", num(r.ref)},
       {"fwd_ref_speedup", num(bench::ratio(r.fwd, r.ref))},
       {"unfused_gflops", num(r.unfused)},
       {"unfused_bwd_gflops", num(r.unfused_bwd)},
       {"fwd_unfused_speedup", num(bench::ratio(r.fwd, r.unfused))},
       {"bwd_unfused_speedup", num(bench::ratio(r.bwd, r.unfused_bwd))},
       {"peak_extra_mib", num(r.peak_mib)},
       {"unfused_peak_extra_mib", num(r.unfused_peak_mib)},
       {"fwd_ms", num(r.fwd_ms)},
       {"bwd_ms", num(r.bwd_ms)},
       {"ref_ms", num(r.ref_ms)},
       {"unfused_ms", num(r.unfused_ms)},
       {"unfused_bwd_ms", num(r.unfused_bwd_ms)},
       {"cpu_share", num(r.cpu_share)},
       {"fwd_max_error", num(r.fwd_error)},
       {"bwd_max_error", num(r.bwd_error)}});
  if (base) j.update(sweep_json(r, *base));
  return j;
}

struct Column {
  const char* title;
  const char* unit;
  int width;
  bool left;  // the leading columns are left-aligned, the rest right-aligned
};
constexpr Column kColumns[] = {
    {"case", "", 10, true},
    {"shape", "", 19, true},
    {"fwd", "GF/s", 6, false},
    {"bwd", "GF/s", 6, false},
    {"sgemm", "GF/s", 6, false},
    {"%sgemm", "fwd/bwd", 9, false},
    {"ref", "GF/s", 6, false},
    {"unfused", "fwd/bwd", 9, false},
    {"×unfused", "fwd/bwd", 11, false},
    {"MiB", "fused/unf", 9, false},
};

std::string line(const std::vector<std::string>& cells) {
  std::vector<int> widths;
  int left = 0;
  for (const Column& c : kColumns) widths.push_back(c.width), left += c.left;
  return table_row(cells, widths, left);
}

std::string pair(const std::string& a, const std::string& b) { return a + "/" + b; }

std::string threads_str(int n) { return std::to_string(n) + (n == 1 ? " thread" : " threads"); }

// The run's first line: the kernels, OpenBLAS, the thread count (or the sweep's counts), the
// timing.
void print_header(const Settings& s, const std::vector<int>& counts, Precision precision) {
  std::string threads = threads_str(counts.front());
  if (counts.size() > 1) {
    threads = "threads ";
    for (std::size_t i = 0; i < counts.size(); ++i)
      threads += (i ? ", " : "") + std::to_string(counts[i]);
    threads += " (a sweep)";
  }
  const std::string arithmetic = precision == Precision::bf16
                                     ? std::string("bf16 products (") +
                                           (cpu::bf16_uses_dot() ? "vdpbf16ps" : "emulated") +
                                           "), float32 sums"
                                     : "float32";
  std::cout << "qkv bench attention: " << arithmetic << ", " << cpu::simd_target()
            << " kernels, OpenBLAS " << openblas_get_corename() << " ("
            << bench::openblas_threading() << "), " << threads << ", median of " << s.repeats
            << " after a warm-up" << (s.quick ? " (--quick: small shapes, a smoke test)" : "")
            << "\n";
}

// A sweep's table for one count starts with the count; every table with the column titles.
void print_table_header(int threads, bool sweep) {
  if (sweep) std::cout << "\n" << threads_str(threads) << ":";
  std::cout << "\n";
  std::vector<std::string> titles, units;
  for (const Column& c : kColumns) titles.push_back(c.title), units.push_back(c.unit);
  std::cout << line(titles) << "\n" << line(units) << "\n";
}

// Below each table: how the SGEMM ceilings of its rows ran — OpenBLAS's threads in force (each
// row's, where they differ), the threads seen working, and the range of their CPU shares.
void print_ceiling_note(const std::vector<Row>& rows) {
  if (rows.empty()) return;
  std::set<int> in_force, working;
  double low = 1e300, high = 0;
  bool known = true;
  for (const Row& r : rows) {
    in_force.insert(r.ceiling.blas_threads);
    if (r.ceiling.threads_working)
      working.insert(*r.ceiling.threads_working);
    else
      known = false;
    low = std::min(low, r.ceiling.cpu_share), high = std::max(high, r.ceiling.cpu_share);
  }
  auto list = [](const std::set<int>& values) {
    std::string text;
    for (int v : values) text += (text.empty() ? "" : "–") + std::to_string(v);
    return text;
  };
  const int threads = rows.front().threads;
  const bool one = in_force.size() == 1 && *in_force.begin() == 1;
  std::cout << "sgemm at " << threads_str(threads) << ": " << list(in_force)
            << (one ? " OpenBLAS thread" : " OpenBLAS threads") << " in force (min(" << threads
            << ", " << num_cores() << " cores)), " << (known ? list(working) : std::string("?"))
            << " seen working, CPU share " << bench::percent_str(low)
            << (bench::percent_str(high) != bench::percent_str(low) ? "–" + bench::percent_str(high)
                                                                    : "")
            << "\n";
}

// Below a bf16 table: what bf16 cost each case, its largest error against float64 of the unrounded
// inputs on the checked slices, beside the rule's check against the rounded inputs' float64.
void print_bf16_note(const std::vector<Row>& rows) {
  auto sci = [](std::optional<double> x) {
    if (!x) return std::string("—");
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.1e", *x);
    return std::string(buffer);
  };
  std::cout << "bf16, largest error on the checked rows, fwd/bwd: against float64 of the inputs\n"
               "as given | of the rounded inputs (§1.1b's check)\n";
  for (const Row& r : rows)
    std::cout << "  " << r.c.name << ": " << sci(r.fwd_exact_error) << "/" << sci(r.bwd_exact_error)
              << " | " << sci(r.fwd_error) << "/" << sci(r.bwd_error) << "\n";
}

void print_row(const Row& r) {
  using namespace bench;
  std::cout << line({r.c.name, cases::shape_string(r.c), rate_str(r.fwd), rate_str(r.bwd),
                     rate_str(r.sgemm),
                     pair(percent_str(ratio(r.fwd, r.sgemm)), percent_str(ratio(r.bwd, r.sgemm))),
                     rate_str(r.ref), pair(rate_str(r.unfused), rate_str(r.unfused_bwd)),
                     pair(times_str(ratio(r.fwd, r.unfused)),
                          times_str(ratio(r.bwd, r.unfused_bwd))),
                     pair(mib_str(r.peak_mib), mib_str(r.unfused_peak_mib))})
            << "\n";
  flush_stdout();
}

constexpr const char* kNotes =
    "\nfwd/bwd: the fused kernel (bwd alone, given the forward's output and row statistics);\n"
    "FLOPs 4·B·Hq·L·S·D forward, half when causal, 2.5× that backward.\n"
    "sgemm: OpenBLAS SGEMM 2048³ on min(threads, cores) OpenBLAS threads, measured just before\n"
    "the case (the machine may be shared); its CPU share is its CPU time over wall time × those\n"
    "threads, flagged under 80% as the cases' are.\n"
    "ref: the float64 reference path on one head (single-threaded), — above L·S = 4096².\n"
    "unfused: OpenBLAS SGEMM, row softmax, SGEMM per head, — where its L×S matrices would pass\n"
    "8 GiB (fp32 only). MiB: peak scratch beyond inputs and outputs. Every path was checked\n"
    "against the float64 reference first.\n";

// --list: the cases as the registry has them, each with its FLOPs; nothing runs. Without --case
// every case, the default set and the others.
int list_cases(const std::vector<std::string>& names, bool quick, bool json) {
  std::vector<Case> chosen = names.empty() ? all_cases(quick) : selected_cases(names, quick);
  if (json) {
    for (const Case& c : chosen) {
      nlohmann::json j = case_json(c);
      j.update(
          {{"shape", cases::shape_string(c)},
           {"mask", cases::to_string(c.mask)},
           {"fwd_flops", cases::forward_flops(c)},
           {"bwd_flops", c.backward ? nlohmann::json(cases::backward_flops(c)) : nlohmann::json()},
           {"default", c.in_default},
           {"quick", quick}});
      std::cout << j.dump() << "\n";
    }
    return 0;
  }
  std::cout << "qkv bench attention: " << chosen.size() << " case"
            << (chosen.size() == 1 ? "" : "s")
            << (quick ? " at --quick sizes (L and S divided by 16)" : "") << "\n\n";
  const std::vector<std::pair<std::string, int>> columns = {{"case", 11},      {"shape", 20},
                                                            {"causal", 8},     {"mask", 6},
                                                            {"fwd GFLOP", 10}, {"bwd GFLOP", 10}};
  std::vector<int> widths;
  for (const auto& column : columns) widths.push_back(column.second);
  auto print = [&](const std::vector<std::string>& cells) {
    std::cout << table_row(cells, widths, 4) << "\n";
  };
  std::vector<std::string> titles;
  for (const auto& column : columns) titles.push_back(column.first);
  print(titles);
  auto gflop = [](double flops) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(3) << flops / 1e9;
    return s.str();
  };
  bool others = false;
  for (const Case& c : chosen) {
    print({c.name + (c.in_default ? "" : "*"), cases::shape_string(c),
           std::string(to_string(c.causal)), std::string(cases::to_string(c.mask)),
           gflop(cases::forward_flops(c)), c.backward ? gflop(cases::backward_flops(c)) : "—"});
    others = others || !c.in_default;
  }
  std::cout << "\nFLOPs 4·B·Hq·L·S·D forward, half when causal, 2.5× that backward.\n"
            << (others ? "*: not in the default set; --case NAME runs it.\n" : "");
  return 0;
}

// A sweep's summary: each case at each count, its rates per thread and its speed-ups over the
// smallest count, forward, backward and the SGEMM ceiling's own (what the machine itself scales
// to). 80 columns.
void print_scaling(const std::vector<Row>& rows, int base_threads) {
  const std::vector<int> widths = {10, 7, 6, 6, 8, 6, 6, 8, 6, 8};
  auto print = [&](const std::vector<std::string>& cells) {
    std::cout << table_row(cells, widths, 1) << "\n";
  };
  const std::string base = "×" + std::to_string(base_threads);
  std::cout << "\nScaling: GFLOP/s, per thread, and the speed-up over " << threads_str(base_threads)
            << "\n";
  print({"case", "threads", "fwd", "/thread", "speed-up", "bwd", "/thread", "speed-up", "sgemm",
         "speed-up"});
  print({"", "", "GF/s", "GF/s", base, "GF/s", "GF/s", base, "GF/s", base});
  using namespace bench;
  std::map<std::string, const Row*> first;
  std::vector<std::string> order;
  for (const Row& r : rows)
    if (first.emplace(r.c.name, &r).second) order.push_back(r.c.name);
  for (const std::string& name : order)
    for (const Row& r : rows) {
      if (r.c.name != name) continue;
      const Row& b = *first.at(name);
      const double t = r.threads;
      auto per = [t](std::optional<double> g) -> std::optional<double> {
        if (!g) return std::nullopt;
        return *g / t;
      };
      print({r.c.name, std::to_string(r.threads), rate_str(r.fwd), rate_str(per(r.fwd)),
             times_str(ratio(r.fwd, b.fwd)), rate_str(r.bwd), rate_str(per(r.bwd)),
             times_str(ratio(r.bwd, b.bwd)), rate_str(r.sgemm),
             times_str(ratio(r.sgemm, b.sgemm))});
    }
}

}  // namespace

int run_bench_attention(const BenchAttentionArgs& args) {
  if (args.list) return list_cases(args.cases, args.common.quick, args.common.json);
  if (args.device == "cuda") return attention_bench::run_on_gpu(args);
  // The counts, in increasing order (the option sorts them): the first is the sweep's base.
  std::vector<int> counts = args.thread_counts;
  if (counts.empty()) counts.push_back(bench::resolve(args.common).threads);
  const bool sweep = counts.size() > 1;
  const Settings common = bench::resolve(args.common);
  const std::vector<Case> cases = selected_cases(args.cases, common.quick);

  Progress progress;
  const Precision precision = *parse_precision(args.precision);
  if (!common.json) print_header(common, counts, precision);
  std::set<std::string> warned;
  std::string starved;           // cases whose timed runs got well under `threads` cores
  std::string starved_ceilings;  // SGEMM ceilings that did
  std::string short_ceilings;    // SGEMM ceilings seen on fewer threads than in force
  std::vector<Row> all_rows;
  std::map<std::string, Row> base;  // each case at the smallest count
  const std::size_t runs = cases.size() * counts.size();
  std::size_t run = 0;
  for (int threads : counts) {
    Settings s = common;
    s.threads = threads;
    Bench bench(s, precision);
    if (!s.json) print_table_header(threads, sweep);
    std::vector<Row> table;
    for (const Case& c : cases) {
      const std::string tag = "[" + std::to_string(++run) + "/" + std::to_string(runs) + "]";
      const Row row = bench.run(c, seed_of(c.name), progress, tag);
      progress.clear();
      if (bench.fused_unavailable() && warned.insert(bench.fused_error()).second)
        std::cerr << "qkv: warning: bench attention: case " << c.name
                  << ": the fused path is unavailable (" << bench.fused_error()
                  << "); its columns show —\n";
      const std::string label = c.name + (sweep ? " at " + std::to_string(threads) : "");
      if (row.cpu_share && *row.cpu_share < 0.8)
        starved += (starved.empty() ? "" : ", ") + label + " (" +
                   bench::percent_str(row.cpu_share) + " of " + std::to_string(threads) + " cores)";
      if (row.ceiling.cpu_share < 0.8)
        starved_ceilings += (starved_ceilings.empty() ? "" : ", ") + label + " (" +
                            bench::percent_str(row.ceiling.cpu_share) + " of " +
                            std::to_string(row.ceiling.blas_threads) + " OpenBLAS threads)";
      if (row.ceiling.threads_working && *row.ceiling.threads_working < row.ceiling.blas_threads)
        short_ceilings += (short_ceilings.empty() ? "" : ", ") + label + " (" +
                          std::to_string(*row.ceiling.threads_working) + " of " +
                          std::to_string(row.ceiling.blas_threads) + " OpenBLAS threads working)";
      base.emplace(c.name, row);  // the first count's row stays
      if (s.json)
        std::cout << to_json(row, s, sweep ? &base.at(c.name) : nullptr).dump() << "\n";
      else
        print_row(row);
      flush_stdout();
      table.push_back(row);
      all_rows.push_back(row);
    }
    if (!s.json) print_ceiling_note(table);
    if (!s.json && precision == Precision::bf16) print_bf16_note(table);
  }
  if (!common.json) {
    if (sweep) print_scaling(all_rows, counts.front());
    std::cout << kNotes;
    if (sweep)
      std::cout
          << "Sweep: every case at each count in increasing order; /thread: GFLOP/s over the\n"
             "threads; speed-up: over the same case at the smallest count.\n";
    flush_stdout();
  }
  if (!starved.empty())
    std::cerr << "qkv: warning: bench attention: the timed runs of " << starved
              << " got under 80% of their cores: other work on the machine; their rates are low\n";
  if (!starved_ceilings.empty())
    std::cerr << "qkv: warning: bench attention: the SGEMM ceilings of " << starved_ceilings
              << " got under 80% of their OpenBLAS threads: other work on the machine; those "
                 "ceilings are low and the shares of them high\n";
  if (!short_ceilings.empty())
    std::cerr << "qkv: warning: bench attention: the SGEMM ceilings of " << short_ceilings
              << " ran on fewer threads than OpenBLAS had in force (OpenBLAS "
              << bench::openblas_threading()
              << (bench::openblas_threading() == "OpenMP" ? ": check OMP_NUM_THREADS" : "")
              << "); the ceilings are low and the shares of them high\n";
  return 0;
}

}  // namespace qkv::cli
