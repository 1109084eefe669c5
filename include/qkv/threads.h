// qkv/threads.h — one thread pool for the process, and parallel_for over it (docs/CONVENTIONS.md
// §3).
#pragma once

#include <cstdint>
#include <functional>

namespace qkv {

// The thread count used when an API call asks for 0: $QKV_NUM_THREADS if it is a positive
// integer, else the machine's cores.
int default_num_threads();
// `requested` if positive, else default_num_threads().
int resolve_num_threads(int requested);

// Runs body(i, worker) for every i in [0, n) on at most `threads` workers (the caller is worker 0;
// 0 ≤ worker < threads). Items are claimed one at a time in increasing order, so which worker runs
// which item varies: results must not depend on it (give each item its own output, or its own
// partial reduced afterwards in a fixed order). Exceptions from body are rethrown in the caller.
void parallel_for(int64_t n, int threads, const std::function<void(int64_t i, int worker)>& body);

}  // namespace qkv
