// Text helpers for terminal output (explain layer): numbers, display widths, labelled matrices.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qkv::explain {

// A number with `digits` decimals; −∞, +∞ and NaN spelled "-inf", "inf", "nan".
std::string fixed(double x, int digits);
// A number in at most 4 significant digits: 0.3780 → "0.378", 3 → "3".
std::string short_number(double x);
// An integer with thousands separators: 1234567 → "1,234,567".
std::string grouped(int64_t n);

// Columns a string takes on a terminal (UTF-8 code points; good enough for labels).
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

}  // namespace qkv::explain
