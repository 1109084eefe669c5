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
// that will take all its steps (`unit` names what is counted: "steps", "texts") …
std::string rate_and_eta(int64_t step, int64_t steps, double seconds,
                         const std::string& unit = "steps");
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
  // The one throttle of every progress line: on a terminal `text` is shown at most ten times a
  // second (and always at a milestone); in a log (stderr not a terminal) it is written as a line
  // at each milestone only (a training run's start, an evaluation).
  void report(const std::string& text, bool milestone);
  bool terminal() const { return enabled_; }

 private:
  bool enabled_;
  bool shown_ = false;
  double last_shown_ = -1;  // steady-clock seconds of the last terminal redraw
};

// The progress of a job counted in items ("embedding 12,345/1,000,000 texts ▕██  ▏ 460 texts/s
// ETA 35m48s"), as training shows its steps: on a terminal, one line rewritten in place; else (a
// log, a pipe) one line at each further tenth of the job. Nothing during its first two seconds,
// so that a short job stays quiet.
class CountProgress {
 public:
  CountProgress(std::string verb, std::string unit);
  void update(int64_t done, int64_t all);
  void clear() { line_.clear(); }

 private:
  std::string verb_, unit_;
  Progress line_;
  bool terminal_;
  double start_;            // steady-clock seconds
  double last_shown_ = 0;   // of the terminal line, or of the last log line
  int64_t next_tenth_ = 0;  // the tenth of the job after which the next log line is written
};

}  // namespace qkv::cli
