// cli/progress.h — the one-line progress display of the long commands (bench, embed, search,
// train, experiment): a line on stderr rewritten in place, shown only when stderr is a terminal.
#pragma once

#include <cstdint>
#include <string>

namespace qkv::cli {

// The two ends of a training run's progress line (qkv train, its Perceiver):
// "step 300/1500 ▕████      ▏" (the bar only with `with_bar`) …
std::string step_counter(int64_t step, int64_t steps, bool with_bar);
// … "  12.3 steps/s  ETA 1m05s": the rate since the start, the time left at that rate, for a run
// that will take all its steps …
std::string rate_and_eta(int64_t step, int64_t steps, double seconds);
// … or "  12.3 steps/s  ≤ 1m05s to the 1,500-step limit; may stop early" for one that stops at a
// target accuracy: most runs end well before the limit, so the time to it is an upper bound.
std::string rate_and_time_to_limit(int64_t step, int64_t steps, double seconds);
// 59 → "59s", 65 → "1m05s", 3700 → "1h01m"; "—" for a negative or non-finite time.
std::string duration_str(double seconds);

class Progress {
 public:
  Progress();
  ~Progress();
  void show(const std::string& text);
  void clear();  // before writing a line of results to a terminal

 private:
  bool enabled_;
  bool shown_ = false;
};

}  // namespace qkv::cli
