// core/text/terminal.cpp — text for terminals (qkv/terminal.h).
#include "qkv/terminal.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <utility>

#include "core/text/unicode_tables.h"

namespace qkv {

std::string fixed(double x, int digits) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  std::string s = buf;
  // "-0.00" reads as a negative weight; show it as "0.00".
  if (s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
  return s;
}

std::string short_number(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

std::string count_word(std::size_t n) {
  static const char* const words[] = {"zero",  "one",   "two",  "three", "four",   "five",  "six",
                                      "seven", "eight", "nine", "ten",   "eleven", "twelve"};
  return n < std::size(words) ? words[n] : std::to_string(n);
}

namespace {

// The length of the valid UTF-8 sequence at s[i] (1 to 4) and its code point; 0 when the bytes
// there are not one (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, or
// cut short).
int utf8_sequence(std::string_view s, std::size_t i, char32_t& code_point) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) {
    code_point = b0;
    return 1;
  }
  int n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range (Unicode Table 3-7)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + static_cast<std::size_t>(n) > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  char32_t c = b0 & (0x7F >> n);
  for (int k = 1; k < n; ++k) {
    const unsigned char b = byte(i + static_cast<std::size_t>(k));
    if ((b & 0xC0) != 0x80) return 0;
    c = (c << 6) | (b & 0x3F);
  }
  code_point = c;
  return n;
}

// Code points a terminal acts on or that reorder the text around them.
bool is_control(char32_t c) {
  return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x2028 || c == 0x2029 ||
         (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069);
}

}  // namespace

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  char buf[16];
  for (std::size_t i = 0; i < s.size();) {
    char32_t c = 0;
    const int n = utf8_sequence(s, i, c);
    if (n == 0) {  // not UTF-8: the byte itself
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(s[i]));
      out += buf;
      ++i;
      continue;
    }
    if (!is_control(c)) {
      out.append(s.substr(i, static_cast<std::size_t>(n)));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      if (c < 0x80)
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      else
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    }
    i += static_cast<std::size_t>(n);
  }
  return out;
}

std::string printable_line(std::string_view s, std::size_t max_bytes) {
  std::string shown = printable(s);
  if (shown.size() <= max_bytes) return shown;
  std::size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xC0) == 0x80) --cut;  // UTF-8
  const std::size_t more = shown.size() - cut;
  return shown.substr(0, cut) + "… (" + std::to_string(more) + " more bytes)";
}

std::string printable_lines(std::string_view s) {
  std::string out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == '\n' || s[i] == '\t') {
      out += printable(s.substr(start, i - start));
      if (i < s.size()) out += s[i];
      start = i + 1;
    }
  return out;
}

std::size_t whole_characters(std::string_view s) {
  std::size_t end = s.size(), back = 0;
  while (back < 3 && back < end && (static_cast<unsigned char>(s[end - 1 - back]) & 0xC0) == 0x80)
    ++back;
  if (back == end) return end;
  const auto lead = static_cast<unsigned char>(s[end - 1 - back]);
  const std::size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return need > back + 1 ? end - 1 - back : end;
}

int display_width(const std::string& s) {
  int n = 0;
  for (std::size_t i = 0; i < s.size();) {
    char32_t c = 0;
    const int len = utf8_sequence(s, i, c);
    n += len > 0 ? unicode::columns(c) : 1;  // a byte that is not UTF-8: one column
    i += static_cast<std::size_t>(std::max(len, 1));
  }
  return n;
}

std::string pad_left(const std::string& s, int width) {
  return std::string(std::max(0, width - display_width(s)), ' ') + s;
}

std::string pad_right(const std::string& s, int width) {
  return s + std::string(std::max(0, width - display_width(s)), ' ');
}

std::string clip(const std::string& s, int width) {
  if (display_width(s) <= width) return s;
  // Whole characters while they and the "…" fit, with the zero-width marks that follow them.
  std::string out;
  int n = 0;
  for (std::size_t i = 0; i < s.size();) {
    char32_t c = 0;
    const int len = utf8_sequence(s, i, c);
    const int w = len > 0 ? unicode::columns(c) : 1;
    if (n + w > width - 1) break;
    const auto bytes = static_cast<std::size_t>(std::max(len, 1));
    out.append(s, i, bytes);
    n += w;
    i += bytes;
  }
  return out + "…";
}

