// What every `qkv bench` target shares: timing by median, this machine's SGEMM rate, N(0, 1)
// data, a progress line, number formatting.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "qkv/json.h"
#include "qkv/tensor.h"

namespace qkv::cli::bench {

// The effective settings of BenchCommon: threads and repeats resolved.
struct Settings {
  bool json = false;
  bool quick = false;
  int threads = 1;
  int repeats = 3;
};
Settings resolve(const BenchCommon& common);

// Runs fn once untimed unless the caller just did (the warm-up: page faults, caches, thread
// start-up), then `repeats` times; returns the median wall-clock seconds of the timed runs. A call
// too short to time alone (under kShortestTimedSeconds) is timed in batches of many calls, and
// each run is a batch's time over its calls.
double median_seconds(const std::function<void()>& fn, int repeats, bool warm_up = true);

// Wall-clock seconds of one call.
double seconds_of(const std::function<void()>& fn);

// CPU seconds (user + system) this process has used so far, all threads together.
double cpu_seconds();

// The SGEMM ceiling as measured, with what says whether it can be trusted: a ceiling that ran on
// fewer threads than asked reads low, and every kernel's share of it high (fwd/SGEMM read 527% at
// 16 threads, issue 31).
struct SgemmCeiling {
  double gflops = 0;     // 2n³ FLOPs over the median time
  int blas_threads = 0;  // openblas_get_num_threads() while it ran: min(threads, cores)
  // The process's threads that ran, during the timed runs, for at least half as long as the
  // busiest of them (/proc/self/task/*/schedstat): OpenBLAS's workers and the caller. None where
  // /proc cannot say (no such files).
  std::optional<int> threads_working{};
  double cpu_share = 0;  // CPU time of the timed runs / (their wall time × blas_threads)
};

// OpenBLAS SGEMM C = A·B on n×n N(0, 1) matrices on min(threads, the cores) OpenBLAS threads
// (set_blas_threads): GFLOP/s (2n³ FLOPs), median of max(repeats, 3) after a warm-up, and the
// threads and CPU share it ran with. The machine's practical fp32 peak, the yardstick of every
// kernel's rate.
SgemmCeiling sgemm_ceiling(int64_t n, int threads, int repeats);
// sgemm_ceiling(n, threads, repeats).gflops.
double sgemm_gflops(int64_t n, int threads, int repeats);

// How the OpenBLAS that the process loaded was built: openblas_get_config() ("OpenBLAS 0.3.21
// NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=64") and its threading
// (openblas_get_parallel(): "sequential", "pthreads" or "OpenMP"). A build with OpenMP takes its
// thread count from OMP_NUM_THREADS at every call, whatever openblas_set_num_threads said.
std::string openblas_config();
std::string openblas_threading();

// A contiguous float32 tensor of independent N(0, 1) values. Normal data, not random integers:
// those make the softmax one-hot and the timings meaningless (docs/CONVENTIONS.md §4.2).
Tensor normal_tensor(const Shape& shape, std::mt19937_64& rng);

// x to 3 significant digits, never in exponent form and never rounded to 0: "1024", "95.3",
// "1.26", "0.0625", "0.000122" (a ratio below 1, N/L with more latents than inputs, once printed
// as "0").
std::string significant(double x);
// `decimals` fixed decimals from 1 up ("15", "3.9", "1.356"), significant() below 1, where fixed
// decimals would leave fewer than three digits, or none.
std::string fixed_or_significant(double x, int decimals);
// "171", "95.3", "0.912", or "—" when absent.
std::string rate_str(std::optional<double> gflops);
// "69%", or "—".
std::string percent_str(std::optional<double> ratio);
// "1.26×", or "—".
std::string times_str(std::optional<double> ratio);
// "0.5", "128", or "—".
std::string mib_str(std::optional<double> mib);

// a / b when both are present and b > 0.
std::optional<double> ratio(std::optional<double> a, std::optional<double> b);

// The shortest time a rate or a ratio is taken from. Below it the timer, a thread waking up and
// the caches decide the time, not the work: a one-token ring forward timed 0.003 ms, and its
// "efficiencies" came out 140% and 176%. median_seconds times shorter calls in batches; a time
// that cannot be batched (the ring's, between barriers) leaves its rate or ratio out ("—"), and
// the table says so with kTooShortNote.
inline constexpr double kShortestTimedSeconds = 1e-4;
// `seconds` when it can be timed, none when it is shorter than kShortestTimedSeconds.
std::optional<double> timed(std::optional<double> seconds);
inline constexpr const char* kTooShortNote =
    "—: too short to time (under 0.1 ms, where the timer and a thread's wake-up, not the work, "
    "decide the time); use a larger size";

// The keys every model benchmark's JSON row shares (bench model, bench causal-lm): the case, the
// settings, the median, tokens/s, GFLOP and GFLOP/s, the ratio to SGEMM and the CPU share. A Row
// has name, runs, seconds, flops, sgemm, cpu_share, gflops() and tokens_per_s().
template <class Row>
nlohmann::json timing_json(const Row& r, const Settings& s) {
  return {{"case", r.name},
          {"threads", s.threads},
          {"runs", r.runs},
          {"quick", s.quick},
          {"median_ms", number_json(r.seconds * 1e3)},
          {"tokens_per_s", number_json(r.tokens_per_s())},
          {"gflop", number_json(r.flops / 1e9)},
          {"gflops", number_json(r.gflops())},
          {"sgemm_gflops", number_json(r.sgemm)},
          {"sgemm_ratio", number_json(r.gflops() / r.sgemm)},
          {"cpu_share", number_json(r.cpu_share)}};
}

}  // namespace qkv::cli::bench
