// What the values carried, in the terminal: a head's weights beside its value-weighted weights,
// the mixing of the focus token's new vector, its rollout, and the attention sinks explained with
// their values' norms (qkv/explain_readings.h computes every number shown).
#include <algorithm>
#include <numeric>
#include <sstream>

#include "qkv/explain.h"

namespace qkv::explain {
namespace {

constexpr int kRows = 12;  // keys or sources listed at most

std::string name(const Run& run, int64_t j) {
  return pad_right(clip(printable(run.tokens[static_cast<std::size_t>(j)].text), 10), 10);
}

// The indices of row `row` of [.., m] values, largest first, at most kRows of those above zero.
std::vector<int64_t> largest(const std::vector<double>& row) {
  std::vector<int64_t> order(row.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return row[a] > row[b]; });
  while (!order.empty() && !(row[static_cast<std::size_t>(order.back())] > 0)) order.pop_back();
  if (order.size() > kRows) order.resize(kRows);
  return order;
}

std::vector<double> row_of(const Tensor& t, int64_t row) {  // [.., m] float64, row-major
  const int64_t m = t.dim(t.rank() - 1);
  return {t.data<double>() + row * m, t.data<double>() + (row + 1) * m};
}

// "token  share  bar" lines of a distribution over the tokens.
void shares(std::ostringstream& s, const Run& run, const std::vector<double>& row) {
  for (const int64_t j : largest(row))
    s << pad_left(std::to_string(j), 6) << " " << name(run, j)
      << pad_left(fixed(row[static_cast<std::size_t>(j)], 3), 7) << " "
      << bar(row[static_cast<std::size_t>(j)], 20) << "\n";
}

}  // namespace

std::string render_head_values(const Run& run, int64_t layer, int64_t head, int64_t focus,
                               const Style& style) {
  (void)style;
  if (run.blocks.empty() || run.blocks.front().ov_norms.empty()) return "";
  std::ostringstream s;
  const int64_t n = run.size();
  const std::string f = "\"" + printable(run.tokens[static_cast<std::size_t>(focus)].text) + "\"";
  const Tensor vw = value_weighted(run, layer);  // [H, n, m]
  std::vector<double> moved = row_of(vw, head * n + focus);
  const double total = std::accumulate(moved.begin(), moved.end(), 0.0);
  const double* norms = run.blocks.front().ov_norms[static_cast<std::size_t>(layer)].data<double>();
  s << "\n"
    << wrap("What the values carried (Kobayashi et al. 2020): head " + std::to_string(head) +
                " writes f(x_j) = W_O^h·v_j into the stream for key j; " + f +
                " receives Σ_j weight_j·f(x_j), so a key matters by weight × ‖f(x_j)‖, not by "
                "its weight alone.",
            80, 0)
    << "\n"
    << "        key         weight  ‖f(x_j)‖  weight×‖f‖   share of Σ\n";
  for (const int64_t j : largest(moved)) {
    const double x = moved[static_cast<std::size_t>(j)];
    s << pad_left(std::to_string(j), 6) << " " << name(run, j)
      << pad_left(fixed(run.weight(layer, head, focus, j), 3), 8)
      << pad_left(fixed(norms[head * n + j], 2), 10) << pad_left(fixed(x, 3), 12)
      << pad_left(fixed(total > 0 ? x / total : 0.0, 3), 8) << " "
      << bar(total > 0 ? x / total : 0, 12) << "\n";
  }
  if (has_mixing(run)) {
    s << "\n"
      << wrap("Where " + f + "'s vector after layer " + std::to_string(layer) +
                  "'s attention came from: its residual and every head's f(x_j), by source "
                  "token (Kobayashi et al. 2021" +
                  (run.causal() ? std::string(")")
                                : "; through the LayerNorm at its scale; the biases go to no "
                                  "token)") +
                  ":",
              80, 0)
      << "\n";
    shares(s, run, row_of(mixing(run, layer), focus));
    s << "\nWhich input tokens it came from through layers 0–" << layer
      << " (attention rollout, Abnar &\nZuidema 2020: ½·mean of the heads + ½·identity, "
         "multiplied over the layers):\n";
    shares(s, run, row_of(attention_rollout(run)[static_cast<std::size_t>(layer)], focus));
  }
  return s.str();
}

std::string render_sinks(const Run& run, const Style& style) {
  (void)style;
  const std::vector<SinkValues> sinks = sink_values(run);
  if (sinks.empty()) return "";
  std::ostringstream s;
  const std::string first = printable(run.tokens.front().text);
  s << "\n"
    << wrap(
           "The sinks, with their values (Kobayashi et al. 2020): a head that parks its "
           "weight on \"" +
               first +
               "\" (token 0) moves little where the value there is "
               "small. weight: on token 0; ‖f(x_0)‖: token 0's ‖W_O^h v‖, beside the other "
               "tokens' mean; share: token 0's part of Σ_j weight_j·‖f(x_j)‖; moved: that sum "
               "(the most the head writes into a token's stream), and as a part of the others' "
               "mean.",
           80, 0)
    << "\n"
    << "  head    weight  ‖f(x_0)‖  others   share   moved\n";
  for (std::size_t k = 0; k < std::min<std::size_t>(sinks.size(), 8); ++k) {
    const SinkValues& v = sinks[k];
    s << "  " << pad_right("L" + std::to_string(v.layer) + "h" + std::to_string(v.head), 7)
      << pad_left(fixed(v.weight, 2), 7) << pad_left(fixed(v.first_norm, 2), 10)
      << pad_left(fixed(v.others_norm, 2), 8) << pad_left(fixed(v.value_share, 2), 8)
      << pad_left(fixed(v.moved, 2), 8) << "  ("
      << (v.others_norm > 0 ? fixed(100 * v.moved / v.others_norm, 0) + "%" : "-") << ")\n";
  }
  if (sinks.size() > 8) s << "  … " << sinks.size() - 8 << " more (--json)\n";
  return s.str();
}

}  // namespace qkv::explain
