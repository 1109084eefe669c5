// Text helpers for terminal output.
#include "explain/text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace qkv::explain {

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

std::string grouped(int64_t n) {
  const std::string digits = std::to_string(n);
  const std::size_t sign = n < 0 ? 1 : 0;
  std::string out = digits.substr(0, sign);
  for (std::size_t i = sign; i < digits.size(); ++i) {
    if (i > sign && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

int display_width(const std::string& s) {
  int n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;  // count lead bytes, not continuations
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
  std::string out;
  int n = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = s[i];
    if ((c & 0xC0) != 0x80 && ++n > width - 1) break;
    out += s[i];
  }
  return out + "…";
}

std::string render(const Table& t) {
  constexpr int kMaxLabel = 12;
  int row_w = 0;
  for (const auto& r : t.row_labels) row_w = std::max(row_w, display_width(clip(r, kMaxLabel)));
  std::vector<int> col_w(t.column_labels.size(), 0);
  for (std::size_t c = 0; c < col_w.size(); ++c) {
    col_w[c] = display_width(clip(t.column_labels[c], kMaxLabel));
    for (const auto& row : t.cells) col_w[c] = std::max(col_w[c], display_width(row[c]));
  }
  const std::string indent(t.indent, ' ');
  std::string out = indent + std::string(row_w, ' ');
  for (std::size_t c = 0; c < col_w.size(); ++c)
    out += "  " + pad_left(clip(t.column_labels[c], kMaxLabel), col_w[c]);
  out += '\n';
  for (std::size_t r = 0; r < t.cells.size(); ++r) {
    out += indent + pad_right(clip(t.row_labels[r], kMaxLabel), row_w);
    for (std::size_t c = 0; c < col_w.size(); ++c) out += "  " + pad_left(t.cells[r][c], col_w[c]);
    out += '\n';
  }
  return out;
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

}  // namespace qkv::explain
