// qkv/threads.h — one thread pool for the process, and parallel_for over it (docs/CONVENTIONS.md
// §3).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace qkv {

// The machine's cores (std::thread::hardware_concurrency, at least 1).
int num_cores();
// The most threads qkv runs: kThreadsPerCore × num_cores(). More threads than cores only wait for
// one another, and each costs memory (a stack, and OpenBLAS's 128 MiB buffer in a thread that
// calls it): `--threads 4096` was accepted, and 50 threads under a memory limit hung (issue 26).
inline constexpr int kThreadsPerCore = 4;
int max_num_threads();
// "1 to 8 (4 × this machine's 2 cores)": the range a thread count must be in, for messages.
std::string num_threads_range();
// What is wrong with `n` as a thread count, empty if nothing (1 ≤ n ≤ max_num_threads()):
//   "4096 is more than 8; expected 1 to 8 (4 × this machine's 2 cores)"
std::string num_threads_problem(int64_t n);
// `n` if it is a thread count, else a qkv::Error (Kind::invalid_argument) naming `what`:
//   "num_threads: 4096 is more than 8; expected 1 to 8 (4 × this machine's 2 cores)"
int check_num_threads(int64_t n, const std::string& what);

// The thread count used when an API call asks for 0: the count set_num_threads gave, else
// $QKV_NUM_THREADS when it is set (an integer from 1 to max_num_threads(); anything else is a
// qkv::Error naming it — an empty value counts as unset), else the machine's cores.
int default_num_threads();
// Sets the process's default thread count (what default_num_threads returns from now on, in every
// thread): check_num_threads(n, "num_threads"), or 0 to go back to $QKV_NUM_THREADS / the cores.
// A front end's --threads goes here; OpenBLAS's own threads are qkv/blas.h's set_blas_threads.
void set_num_threads(int n);
// check_num_threads(requested, "num_threads") if positive, else default_num_threads().
int resolve_num_threads(int requested);

// Runs body(i, worker) for every i in [0, n) on at most `threads` workers (the caller is worker 0;
// 0 ≤ worker < threads). Items are claimed one at a time in increasing order, so which worker runs
// which item varies: results must not depend on it (give each item its own output, or its own
// partial reduced afterwards in a fixed order). Exceptions from body are rethrown in the caller.
void parallel_for(int64_t n, int threads, const std::function<void(int64_t i, int worker)>& body);

}  // namespace qkv
