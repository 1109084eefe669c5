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

// An unsigned 64-bit integer written in decimal, 0 to 2⁶⁴ − 1, for a seed. CLI11's own conversion
// wraps "-1" and saturates "18446744073709551616" to 2⁶⁴ − 1 without a word, and reads "010" as
// octal 8; this refuses the first two, e.g. "--seed: -1 is not an integer from 0 to
// 18446744073709551615", and rewrites the third as 10. Add it with transform(), which may rewrite
// the value (check() may not).
CLI::Validator seed_integer();

// A thread count: an integer from 1 to 4 × the machine's cores (qkv/threads.h), the same bound as
// $QKV_NUM_THREADS and the library's num_threads. Every command's --threads takes this.
CLI::Validator thread_count();
// The help of a --threads option: "threads, at most 4 × the cores (default $QKV_NUM_THREADS, else
// all cores)".
std::string thread_count_help();

}  // namespace qkv::cli
