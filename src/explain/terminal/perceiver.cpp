// What each latent gathers, formatted once: the terminal's table (render_perceiver) and the
// report's table show these strings.
#include <algorithm>
#include <cmath>

#include "qkv/explain.h"

namespace qkv::explain {

LatentTable latent_table(const Run& run, const Gathers& g) {
  LatentTable t;
  t.probability =
      fixed(run.output.probabilities.at(static_cast<std::size_t>(run.output.predicted)), 3);
  t.uniform_share = fixed(g.uniform_share, 4);
  t.uniform_weight = fixed(1.0 / static_cast<double>(g.length), 5);
  double most = 0;  // the bars are drawn against the latent that gathers the most
  for (const LatentGather& lg : g.gathered) most = std::max(most, lg.counted_mean);
  for (std::size_t n = 0; n < g.gathered.size(); ++n) {
    const LatentGather& lg = g.gathered[n];
    LatentRow r{.label = "latent " + std::to_string(n),
                .bar = most > 0 ? lg.counted_mean / most : 0,
                .counted = fixed(lg.counted_mean, 3),
                .times_uniform = lg.times_uniform ? fixed(*lg.times_uniform, 1) + "×" : "—",
                .spread = grouped(std::llround(lg.effective_positions))};
    for (double s : lg.counted_share) r.per_head.push_back(fixed(s, 2));
    for (const auto& [l, w] : lg.top)
      r.top.push_back(std::string(1, run.text.at(static_cast<std::size_t>(l))) + "@" +
                      std::to_string(l));
    t.rows.push_back(std::move(r));
  }
  return t;
}

std::string render_perceiver(const Run& run, const Gathers& g) {
  const std::string& input = run.text;
  const char counted = run.counted;
  std::string places;
  for (int64_t l = 0; l < g.length; ++l)
    if (input[static_cast<std::size_t>(l)] == counted)
      places += (places.empty() ? "" : ", ") + std::to_string(l);
  const int32_t predicted = run.output.predicted;
  const LatentTable table = latent_table(run, g);
  std::string s = "qkv explain: a Perceiver, " + std::to_string(g.latents) + " latent queries × " +
                  std::to_string(g.heads) + " heads over " + grouped(g.length) + " symbols\n\n";
  s += "  input       \"" + clip(input, 60) + "\"\n";
  s += "              " + std::to_string(g.count) + " '" + std::string(1, counted) + "'" +
       (places.empty() ? "" : " at " + places) + "\n";
  s += "  prediction  " + std::to_string(predicted) + " (p = " + table.probability + "), " +
       (predicted == g.count ? "right" : "wrong: the count is " + std::to_string(g.count)) + "\n\n";
  s += "  What each latent gathers: its cross-attention weight on the '" + std::string(1, counted) +
       "' (all heads' mean,\n  and how many times a uniform look's " + table.uniform_share +
       "; then per head), how many positions\n" +
       "  it spreads over (exp entropy), and the positions it weighs most:\n\n";
  Table t;
  t.column_labels = {
      "on '" + std::string(1, counted) + "'", "× uniform", "", "per head", "spread", "top"};
  auto joined = [](const std::vector<std::string>& parts) {
    std::string j;
    for (const std::string& p : parts) j += (j.empty() ? "" : " ") + p;
    return j;
  };
  for (const LatentRow& r : table.rows) {
    t.row_labels.push_back(r.label);
    t.cells.push_back(
        {r.counted, r.times_uniform, bar(r.bar, 10), joined(r.per_head), r.spread, joined(r.top)});
  }
  return s + render(t);
}

}  // namespace qkv::explain
