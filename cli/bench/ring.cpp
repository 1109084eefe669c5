// `qkv bench ring`: ring attention over MPI (src/distributed), run as `mpirun -np P qkv bench
// ring`. Every rank builds the same N(0, 1) problem and takes its rows; rank 0 first runs the
// single-process fused kernel on the whole sequence (the baseline, and the result the ring must
// reproduce), then the ring runs forward and backward and is timed. Rank 0 prints.
// Built where CMake found MPI (QKV_WITH_MPI); elsewhere the target says so.
#include "bench/bench.h"
#include "qkv/tensor.h"

#ifndef QKV_WITH_MPI
namespace qkv::cli {
int run_bench_ring(const BenchRingArgs&) {
  throw Error(
      "qkv bench ring: this qkv was built without MPI; expected a build where CMake found MPI "
      "(scripts/bootstrap installs libopenmpi-dev and openmpi-bin)");
}
}  // namespace qkv::cli
#else
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/common.h"
#include "kernels/cpu/vec_ops.h"
#include "memory.h"
#include "output.h"
#include "qkv/attention.h"
#include "qkv/distributed.h"
#include "qkv/json.h"
#include "qkv/terminal.h"

namespace qkv::cli {
namespace {

using distributed::RingLayout;

struct RingCase {
  std::string name;
  bool causal;
  RingLayout layout;
};

struct Measured {
  double ring_fwd = 0, ring_bwd = 0;      // seconds, the slowest rank, median of the repeats
  double single_fwd = 0, single_bwd = 0;  // one process, the whole sequence
  double mib_fwd = 0, mib_bwd = 0;        // MiB sent by the rank that sent most
  double wait_share = 0;                  // of the ring's time, blocked in MPI_Waitall (max rank)
  double err[4] = {0, 0, 0, 0};           // max |ring − single process|: out, dq, dk, dv
};

double max_over_ranks(double x) {
  double all = 0;
  MPI_Allreduce(&x, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return all;
}

// Rows `positions` of a contiguous [B, H, N, D] tensor.
Tensor rows_of(const Tensor& all, const std::vector<int64_t>& positions) {
  const int64_t BH = all.dim(0) * all.dim(1), N = all.dim(2), D = all.dim(3);
  const int64_t n = static_cast<int64_t>(positions.size());
  Tensor t({all.dim(0), all.dim(1), n, D}, DType::f32);
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t i = 0; i < n; ++i)
      std::copy_n(all.data<float>() + (bh * N + positions[i]) * D, D,
                  t.data<float>() + (bh * n + i) * D);
  return t;
}

// max |mine − all[positions]| on this rank.
double max_difference(const Tensor& mine, const Tensor& all,
                      const std::vector<int64_t>& positions) {
  const Tensor expected = rows_of(all, positions);
  double worst = 0;
  for (int64_t i = 0; i < mine.numel(); ++i) {
    const double d = std::abs(double(mine.data<float>()[i]) - expected.data<float>()[i]);
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

// Rank 0's tensor, on every rank.
void broadcast(Tensor& t) {
  MPI_Bcast(t.data<float>(), static_cast<int>(t.numel()), MPI_FLOAT, 0, MPI_COMM_WORLD);
}

double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

Measured measure(const RingCase& c, int64_t N, int64_t Hq, int64_t Hkv, int64_t D,
                 const bench::Settings& s) {
  int rank = 0, P = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  std::mt19937_64 rng(17);
  const Tensor q = bench::normal_tensor({1, Hq, N, D}, rng);
  const Tensor k = bench::normal_tensor({1, Hkv, N, D}, rng);
  const Tensor v = bench::normal_tensor({1, Hkv, N, D}, rng);
  const Tensor dout = bench::normal_tensor({1, Hq, N, D}, rng);
  Measured m;

  // The single process: its result is what the ring must give, its time the baseline.
  Tensor out({1, Hq, N, D}), dq({1, Hq, N, D}), dk({1, Hkv, N, D}), dv({1, Hkv, N, D});
  if (rank == 0) {
    const AttentionOptions o{.causal = c.causal ? Causal::top_left : Causal::none,
                             .keep_for_backward = true,
                             .path = Path::fused,
                             .num_threads = s.threads};
    AttentionResult f;
    m.single_fwd = bench::median_seconds([&] { f = attention(q, k, v, o); }, s.repeats);
    AttentionGrads g;
    m.single_bwd =
        bench::median_seconds([&] { g = attention_backward(dout, q, k, v, f, o); }, s.repeats);
    out = f.out, dq = g.dq, dk = g.dk, dv = g.dv;
  }
  for (Tensor* t : {&out, &dq, &dk, &dv}) broadcast(*t);
  MPI_Bcast(&m.single_fwd, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  MPI_Bcast(&m.single_bwd, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);

  // Equal blocks; the ring's rows of this rank.
  std::vector<int64_t> lengths(P, N / P);
  for (int r = 0; r < N % P; ++r) ++lengths[r];
  const auto mine = distributed::ring_positions(c.layout, lengths, rank);
  const Tensor ql = rows_of(q, mine), kl = rows_of(k, mine), vl = rows_of(v, mine);
  const Tensor doutl = rows_of(dout, mine);
  const distributed::RingOptions o{
      .causal = c.causal, .layout = c.layout, .num_threads = s.threads};
  // Validate (and warm up), then time: each run between barriers, its time the slowest rank's.
  distributed::RingResult f = distributed::ring_attention(MPI_COMM_WORLD, ql, kl, vl, o);
  distributed::RingGrads g =
      distributed::ring_attention_backward(MPI_COMM_WORLD, doutl, ql, kl, vl, f, o);
  m.err[0] = max_over_ranks(max_difference(f.out, out, mine));
  m.err[1] = max_over_ranks(max_difference(g.dq, dq, mine));
  m.err[2] = max_over_ranks(max_difference(g.dk, dk, mine));
  m.err[3] = max_over_ranks(max_difference(g.dv, dv, mine));
  std::vector<double> fwd, bwd;
  double wait = 0, busy = 0;
  for (int r = 0; r < s.repeats; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    f = distributed::ring_attention(MPI_COMM_WORLD, ql, kl, vl, o);
    fwd.push_back(max_over_ranks(MPI_Wtime() - t0));
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    g = distributed::ring_attention_backward(MPI_COMM_WORLD, doutl, ql, kl, vl, f, o);
    bwd.push_back(max_over_ranks(MPI_Wtime() - t0));
    wait += f.traffic.wait_seconds + g.traffic.wait_seconds;
    busy += fwd.back() + bwd.back();
  }
  m.ring_fwd = median(fwd), m.ring_bwd = median(bwd);
  m.mib_fwd = max_over_ranks(f.traffic.bytes_sent / 1048576.0);
  m.mib_bwd = max_over_ranks(g.traffic.bytes_sent / 1048576.0);
  m.wait_share = max_over_ranks(wait / busy);
  return m;
}

std::string decimal(double x, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}
std::string sci(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1e", x);
  return buf;
}

constexpr double kTolerance = 1e-4;  // N(0, 1) inputs, D = 64: fp32 rounding is ~1e-6

// What one rank holds at its peak (measure()): the whole problem — q, k, v and dout — and the
// single process's results — out, dq, dk, dv — as every rank keeps them to compare against, and
// on rank 0 also the single process's own (three such sets, and half a set more for the fused
// backward's own buffers: measured, 329 MiB at N = 8192 against 345 counted without them); its
// rows of the problem and the comparison's copy of them; the ring's own buffers
// (distributed::ring_attention_bytes).
int64_t rank_bytes(int64_t N, int64_t Hq, int64_t Hkv, int64_t D, int P) {
  const double set = 4.0 * static_cast<double>(2 * Hq + 2 * Hkv) * static_cast<double>(N * D);
  const int64_t rows = (N + P - 1) / P;
  return saturated_bytes(
      static_cast<double>(kProcessBytes) + 3.5 * set + 2 * set / P +
      static_cast<double>(distributed::ring_attention_bytes(1, Hq, Hkv, D, rows, rows)));
}

// The ranks on this machine (they share its memory), as MPI_COMM_TYPE_SHARED groups them.
int ranks_on_this_machine() {
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int n = 1;
  MPI_Comm_size(local, &n);
  MPI_Comm_free(&local);
  return n;
}

// "—" where either time is too short to time (bench::timed), else the efficiency in percent.
std::optional<double> efficiency(double single, double ring, int P) {
  if (!bench::timed(single) || !bench::timed(ring)) return std::nullopt;
  return single / (P * ring);
}

}  // namespace

namespace {

// Every rank must run the same cases: ranks started with other options (mpiexec's
// `-n 1 qkv … : -n 1 qkv … --repeats 3`) waited on each other forever. Each rank's settings are
// compared with rank 0's, and all refuse together: false on a rank that should leave quietly.
bool ranks_agree(const bench::Settings& s, int64_t N, bool causal_contiguous, int rank) {
  const int64_t mine[] = {N, s.repeats, s.threads, s.quick, s.json, causal_contiguous};
  int64_t first[std::size(mine)];
  std::copy(std::begin(mine), std::end(mine), first);
  MPI_Bcast(first, static_cast<int>(std::size(first)), MPI_INT64_T, 0, MPI_COMM_WORLD);
  int differs = std::equal(std::begin(mine), std::end(mine), first) ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &differs, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (differs == 0) return true;
  MPI_Finalize();
  if (rank != 0) return false;
  throw Error(
      "qkv bench ring: the ranks were started with different options (--length, --repeats, "
      "--threads, --quick, --json or --causal-contiguous); expected one command line for "
      "every rank",
      Error::Kind::invalid_argument);
}

// Every rank holds the whole problem: what the ranks on this machine need together is said, and
// refused past --memory-limit, before any of it is allocated (the ranks agree on the lowest
// limit among them, since a ulimit or a cgroup can differ by rank or machine; rank 0 says it, the
// others leave quietly with status 0: a rank that ended non-zero first had mpiexec kill rank 0
// before its message was written, so the refusal came out as mpiexec's). False on a rank that
// should leave quietly.
bool memory_suffices(const BenchRingArgs& args, int64_t N, int64_t Hq, int64_t Hkv, int64_t D,
                     int P, int rank) {
  const int local_ranks = ranks_on_this_machine();
  const int64_t need = saturated_bytes(static_cast<double>(rank_bytes(N, Hq, Hkv, D, P)) *
                                       static_cast<double>(local_ranks));
  const int64_t own_limit = memory_limit(args.memory_limit);
  int64_t limit = own_limit, most_need = need;
  MPI_Allreduce(MPI_IN_PLACE, &limit, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &most_need, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  if (most_need <= limit) return true;
  MPI_Finalize();
  if (rank != 0) return false;
  check_memory(most_need, limit,
               "qkv bench ring: N = " + grouped(N) + " tokens on " + std::to_string(local_ranks) +
                   " rank" + (local_ranks == 1 ? "" : "s") +
                   " of this machine (each holds the whole problem)",
               limit < own_limit ? "the lowest --memory-limit among the ranks"
                                 : memory_limit_knob(args.memory_limit),
               "a smaller --length");
  return false;
}

struct RingRow {
  const RingCase& c;
  int P;
  int64_t N, Hq, Hkv, D;
  int threads;
  const Measured& m;
  std::optional<double> eff_fwd, eff_bwd;
};

void print_json_row(const RingRow& r) {
  const Measured& m = r.m;
  const auto optional = [](std::optional<double> x) {
    return x ? number_json(*x) : nlohmann::json(nullptr);  // null: too short to time
  };
  nlohmann::json j = {{"case", r.c.name},
                      {"ranks", r.P},
                      {"tokens", r.N},
                      {"Hq", r.Hq},
                      {"Hkv", r.Hkv},
                      {"D", r.D},
                      {"causal", r.c.causal},
                      {"layout", r.c.layout == RingLayout::zigzag ? "zigzag" : "contiguous"},
                      {"threads_per_rank", r.threads},
                      {"ring_fwd_ms", number_json(m.ring_fwd * 1e3)},
                      {"ring_bwd_ms", number_json(m.ring_bwd * 1e3)},
                      {"single_fwd_ms", number_json(m.single_fwd * 1e3)},
                      {"single_bwd_ms", number_json(m.single_bwd * 1e3)},
                      {"efficiency_fwd", optional(r.eff_fwd)},
                      {"efficiency_bwd", optional(r.eff_bwd)},
                      {"sent_mib_per_rank_fwd", number_json(m.mib_fwd)},
                      {"sent_mib_per_rank_bwd", number_json(m.mib_bwd)},
                      {"wait_share", number_json(m.wait_share)},
                      {"max_diff",
                       {number_json(m.err[0]), number_json(m.err[1]), number_json(m.err[2]),
                        number_json(m.err[3])}}};
  std::cout << j.dump() << "\n";
  flush_stdout();
}

void print_text_header(int P, int64_t N, int64_t Hq, int64_t Hkv, int64_t D,
                       const bench::Settings& s) {
  std::cout << "qkv bench ring: " << P << " rank" << (P == 1 ? "" : "s") << ", N = " << N
            << " tokens, Hq = " << Hq << ", Hkv = " << Hkv << ", D = " << D << ", float32, "
            << cpu::simd_target() << " kernels, " << s.threads << " thread"
            << (s.threads == 1 ? "" : "s") << " a rank, median of " << s.repeats
            << " after a warm-up\n\n"
            << "case           P  ring fwd  ring bwd  1-proc fwd  1-proc bwd  eff fwd  eff bwd"
               "  sent/rank fwd  bwd  wait  max|ring − 1-proc| out dq dk dv\n"
            << "                        ms        ms          ms          ms                 "
               "            MiB  MiB     %\n";
}

void print_text_row(const RingRow& r) {
  const Measured& m = r.m;
  // Padded by display columns: "—" is one column of three bytes.
  const auto percent = [](std::optional<double> x) {
    return pad_left(x ? decimal(*x * 100, 0) + "%" : std::string("—"), 8);
  };
  char line[512];
  std::snprintf(line, sizeof line, "%-13s %2d %9s %9s %11s %11s %s %s %14s %4s %5s  %s %s %s %s\n",
                r.c.name.c_str(), r.P, decimal(m.ring_fwd * 1e3, 1).c_str(),
                decimal(m.ring_bwd * 1e3, 1).c_str(), decimal(m.single_fwd * 1e3, 1).c_str(),
                decimal(m.single_bwd * 1e3, 1).c_str(), percent(r.eff_fwd).c_str(),
                percent(r.eff_bwd).c_str(), decimal(m.mib_fwd, 1).c_str(),
                decimal(m.mib_bwd, 1).c_str(), decimal(m.wait_share * 100, 0).c_str(),
                sci(m.err[0]).c_str(), sci(m.err[1]).c_str(), sci(m.err[2]).c_str(),
                sci(m.err[3]).c_str());
  std::cout << line;
  flush_stdout();
}

}  // namespace

int run_bench_ring(const BenchRingArgs& args) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) MPI_Init(nullptr, nullptr);
  int rank = 0, P = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  bench::Settings s = bench::resolve(args.common);
  // Ranks are the parallelism: one kernel thread each unless --threads says otherwise.
  if (args.common.threads == 0) s.threads = 1;
  const int64_t N = args.length > 0 ? args.length : (s.quick ? 512 : 4096);
  const int64_t Hq = 8, Hkv = 2, D = 64;
  std::vector<RingCase> cases = {{"full", false, RingLayout::contiguous},
                                 {"causal", true, RingLayout::zigzag}};
  if (args.causal_contiguous) cases.push_back({"causal-contig", true, RingLayout::contiguous});
  if (!ranks_agree(s, N, args.causal_contiguous, rank)) return 0;
  if (!memory_suffices(args, N, Hq, Hkv, D, P, rank)) return 0;
  if (rank == 0 && !s.json) print_text_header(P, N, Hq, Hkv, D, s);
  int status = 0;
  bool too_short = false;
  for (const RingCase& c : cases) {
    const Measured m = measure(c, N, Hq, Hkv, D, s);
    const RingRow row{c,
                      P,
                      N,
                      Hq,
                      Hkv,
                      D,
                      s.threads,
                      m,
                      efficiency(m.single_fwd, m.ring_fwd, P),
                      efficiency(m.single_bwd, m.ring_bwd, P)};
    too_short = too_short || !row.eff_fwd || !row.eff_bwd;
    const double worst = *std::max_element(m.err, m.err + 4);
    if (!(worst <= kTolerance)) status = 1;
    if (rank != 0) continue;
    s.json ? print_json_row(row) : print_text_row(row);
  }
  if (rank == 0 && status != 0)
    std::cerr << "qkv: error: the ring's result differs from the single process's by more than "
              << kTolerance << "; expected float32 rounding only\n";
  if (rank == 0 && !s.json && too_short) std::cout << "\n" << bench::kTooShortNote << "\n";
  if (rank == 0 && !s.json)
    std::cout << "\nEfficiency: the single process's time / (P × the ring's), both with "
              << s.threads << " thread" << (s.threads == 1 ? "" : "s")
              << " a process; below 100% is what the ring costs.\nOn one machine the ranks share "
                 "its cores: with more ranks than cores efficiency falls by that ratio.\n";
  MPI_Finalize();
  return status;
}

}  // namespace qkv::cli
#endif  // QKV_WITH_MPI
