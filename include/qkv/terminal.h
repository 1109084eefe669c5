// qkv/terminal.h — text for terminals: numbers, display widths, tables, wrapped text, bars,
// heatmap cells and the one progress line of the long commands. Core: it needs only the Unicode
// tables (core/text/). The command, the views of explain (qkv/explain.h names these as
// explain::fixed, ...) and qkv bench all print through it, so a table is padded one way (by
// display width: "—" and "×" take one column, CJK two) and a progress line looks one way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qkv/tensor.h"

namespace qkv {

// A number with `digits` decimals; −∞, +∞ and NaN spelled "-inf", "inf", "nan".
std::string fixed(double x, int digits);
// A number in at most 4 significant digits: 0.3780 → "0.378", 3 → "3".
std::string short_number(double x);
// A count in running text, taken from the list it counts (a help text's literal "seven" outlived
// the eighth example): "zero" to "twelve" spelled out, larger counts in digits ("13").
std::string count_word(std::size_t n);
// An integer with thousands separators, grouped(1234567) → "1,234,567", is in qkv/tensor.h.

// Text from the user (a sentence, a corpus line, a token, a label, a file name) made safe to show
// on a terminal: control characters are spelled out instead of acted on — \n, \r, \t, other C0
// controls and DEL as \x1b, C1 controls (U+0080–U+009F) as \u009b, the bidirectional overrides
// and isolates (U+202A–U+202E, U+2066–U+2069) and the line/paragraph separators (U+2028, U+2029)
// as \u202e — and every byte that is not part of valid UTF-8 as \xNN. Everything else, backslashes
// included, is kept as it is. JSON and HTML output have their own escaping and do not use this.
std::string printable(std::string_view s);
// printable(s) as one line of at most about `max_bytes`: cut on a character boundary and ended
// "… (N more bytes)", so that a quoted argument of 100 KB cannot bury the message it is in.
std::string printable_line(std::string_view s, std::size_t max_bytes);
// printable, but line breaks and tabs kept as they are: a model's generated text.
std::string printable_lines(std::string_view s);
// The length of the longest prefix of `s` that does not end inside a UTF-8 character: a token
// may stop inside one (an emoji's four bytes can be two tokens), and half a character would print
// as garbage. Bytes that are no character's start or end count as whole.
std::size_t whole_characters(std::string_view s);

// Columns a string takes on a terminal: unicode::columns of each UTF-8 code point (CJK and most
// emoji 2, combining marks 0), 1 for a byte that is not UTF-8.
int display_width(const std::string& s);
std::string pad_left(const std::string& s, int width);
std::string pad_right(const std::string& s, int width);
// Shortens s to at most `width` columns, ending in "…" when cut.
std::string clip(const std::string& s, int width);

// A matrix with row and column labels, numbers right-aligned:
//              John   Joan
//   Jon        0.71   0.24
struct Table {
  std::vector<std::string> row_labels, column_labels;
  std::vector<std::vector<std::string>> cells;  // [rows][columns], already formatted
  int indent = 2;
};
std::string render(const Table& table);

// One row of a table whose columns have fixed widths (display columns, see display_width), for a
// table printed row by row as its rows are measured (qkv bench) or from column_widths: the first
// `left` cells left-aligned, the others right-aligned, `gap` spaces apart, no trailing spaces.
std::string table_row(const std::vector<std::string>& cells, const std::vector<int>& widths,
                      int left = 1, int gap = 1);
// The width of each column: the widest cell of it in any row.
std::vector<int> column_widths(const std::vector<std::vector<std::string>>& rows);

// Breaks text into lines of at most `width` columns at spaces; lines after the first get `indent`.
std::string wrap(const std::string& text, int width, int indent);

// Splits "a,b,c" on commas (no trimming; empty input → empty list).
std::vector<std::string> split_commas(const std::string& s);
// wrap() of each paragraph (separated by a blank line), the blank lines kept.
std::string wrap_paragraphs(const std::string& text, int width);

// A bar of `width` columns for a value in [0, 1], in eighths of a column: "█████▌".
std::string bar(double value, int width);

// One cell of a weights heatmap, two columns wide: a background colour from a ramp (color), or a
// shade character ("  " below 0.02, then ··, ░░, ▒▒, ▓▓, ██). Weights clamp to [0, 1]; NaN is "??",
// never a blank that reads as zero. Every heatmap of the terminal draws its cells with it.
std::string heatmap_cell(double w, bool color);

// ---- the progress line ----

// 59 → "59s", 65 → "1m05s", 3700 → "1h01m"; "—" for a negative or non-finite time.
std::string duration_str(double seconds);
// "step 300/1500 ▕████      ▏" (the bar only with `with_bar`): the left end of a training run's
// progress line …
std::string step_counter(int64_t step, int64_t steps, bool with_bar);
// … "  12.3 steps/s  ETA 1m05s": the rate since the start, the time left at that rate, for a run
// that will take all its steps (`unit` names what is counted: "steps", "texts") …
std::string rate_and_eta(int64_t step, int64_t steps, double seconds,
                         const std::string& unit = "steps");
// … or "  12.3 steps/s  ≤ 1m05s to the 1,500-step limit; may stop early" for one that stops at a
// target accuracy: most runs end well before the limit, so the time to it is an upper bound.
std::string rate_and_time_to_limit(int64_t step, int64_t steps, double seconds);

// One line on stderr rewritten in place, shown only when stderr is a terminal.
class Progress {
 public:
  Progress();
  ~Progress();
  void show(const std::string& text);
  void clear();                               // before writing a line of results to a terminal
  bool terminal() const { return enabled_; }  // whether stderr is a terminal
  // The one throttle of a progress line: on a terminal `text` is shown at most ten times a second
  // (and always at a milestone); in a log (stderr not a terminal) it is written as a line at each
  // milestone only (a training run's start, an evaluation).
  void report(const std::string& text, bool milestone);

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
  // A new verb for the lines from now on ("experiment heads: run 3/8, 4 heads:").
  void relabel(std::string verb) { verb_ = std::move(verb); }
  void clear() { line_.clear(); }

 private:
  std::string verb_, unit_;
  Progress line_;
  bool terminal_;
  double start_;            // steady-clock seconds
  double last_shown_ = 0;   // of the terminal line, or of the last log line
  int64_t next_tenth_ = 0;  // the tenth of the job after which the next log line is written
};

}  // namespace qkv
