// `qkv experiment heads`: 1, 2, 4, 8 heads at the same d_model.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "runner.h"

namespace qkv::experiments {

ExperimentResult heads(Runner& run) {
  const ExperimentOptions& o = run.options;
  ExperimentResult r{.name = "heads",
                     .question =
                         "Why several heads? At a fixed d_model, h heads of d_model/h "
                         "dimensions can look at h places at once."};
  Setup s = sequence_setup("reverse", o.quick);
  r.setup = setup_str(s) + " (heads varied).";
  r.columns = {"heads", "d_k", "test accuracy", "steps to 99%", "tokens/s"};
  std::vector<std::pair<int64_t, Summary>> results;
  // Quick: the two ends, which the full run ranks the same way (tests/golden/experiments).
  const std::vector<int64_t> counts =
      o.quick ? std::vector<int64_t>{1, 8} : std::vector<int64_t>{1, 2, 4, 8};
  run.runs = static_cast<int64_t>(counts.size() * s.seeds.size());
  for (int64_t h : counts) {
    Setup v = s;
    v.heads = h;
    const Summary m = train_seeds(v, {}, run, std::to_string(h) + " head(s)");
    results.emplace_back(h, m);
    r.rows.push_back({std::to_string(h), std::to_string(s.d_model / h), pct(m.accuracy),
                      steps_str(m.reached), fmt("%.0f", m.tokens_per_second)});
  }
  // Best: the highest accuracy, then the fewest steps to 99%.
  auto key = [](const Summary& m) {
    return std::pair(m.accuracy, -static_cast<double>(m.reached.value_or(1'000'000'000)));
  };
  const auto best =
      std::max_element(results.begin(), results.end(),
                       [&](const auto& a, const auto& b) { return key(a.second) < key(b.second); });
  const bool widest_worst = key(results.front().second) < key(best->second);
  r.reading = "The best run had " + std::to_string(best->first) +
              " head(s) (d_k = " + std::to_string(s.d_model / best->first) + ")" +
              (widest_worst ? ", ahead of a single head of the full width. " : ". ") +
              (best->first == 1
                   ? std::string("Here one wide head was enough: on this small a task, splitting "
                                 "d_model costs more than looking at several places gains.")
                   : std::string("Reversing needs each output step to find one source position "
                                 "while keeping track of what was already emitted: several "
                                 "narrower heads can attend to both at once, a single wide head "
                                 "must average them. ")) +
              (best->first == 1 ? std::string()
               : best->first == results.back().first
                   ? "Even the narrowest heads here (d_k = " +
                         std::to_string(s.d_model / results.back().first) +
                         ") could still tell the positions apart; with more heads each would "
                         "eventually get too few dimensions to."
                   : "Beyond that, each head gets too few dimensions (d_k) to tell the positions "
                     "apart as sharply.");
  return r;
}

}  // namespace qkv::experiments
