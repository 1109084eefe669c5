// The causal lens in the terminal (render_lens): which heads carried the target — by ablation and
// by direct logit attribution, where each looked — then the logit lens, patching and knockout.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "qkv/explain.h"

namespace qkv::explain {
namespace {

constexpr int kWidth = 80;

std::string token(const std::string& t) { return "\"" + printable(t) + "\""; }

// "+1.92", "−2.31": the sign always shown, the minus typeset.
std::string signed_fixed(double x, int digits) {
  const std::string s = fixed(std::abs(x), digits);
  return (x < 0 && s.find_first_not_of("0.") != std::string::npos ? "−" : "+") + s;
}

// "1.92", "−2.31": the minus typeset, no plus.
std::string number(double x, int digits) {
  const std::string s = signed_fixed(x, digits);
  return s.starts_with("+") ? s.substr(1) : s;
}

// "L23h4"; an encoder–decoder's "L1 cross h2".
std::string head_name(const CausalReading& r, int64_t l, int64_t h) {
  const std::string& layer = r.layer_names[static_cast<std::size_t>(l)];
  return layer + (layer.find(' ') == std::string::npos ? "h" : " h") + std::to_string(h);
}

// Where head (l, h)'s last query looked most, and with what weight: "France" 0.71 — in the block
// and layer of the run that keep lens layer l's weights, on the row of the position measured.
std::string looked_at(const Run& run, const CausalReading& r, int64_t l, int64_t h) {
  const auto [b, layer] = r.captured_at[static_cast<std::size_t>(l)];
  const Block& block = run.blocks[static_cast<std::size_t>(b)];
  const int64_t query = r.step >= 0 ? r.step : run.size() - 1;
  const auto keys = static_cast<int64_t>(block.keys.size());
  int64_t best = 0;
  for (int64_t j = 1; j < keys && (!block.causal || j <= query); ++j)
    if (block.weight(layer, h, query, j) > block.weight(layer, h, query, best)) best = j;
  return clip(token(block.keys[static_cast<std::size_t>(best)].text), 14) + " " +
         fixed(block.weight(layer, h, query, best), 2);
}

// The heads in order of |key(effect)|, largest first.
std::vector<const HeadEffect*> ranked(const CausalReading& r, double (*key)(const HeadEffect&),
                                      std::size_t top) {
  std::vector<const HeadEffect*> order;
  for (const HeadEffect& e : r.heads) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [key](const HeadEffect* a, const HeadEffect* b) {
    return std::abs(key(*a)) > std::abs(key(*b));
  });
  order.resize(std::min(order.size(), top));
  return order;
}

std::string heads_table(const Run& run, const CausalReading& r) {
  std::ostringstream s;
  const bool versus = r.target.versus >= 0;
  const std::string metric = versus ? "logit difference" : "logit";
  s << wrap(
           "Heads by ablation: the head's output (its slice of W_O's input) zeroed at every "
           "position, the target's " +
               metric +
               " change; mean-ablated (its mean over the "
               "positions) in brackets; DLA: its direct part of the " +
               metric + "; where the last token's query looked most.",
           kWidth, 0)
    << "\n";
  const int name = r.step >= 0 ? 12 : 7;  // "L1 cross h3"
  const std::vector<int> widths = {name, 8, 9, 8, 29 - name};
  s << "  " << table_row({"head", "zeroed", "(mean)", "DLA", "last query looked at"}, widths, 1, 2)
    << "\n";
  for (const HeadEffect* e : ranked(
           r, [](const HeadEffect& x) { return x.ablation_metric_change; }, 8))
    s << "  "
      << table_row(
             {head_name(r, e->layer, e->head), signed_fixed(e->ablation_metric_change, 2),
              "(" + signed_fixed(e->mean_ablation_metric_change, 2) + ")",
              signed_fixed(e->direct_logit_attribution, 2), looked_at(run, r, e->layer, e->head)},
             widths, 1, 2)
      << "\n";
  s << "\n"
    << wrap(
           "Heads by direct logit attribution: each head's output at the last position through "
           "W_O and the final norm (its scale frozen), read on the target's unembedding" +
               std::string(versus ? " less the alternative's" : "") + ":",
           kWidth, 0)
    << "\n";
  const std::vector<const HeadEffect*> dla = ranked(
      r, [](const HeadEffect& x) { return x.direct_logit_attribution; }, 8);
  const double largest = dla.empty() ? 1 : std::abs(dla.front()->direct_logit_attribution);
  for (const HeadEffect* e : dla)
    s << "  " << pad_right(head_name(r, e->layer, e->head), name)
      << pad_left(signed_fixed(e->direct_logit_attribution, 2), 7) << "  "
      << pad_right(bar(std::abs(e->direct_logit_attribution) / std::max(largest, 1e-12), 16), 16)
      << "  " << looked_at(run, r, e->layer, e->head) << "\n";
  const Attribution& a = r.attribution;
  double attention = 0, mlp = 0;
  for (std::size_t l = 0; l < a.attention.size(); ++l) attention += a.attention[l], mlp += a.mlp[l];
  const std::string biases =
      a.constant != 0 ? ", biases no layer writes " + signed_fixed(a.constant, 2) : "";
  s << wrap("The parts sum to the " + metric + ": embedding " + signed_fixed(a.embedding, 2) +
                ", attention " + signed_fixed(attention, 2) + ", MLPs " + signed_fixed(mlp, 2) +
                biases + " = " + number(a.total, 2) + " (the run's " + number(r.clean.metric, 2) +
                ").",
            kWidth, 2)
    << "\n";
  return s.str();
}

std::string lens_table(const CausalReading& r) {
  std::ostringstream s;
  s << "\n"
    << wrap(
           "Logit lens: the stream after each layer read through the final norm and the "
           "unembedding — the most likely tokens there, and the target's rank:",
           kWidth, 0)
    << "\n";
  std::size_t at = 0;
  for (const LensRow& row : r.logit_lens) {
    std::string tops;
    for (std::size_t k = 0; k < row.top.size(); ++k, ++at)
      if (k < 3) tops += (k ? " " : "") + clip(token(r.lens_text[at]), 14);
    s << "  " << pad_left(r.layer_names[static_cast<std::size_t>(row.layer)], 8) << "  "
      << pad_right(clip(tops, 44), 44) << pad_left("#" + grouped(row.target_rank + 1), 8) << "\n";
  }
  return s.str();
}

std::string patching_view(const Run& run, const CausalReading& r, const Style& style) {
  const Patching& p = *r.patching;
  std::ostringstream s;
  s << "\n"
    << wrap("Activation patching from the text into \"" + printable(clip(r.corrupt, 60)) +
                "\": the metric is " + number(p.clean.metric, 2) + " clean and " +
                number(p.corrupted.metric, 2) +
                " corrupted; the share of that gap restored by copying a head's output (every "
                "position) from the clean run:",
            kWidth, 0)
    << "\n";
  std::vector<std::pair<double, int64_t>> order;
  const int64_t heads = p.heads.dim(1), n = static_cast<int64_t>(r.tokens.size());
  for (int64_t i = 0; i < p.heads.numel(); ++i) order.push_back({p.heads.data<double>()[i], i});
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return std::abs(a.first) > std::abs(b.first);
  });
  for (std::size_t k = 0; k < std::min<std::size_t>(6, order.size()); ++k)
    s << "  " << pad_right(head_name(r, order[k].second / heads, order[k].second % heads), 12)
      << pad_left(number(100 * order[k].first, 1) + "%", 8) << "\n";
  s << wrap(
           "The stream entering each layer (columns), patched at one token (rows); the share "
           "restored, shaded 0 to 1:",
           kWidth, 0)
    << "\n"
    << std::string(16, ' ');
  const int64_t layers = p.stream.dim(0);
  for (int64_t l = 0; l < layers; l += 5)
    s << pad_right(std::to_string(l), l + 5 < layers ? 10 : 2);
  s << "\n";
  for (int64_t j = 0; j < n; ++j) {
    const auto at = static_cast<std::size_t>(j);
    s << "  " << pad_right(clip(token(r.step >= 0 ? r.tokens[at] : run.tokens[at].text), 13), 14);
    for (int64_t l = 0; l < layers; ++l)
      s << heatmap_cell(p.stream.data<double>()[l * n + j], style.color);
    s << "\n";
  }
  return s.str();
}

}  // namespace

