// What each latent gathers, formatted once: the terminal (cli/explain_perceiver.cpp) and the page
// (report.cpp beside this file) both show these strings.
#include <algorithm>
#include <cmath>

#include "qkv/explain.h"
#include "qkv/perceiver_report.h"

namespace qkv::explain {

LatentTable latent_table(const PerceiverExplanation& e) {
  LatentTable t;
  t.probability = fixed(e.probabilities.at(static_cast<std::size_t>(e.predicted)), 3);
  t.uniform_share = fixed(e.uniform_share, 4);
  t.uniform_weight = fixed(1.0 / static_cast<double>(e.length), 5);
  double most = 0;  // the bars are drawn against the latent that gathers the most
  for (const LatentGather& g : e.gathers) most = std::max(most, g.counted_mean);
  for (std::size_t n = 0; n < e.gathers.size(); ++n) {
    const LatentGather& g = e.gathers[n];
    LatentRow r{.label = "latent " + std::to_string(n),
                .bar = most > 0 ? g.counted_mean / most : 0,
                .counted = fixed(g.counted_mean, 3),
                .times_uniform = g.times_uniform ? fixed(*g.times_uniform, 1) + "×" : "—",
                .spread = grouped(std::llround(g.effective_positions))};
    for (double s : g.counted_share) r.per_head.push_back(fixed(s, 2));
    for (const auto& [l, w] : g.top)
      r.top.push_back(std::string(1, e.input.at(static_cast<std::size_t>(l))) + "@" +
                      std::to_string(l));
    t.rows.push_back(std::move(r));
  }
  return t;
}

}  // namespace qkv::explain
