#include "progress.h"

#include <unistd.h>

#include <chrono>
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

std::string rate_and_eta(int64_t step, int64_t steps, double seconds, const std::string& unit) {
  const auto [rate, left] = rate_and_seconds_left(step, steps, seconds);
  return "  " + fixed(rate, 1) + " " + unit + "/s  ETA " + duration_str(left);
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

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void Progress::report(const std::string& text, bool milestone) {
  if (!enabled_) {
    if (milestone) std::cerr << text << "\n" << std::flush;
    return;
  }
  const double now = now_seconds();
  if (!milestone && now - last_shown_ < 0.1) return;  // ten redraws a second at most
  last_shown_ = now;
  show(text);
}

namespace {

// Two seconds of silence: a job that ends sooner needs no progress.
constexpr double kQuietSeconds = 2.0;
// The longest a log (stderr not a terminal) goes without a line while a job runs.
constexpr double kLogSeconds = 30.0;

}  // namespace

CountProgress::CountProgress(std::string verb, std::string unit)
    : verb_(std::move(verb)),
      unit_(std::move(unit)),
      terminal_(::isatty(STDERR_FILENO) == 1),
      start_(now_seconds()) {}

void CountProgress::update(int64_t done, int64_t all) {
  const double now = now_seconds(), seconds = now - start_;
  if (seconds < kQuietSeconds || all <= 0) return;
  const std::string counted = verb_ + " " + grouped(done) + "/" + grouped(all) + " " + unit_;
  if (terminal_) {
    if (now - last_shown_ < 0.1 && done < all) return;  // ten redraws a second at most
    last_shown_ = now;
    line_.show(counted + " ▕" +
               pad_right(bar(static_cast<double>(done) / static_cast<double>(all), 20), 20) + "▏" +
               rate_and_eta(done, all, seconds, unit_));
    return;
  }
  // A log: the first line once the job has run long enough to need one, then one a tenth or one
  // every half minute, whichever comes first (a tenth of a million-line corpus is minutes).
  const int64_t tenth = done * 10 / all;
  if (tenth < next_tenth_ && now - last_shown_ < kLogSeconds) return;
  next_tenth_ = tenth + 1;
  last_shown_ = now;
  std::cerr << counted + rate_and_eta(done, all, seconds, unit_) << "\n" << std::flush;
}

}  // namespace qkv::cli
