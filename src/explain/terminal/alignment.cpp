#include <algorithm>
#include <cmath>
#include <sstream>

#include "qkv/explain.h"

namespace qkv::explain {
namespace {}  // namespace

std::string render_alignment(const std::string& source, const std::vector<std::string>& outputs,
                             const Tensor& weights, const Style& style) {
  const Tensor w = weights.to(DType::f64);
  const int64_t steps = w.dim(0), n = w.dim(1);
  const int label_width = 7;
  std::ostringstream s;
  std::string header(static_cast<std::size_t>(label_width), ' ');
  header += "│";
  for (int64_t j = 0; j < n; ++j) {
    const char c =
        j < static_cast<int64_t>(source.size()) ? source[static_cast<std::size_t>(j)] : '?';
    header += (c == ' ' ? std::string("␣") : std::string(1, c)) + " ";
  }
  s << header << "\n";
  s << std::string(static_cast<std::size_t>(label_width), ' ') << "┼";
  for (int64_t j = 0; j < n; ++j) s << "──";
  s << "\n";
  for (int64_t t = 0; t < steps; ++t) {
    const std::string label =
        t < static_cast<int64_t>(outputs.size()) ? outputs[static_cast<std::size_t>(t)] : "?";
    s << pad_left(label == " " ? "␣" : label, label_width - 2) << "  │";
    for (int64_t j = 0; j < n; ++j) s << heatmap_cell(w.data<double>()[t * n + j], style.color);
    s << "\n";
  }
  s << (style.color ? "  dark blue = 0 … yellow = 1\n"
                    : "  weight:  '  ' < .02 ≤ ·· < .2 ≤ ░░ < .4 ≤ ▒▒ < .6 ≤ ▓▓ < .8 ≤ ██\n");
  return s.str();
}

}  // namespace qkv::explain
