// Checks shared by the subcommands' options. A floating-point option takes a finite number in
// its range: "nan", "inf" and out-of-range values are usage errors (exit 2) that say what was
// expected, e.g. "--temperature: nan is not a number; expected a number in [1e-06, 1e+06]".
#pragma once

#include <CLI/CLI.hpp>
#include <limits>

namespace qkv::cli {

struct Bounds {
  double lo = -std::numeric_limits<double>::max(), hi = std::numeric_limits<double>::max();
  bool lo_open = false, hi_open = false;  // whether lo / hi themselves are excluded
};

// A finite number within `bounds` (default: any finite number).
CLI::Validator finite_number(Bounds bounds = {});

// A thread count: an integer from 1 to 4 × the machine's cores (qkv/threads.h), the same bound as
// $QKV_NUM_THREADS and the library's num_threads. Every command's --threads takes this.
CLI::Validator thread_count();
// The help of a --threads option: "threads, at most 4 × the cores (default $QKV_NUM_THREADS, else
// all cores)".
std::string thread_count_help();

}  // namespace qkv::cli
