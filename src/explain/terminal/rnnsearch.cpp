// RNNsearch's attention in the terminal: which vectors are its query, keys and values, one
// output step worked number by number, and how it maps onto a transformer's W_Q, W_K, W_V.
#include <algorithm>
#include <numeric>

#include "qkv/explain.h"

namespace qkv::explain {
namespace {

// The first `count` entries of row `i` of a [1, 1, n, d] capture tensor: "[+0.12 −0.53 … ]".
std::string vector_start(const Tensor& t, int64_t i, int count) {
  const int64_t d = t.dim(3);
  std::string s = "[";
  for (int64_t k = 0; k < std::min<int64_t>(count, d); ++k) {
    const double x = t.value(i * d + k);
    if (k > 0) s += ' ';
    s += x < 0 ? '-' : '+';
    s += fixed(std::abs(x), 2);
  }
  return s + (d > count ? " …]" : "]");
}

// ".62", "1.00".
std::string weight(double w) {
  std::string s = fixed(w, 2);
  return s.rfind("0.", 0) == 0 ? s.substr(1) : s;
}

// A source or output token in quotes, a space shown as "␣".
std::string quoted_token(const std::string& t) {
  std::string s = "'";
  s += t == " " ? "␣" : printable(t);
  s += '\'';
  return s;
}

}  // namespace

std::string render_rnnsearch(const Run& run) {
  const AttentionCapture& a = run.blocks.at(0).layers.at(0);
  const std::vector<std::string>& outputs = run.output.steps;
  const int64_t steps = a.weights.dim(2), n = a.weights.dim(3), d = a.q.dim(3);
  auto w = [&](int64_t i, int64_t j) { return a.weights.value(i * n + j); };
  // The step shown: the sharpest (largest top weight) among those that write a character.
  int64_t step = 0;
  double sharpest = -1;
  for (int64_t i = 0; i < steps; ++i) {
    if (outputs[static_cast<std::size_t>(i)] == "</s>") continue;
    for (int64_t j = 0; j < n; ++j)
      if (w(i, j) > sharpest) sharpest = w(i, j), step = i;
  }
  std::string dims = "(";
  dims += std::to_string(d);
  dims += " numbers)";
  std::string out;
  out += "Which vectors are the query, the keys and the values\n";
  out += "  query   s_{i-1}  the decoder's state before it writes output i " + dims + "\n";
  out += "  keys    h_j      the encoder's annotation of input character j, [→h_j; ←h_j]\n";
  out += "  values  h_j      the same vectors: what a step matches is what it reads\n";
  out += "  score   e_ij = v_a · tanh(W_a s_{i-1} + U_a h_j)    weight α_ij = softmax over j\n";
  out += "  output  c_i = Σ_j α_ij h_j, read by the decoder with y_{i-1} to make s_i\n\n";

  const std::string& written = outputs[static_cast<std::size_t>(step)];
  // Numbered from 1, as in the paper: output i is asked for with s_{i−1} (s_0 from ←h_1).
  const std::string i = std::to_string(step + 1), before = std::to_string(step);
  // Said on the view: the HTML report counts from 0, so its output 0 and key 3 are i = 1, j = 4.
  out += "Worked, for output i = " + i + ", " + quoted_token(written) + " (its sharpest step;\n" +
         "i and j count from 1, as in the paper, where the HTML report counts from 0):\n";
  out += "  query s_" + before + " = " + vector_start(a.q, step, 6) + "\n";
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return w(step, x) > w(step, y); });
  const int64_t shown = std::min<int64_t>(5, n);
  out += "     j  input  key h_j (first 4)                 e_" + i + "j    α_" + i + "j\n";
  for (int64_t r = 0; r < shown; ++r) {
    const int64_t j = order[static_cast<std::size_t>(r)];
    const double e = a.logits.value(step * n + j);
    out += "  " + pad_left(std::to_string(j + 1), 4) + "  " +
           pad_right(quoted_token(run.tokens[static_cast<std::size_t>(j)].surface), 5) + "  " +
           pad_right(vector_start(a.k, j, 4), 32) + pad_left(fixed(e, 2), 7) + "  " +
           pad_left(weight(w(step, j)), 5) + " " + bar(w(step, j), 10) + "\n";
  }
  if (n > shown) {
    double rest = 0;
    for (int64_t r = shown; r < n; ++r) rest += w(step, order[static_cast<std::size_t>(r)]);
    out += "        (" + std::to_string(n - shown) + (n - shown == 1 ? " more key" : " more keys") +
           ", together α " + weight(rest) + ")\n";
  }
  out += "  context c_" + i + " = Σ_j α_" + i + "j h_j = " + vector_start(a.head_out, step, 4) +
         "\n\n";
  out += wrap(
      "In a transformer's terms: there the query, the keys and the values are W_Q x, W_K x and "
      "W_V x, three projections of token vectors. Here W_a plays W_Q's part (on the decoder "
      "state s_{i-1}) and U_a plays W_K's (on the annotations h_j); instead of a dot product the "
      "score adds the two and passes the sum through tanh and v_a. There is no W_V: the values "
      "are the keys' own vectors h_j, so what a step matches on is also what it reads. A "
      "transformer separates them, so that a head can match on one feature (a position, a "
      "letter) and carry another.",
      80, 0);
  return out + "\n";
}

}  // namespace qkv::explain
