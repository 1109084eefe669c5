#include "progress.h"

#include <unistd.h>

#include <cmath>
#include <iostream>
#include <utility>

#include "text.h"

namespace qkv::cli {

std::string duration_str(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "—";
  const long s = std::lround(seconds);
  const auto two = [](long x) { return (x < 10 ? "0" : "") + std::to_string(x); };
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m" + two(s % 60) + "s";
  return std::to_string(s / 3600) + "h" + two(s % 3600 / 60) + "m";
}

std::string step_counter(int64_t step, int64_t steps, bool with_bar) {
  std::string line = "step " + std::to_string(step) + "/" + std::to_string(steps);
  if (with_bar)
    line +=
        " ▕" + pad_right(bar(static_cast<double>(step) / static_cast<double>(steps), 20), 20) + "▏";
  return line;
}

namespace {

// Steps a second since the start, and the seconds the steps left take at that rate (NaN before
// any rate is known).
std::pair<double, double> rate_and_seconds_left(int64_t step, int64_t steps, double seconds) {
  const double rate = seconds > 0 ? static_cast<double>(step) / seconds : 0;
  return {rate, rate > 0 ? static_cast<double>(steps - step) / rate : NAN};
}

}  // namespace

std::string rate_and_eta(int64_t step, int64_t steps, double seconds) {
  const auto [rate, left] = rate_and_seconds_left(step, steps, seconds);
  return "  " + fixed(rate, 1) + " steps/s  ETA " + duration_str(left);
}

std::string rate_and_time_to_limit(int64_t step, int64_t steps, double seconds) {
  const auto [rate, left] = rate_and_seconds_left(step, steps, seconds);
  return "  " + fixed(rate, 1) + " steps/s  ≤ " + duration_str(left) + " to the " + grouped(steps) +
         "-step limit; may stop early";
}

Progress::Progress() : enabled_(::isatty(STDERR_FILENO) == 1) {}
Progress::~Progress() { clear(); }

void Progress::show(const std::string& text) {
  if (!enabled_) return;
  std::cerr << "\r\033[K" << text << std::flush;
  shown_ = true;
}

void Progress::clear() {
  if (!enabled_ || !shown_) return;
  std::cerr << "\r\033[K" << std::flush;
  shown_ = false;
}

}  // namespace qkv::cli
