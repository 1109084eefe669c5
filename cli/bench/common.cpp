// Timing, the SGEMM yardstick, data and formatting for the `qkv bench` targets.
#include "bench/common.h"

#include <cblas.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <system_error>
#include <vector>

#include "core/aligned.h"
#include "kernels/cpu/blas_threads.h"
#include "qkv/threads.h"

namespace qkv::cli::bench {

Settings resolve(const BenchCommon& common) {
  Settings s;
  s.json = common.json;
  s.quick = common.quick;
  s.threads = resolve_num_threads(common.threads);
  s.repeats = common.repeats > 0 ? common.repeats : common.quick ? 1 : 3;
  return s;
}

double seconds_of(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

double median_seconds(const std::function<void()>& fn, int repeats, bool warm_up) {
  if (warm_up) fn();
  std::vector<double> runs;
  // The first timed run says whether one call can be timed alone. A call shorter than
  // kShortestTimedSeconds is timed in batches of calls that last ten times that, each batch's time
  // divided by its calls: what the timer and a thread's wake-up add is then spread thin.
  const double first = seconds_of(fn);
  int64_t batch = 1;
  if (first < kShortestTimedSeconds)
    batch = static_cast<int64_t>(10 * kShortestTimedSeconds / std::max(first, 1e-8)) + 1;
  if (batch == 1) runs.push_back(first);
  while (static_cast<int>(runs.size()) < std::max(repeats, 1))
    runs.push_back(seconds_of([&] {
                     for (int64_t i = 0; i < batch; ++i) fn();
                   }) /
                   static_cast<double>(batch));
  std::sort(runs.begin(), runs.end());
  const std::size_t n = runs.size();
  return n % 2 ? runs[n / 2] : 0.5 * (runs[n / 2 - 1] + runs[n / 2]);
}

namespace {

// Each thread's time on a CPU so far, in seconds, by thread id: the first field of
// /proc/self/task/TID/schedstat (nanoseconds), else utime + stime of its stat (clock ticks, 10 ms:
// coarse, but enough for the timed runs of a 2048³ SGEMM). Empty where /proc cannot say.
std::map<long, double> thread_cpu_seconds() {
  std::map<long, double> times;
  std::error_code error;
  const double tick = 1.0 / static_cast<double>(::sysconf(_SC_CLK_TCK));
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task", error)) {
    const long tid = std::strtol(entry.path().filename().c_str(), nullptr, 10);
    std::ifstream schedstat(entry.path() / "schedstat");
    double ns = 0;
    if (schedstat >> ns) {
      times[tid] = ns * 1e-9;
      continue;
    }
    std::ifstream stat_file(entry.path() / "stat");
    std::string stat;
    std::getline(stat_file, stat);
    // The fields after the command's name in parentheses: state is field 3, utime 14, stime 15.
    const std::size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    double utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
      if (i == 14) utime = std::strtod(field.c_str(), nullptr);
      if (i == 15) stime = std::strtod(field.c_str(), nullptr);
    }
    times[tid] = (utime + stime) * tick;
  }
  return times;
}

}  // namespace

SgemmCeiling sgemm_ceiling(int64_t n, int threads, int repeats) {
  // The operands are made once (the targets measure before each case).
  static int64_t made = 0;
  static Tensor a, b;
  if (made != n) {
    std::mt19937_64 rng(2048);
    a = normal_tensor({n, n}, rng), b = normal_tensor({n, n}, rng), made = n;
  }
  std::vector<float> c(static_cast<std::size_t>(n * n));
  const cpu::BlasThreads blas(threads);  // at most the cores: the SGEMM's best, not oversubscribed
  SgemmCeiling ceiling;
  ceiling.blas_threads = openblas_get_num_threads();
  const int N = static_cast<int>(n);
  auto product = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a.data<float>(), N,
                b.data<float>(), N, 0.0f, c.data(), N);
  };
  product();  // the warm-up, outside the counts below: OpenBLAS may start threads in it
  const std::map<long, double> before = thread_cpu_seconds();
  const double cpu0 = cpu_seconds();
  double t = 0;
  const double wall =
      seconds_of([&] { t = median_seconds(product, std::max(repeats, 3), /*warm_up=*/false); });
  ceiling.cpu_share = (cpu_seconds() - cpu0) / (wall * ceiling.blas_threads);
  const std::map<long, double> after = thread_cpu_seconds();
  if (!after.empty()) {
    // OpenBLAS gives each of its threads an equal share of the product, so each one that worked
    // ran for about as long as the busiest; the process's other threads (qkv's sleeping pool, an
    // idle OpenBLAS worker) barely ran. Half the busiest one's time tells them apart, on a quiet
    // machine and on one that gives every thread the same fraction of a core.
    std::vector<double> ran;
    for (const auto& [tid, seconds] : after) {
      const auto it = before.find(tid);
      ran.push_back(seconds - (it == before.end() ? 0.0 : it->second));
    }
    const double busiest = *std::max_element(ran.begin(), ran.end());
    ceiling.threads_working = static_cast<int>(std::count_if(
        ran.begin(), ran.end(), [&](double s) { return busiest > 0 && s >= 0.5 * busiest; }));
  }
  ceiling.gflops =
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / t / 1e9;
  return ceiling;
}

double sgemm_gflops(int64_t n, int threads, int repeats) {
  return sgemm_ceiling(n, threads, repeats).gflops;
}

std::string openblas_config() { return openblas_get_config(); }

std::string openblas_threading() {
  switch (openblas_get_parallel()) {
    case OPENBLAS_SEQUENTIAL:
      return "sequential";
    case OPENBLAS_THREAD:
      return "pthreads";
    case OPENBLAS_OPENMP:
      return "OpenMP";
  }
  return "unknown";
}

Tensor normal_tensor(const Shape& shape, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor t(shape, DType::f32);
  float* x = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) x[i] = normal(rng);
  return t;
}

namespace {
std::string format(const char* fmt, double x) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, fmt, x);
  return buffer;
}
}  // namespace

std::string significant(double x) {
  const double size = std::abs(x);
  if (!(size > 0) || !std::isfinite(x) || size >= 100) return format("%.0f", x);
  // Decimals so that three digits from the first nonzero one are shown: 2 − ⌊log10 |x|⌋.
  const int decimals = 2 - static_cast<int>(std::floor(std::log10(size)));
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, x);
  return buffer;
}

std::string fixed_or_significant(double x, int decimals) {
  if (std::abs(x) < 1) return significant(x);
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, x);
  return buffer;
}

std::string rate_str(std::optional<double> g) { return g ? significant(*g) : "—"; }

std::string percent_str(std::optional<double> r) { return r ? format("%.0f%%", 100 * *r) : "—"; }

std::string times_str(std::optional<double> r) { return r ? significant(*r) + "×" : "—"; }

std::string mib_str(std::optional<double> m) { return m ? significant(*m) : "—"; }

std::optional<double> ratio(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || *b <= 0) return std::nullopt;
  return *a / *b;
}

std::optional<double> timed(std::optional<double> seconds) {
  if (!seconds || !(*seconds >= kShortestTimedSeconds)) return std::nullopt;
  return seconds;
}

}  // namespace qkv::cli::bench