std::string render(const Table& t) {
  constexpr int kMaxLabel = 12;
  std::vector<std::vector<std::string>> rows(1 + t.cells.size());
  rows[0].push_back("");
  for (const std::string& label : t.column_labels) rows[0].push_back(clip(label, kMaxLabel));
  for (std::size_t r = 0; r < t.cells.size(); ++r) {
    rows[r + 1].push_back(clip(t.row_labels[r], kMaxLabel));
    rows[r + 1].insert(rows[r + 1].end(), t.cells[r].begin(), t.cells[r].end());
  }
  const std::vector<int> widths = column_widths(rows);
  std::string out;
  for (const auto& row : rows)
    out += std::string(t.indent, ' ') + table_row(row, widths, 1, 2) + '\n';
  return out;
}

std::string table_row(const std::vector<std::string>& cells, const std::vector<int>& widths,
                      int left, int gap) {
  std::string out;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const int width = i < widths.size() ? widths[i] : 0;
    out += (i ? std::string(gap, ' ') : "") +
           (static_cast<int>(i) < left ? pad_right(cells[i], width) : pad_left(cells[i], width));
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::vector<int> column_widths(const std::vector<std::vector<std::string>>& rows) {
  std::vector<int> widths;
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (c >= widths.size()) widths.push_back(0);
      widths[c] = std::max(widths[c], display_width(row[c]));
    }
  return widths;
}

std::string wrap(const std::string& text, int width, int indent) {
  std::string out, line;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t space = text.find(' ', start);
    if (space == std::string::npos) space = text.size();
    const std::string word = text.substr(start, space - start);
    if (!line.empty() && display_width(line) + 1 + display_width(word) > width) {
      out += line + "\n";
      line = std::string(indent, ' ') + word;
    } else {
      line += (line.empty() ? "" : " ") + word;
    }
    start = space + 1;
  }
  return out + line;
}

std::string wrap_paragraphs(const std::string& text, int width) {
  std::string out;
  for (std::size_t start = 0; start <= text.size();) {
    std::size_t end = text.find("\n\n", start);
    if (end == std::string::npos) end = text.size();
    out += (out.empty() ? "" : "\n\n") + wrap(text.substr(start, end - start), width, 0);
    start = end + 2;
  }
  return out;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> parts;
  if (s.empty()) return parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = s.find(',', start);
    parts.push_back(s.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return parts;
}

std::string bar(double value, int width) {
  static const char* const kEighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  if (!(value > 0)) return "";
  const int eighths = static_cast<int>(std::lround(std::min(value, 1.0) * width * 8));
  std::string s;
  for (int i = 0; i < eighths / 8; ++i) s += "█";
  s += kEighths[eighths % 8];
  return s;
}

std::string heatmap_cell(double w, bool color) {
  if (std::isnan(w)) return "??";
  if (color) {
    // From dark blue (0) through teal to yellow (1): readable on dark and light terminals.
    static const int kRamp[] = {17, 18, 19, 20, 25, 31, 37, 43, 79, 115, 151, 187, 229, 226};
    const int n = static_cast<int>(std::size(kRamp));
    const int k =
        std::clamp(static_cast<int>(std::lround(std::clamp(w, 0.0, 1.0) * (n - 1))), 0, n - 1);
    return "\x1b[48;5;" + std::to_string(kRamp[k]) + "m  \x1b[0m";
  }
  static const char* const kShades[] = {"  ", "··", "░░", "▒▒", "▓▓", "██"};
  const int k = w < 0.02 ? 0 : std::clamp(1 + static_cast<int>(std::min(w, 1.0) * 5), 1, 5);
  return kShades[k];
}

// ---- the progress line ----

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

void Progress::report(const std::string& text, bool milestone) {
  if (!enabled_) {
    if (milestone) std::cerr << text << "\n" << std::flush;
    return;
  }
  const double now =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  if (!milestone && now - last_shown_ < 0.1) return;  // ten redraws a second at most
  last_shown_ = now;
  show(text);
}

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

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

}  // namespace qkv
