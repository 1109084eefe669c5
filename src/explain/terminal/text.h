// Text helpers for terminal output (explain layer): numbers, display widths, labelled matrices.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/format.h"

namespace qkv::explain {

// A number with `digits` decimals; −∞, +∞ and NaN spelled "-inf", "inf", "nan".
std::string fixed(double x, int digits);
// A number in at most 4 significant digits: 0.3780 → "0.378", 3 → "3".
std::string short_number(double x);
// An integer with thousands separators: 1234567 → "1,234,567" (core/format.h).
using qkv::grouped;

// Text from the user (a sentence, a corpus line, a token, a label, a file name) made safe to show
// on a terminal: control characters are spelled out instead of acted on — \n, \r, \t, other C0
// controls and DEL as \x1b, C1 controls (U+0080–U+009F) as \u009b, the bidirectional overrides
// and isolates (U+202A–U+202E, U+2066–U+2069) and the line/paragraph separators (U+2028, U+2029)
// as \u202e — and every byte that is not part of valid UTF-8 as \xNN. Everything else, backslashes
// included, is kept as it is. JSON and HTML output have their own escaping and do not use this.
std::string printable(std::string_view s);

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

// Breaks text into lines of at most `width` columns at spaces; lines after the first get `indent`.
std::string wrap(const std::string& text, int width, int indent);

// Splits "a,b,c" on commas (no trimming; empty input → empty list).
std::vector<std::string> split_commas(const std::string& s);

// A bar of `width` columns for a value in [0, 1], in eighths of a column: "█████▌".
std::string bar(double value, int width);

// One cell of a weights heatmap, two columns wide: a background colour from a ramp (color), or a
// shade character ("  " below 0.02, then ··, ░░, ▒▒, ▓▓, ██). Weights clamp to [0, 1]; NaN is "??",
// never a blank that reads as zero. Every heatmap of the terminal draws its cells with it.
std::string heatmap_cell(double w, bool color);

}  // namespace qkv::explain