std::string render_lens(const Run& run, const Style& style) {
  if (!run.lens) return {};
  const CausalReading& r = *run.lens;
  std::ostringstream s;
  std::string head = "\nWhich heads carried " + token(r.target_text) + "? " +
                     (r.target_given ? "The target"
                      : r.step >= 0  ? "The token the model wrote"
                                     : "The model's most likely next token") +
                     (r.step >= 0 ? " at output step " + std::to_string(r.step + 1) +
                                        " (the decoder reading <s> and the " +
                                        std::to_string(r.step) + " outputs before it)"
                                  : std::string(" at the last position")) +
                     ": logit " + number(r.clean.logit, 2) +
                     ", p = " + fixed(std::exp(r.clean.log_prob), 3);
  if (r.target.versus >= 0)
    head += "; versus " + token(r.versus_text) + " (logit " + number(r.clean.versus_logit, 2) +
            "): the metric is their difference, " + number(r.clean.metric, 2);
  s << wrap(head + ".", kWidth, 0) << "\n\n" << heads_table(run, r) << lens_table(r);
  if (r.knocked)
    s << "\n"
      << wrap("Knockout of " + std::to_string(r.edges.size()) + " edge" +
                  (r.edges.size() == 1 ? "" : "s") + " (" + printable(clip(r.knockout, 40)) +
                  "; −∞ before the softmax): the metric goes from " + number(r.clean.metric, 2) +
                  " to " + number(r.knocked->metric, 2) + " (" +
                  signed_fixed(r.knocked->metric - r.clean.metric, 2) + "), p from " +
                  fixed(std::exp(r.clean.log_prob), 3) + " to " +
                  fixed(std::exp(r.knocked->log_prob), 3) + ".",
              kWidth, 0)
      << "\n";
  if (r.patching) s << patching_view(run, r, style);
  return s.str();
}

}  // namespace qkv::explain
