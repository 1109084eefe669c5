// `qkv experiment tie-qk`: W_Q = W_K (a symmetric QKᵀ) against separate projections, on reverse
// and on follow, which needs a previous-token relation.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runner.h"

namespace qkv::experiments {

namespace {

// How the encoder's most previous-token-like head looks one way and the other: its mean weight
// from each letter to the letter before it (i → i−1) and to the one after it (i → i+1), over
// test sources of `follow` ("c qwcxe": letters from position 2 on). And one place in one source
// where the scores are compared both ways: s(i, i−1) against s(i−1, i), and the weights.
struct PreviousToken {
  int64_t head = 0;
  double back = 0, ahead = 0;  // mean weight on i−1, on i+1
  std::string source;          // the example: position i and its predecessor
  int64_t i = 0;
  double score_back = 0, score_ahead = 0;  // s(i, i−1) and s(i−1, i): q_i·k_{i−1}, q_{i−1}·k_i
  double self = 0, self_before = 0;  // s(i, i) and s(i−1, i−1): ‖q_i‖², ‖q_{i−1}‖² when tied
  double weight_back = 0, weight_ahead = 0;  // α(i → i−1) and α(i−1 → i)
};

PreviousToken previous_token(Seq2Seq& model, const Task& task) {
  const std::vector<Example> examples = test_set(task, 50);
  std::vector<Seq2SeqCapture> captures;
  for (const Example& e : examples) captures.push_back(model.capture(e.source));
  const int64_t heads = captures.front().heads;
  PreviousToken best;
  best.back = -1;
  for (int64_t h = 0; h < heads; ++h) {
    double back = 0, ahead = 0;
    int64_t nb = 0, na = 0;
    for (const Seq2SeqCapture& c : captures) {
      const Tensor& w = c.encoder.front().weights;  // [1, H, L, L]
      const int64_t n = w.shape()[2];
      for (int64_t i = 3; i < n; ++i, ++nb) back += w.at<float>(0, h, i, i - 1);
      for (int64_t i = 2; i + 1 < n; ++i, ++na) ahead += w.at<float>(0, h, i, i + 1);
    }
    if (back / std::max<int64_t>(nb, 1) > best.back)
      best = {.head = h,
              .back = back / std::max<int64_t>(nb, 1),
              .ahead = ahead / std::max<int64_t>(na, 1)};
  }
  // The example: in the first source, the letter whose weight on its predecessor is largest.
  const Seq2SeqCapture& c = captures.front();
  const Tensor &w = c.encoder.front().weights, &sc = c.encoder.front().scores;
  best.source = c.source;
  for (int64_t i = 3; i < w.shape()[2]; ++i)
    if (const double x = w.at<float>(0, best.head, i, i - 1); x > best.weight_back) {
      best.i = i;
      best.weight_back = x;
      best.weight_ahead = w.at<float>(0, best.head, i - 1, i);
      best.score_back = sc.at<float>(0, best.head, i, i - 1);
      best.score_ahead = sc.at<float>(0, best.head, i - 1, i);
      best.self = sc.at<float>(0, best.head, i, i);
      best.self_before = sc.at<float>(0, best.head, i - 1, i - 1);
    }
  return best;
}

// "0.52 / 0.06": the mean weight on i−1, then on i+1, of the seeds' previous-token heads.
std::string back_ahead(const std::vector<PreviousToken>& p) {
  if (p.empty()) return "·";
  double back = 0, ahead = 0;
  for (const PreviousToken& x : p) back += x.back / p.size(), ahead += x.ahead / p.size();
  return fmt("%.2f", back) + " / " + fmt("%.2f", ahead);
}

// Each seed's model read on follow's test sources.
std::vector<PreviousToken> previous_tokens(const Summary& m) {
  const Task task = make_task("follow");
  std::vector<PreviousToken> out;
  for (const auto& model : m.models) out.push_back(previous_token(*model, task));
  return out;
}

}  // namespace

ExperimentResult tie_qk(Runner& run) {
  const ExperimentOptions& o = run.options;
  ExperimentResult r{.name = "tie-qk",
                     .question =
                         "Why separate W_Q and W_K? With W_Q = W_K the score matrix QKᵀ is "
                         "symmetric: q_i·k_j = q_j·k_i, i scores j exactly as j scores i."};
  const Setup rev = sequence_setup("reverse", o.quick);
  // follow: one layer, so the encoder must write each letter's predecessor into it (see
  // follow_task). Either model finds that head suddenly, after 1,000 to 3,500 steps; the quick
  // run gives one seed 2,500.
  const Setup fol{.task = "follow",
                  .steps = o.quick ? 2500 : 4000,
                  .seeds = o.quick ? std::vector<uint64_t>{1} : std::vector<uint64_t>{1, 2}};
  r.setup = "reverse: " + setup_str(rev) + ". follow (\"c qwcxe\" → \"cx\"): " + setup_str(fol) +
            "; it needs each letter to take in the letter before it — an asymmetric relation "
            "among tokens of one kind. \"weight on i−1 / i+1\": the encoder head that looks "
            "most at the previous letter, its mean weight on it and on the next letter.";
  r.columns = {"task",         "projections",         "test accuracy",
               "steps to 99%", "weight on i−1 / i+1", "seconds"};
  run.runs = 2 * static_cast<int64_t>(rev.seeds.size() + fol.seeds.size());
  auto row = [](const std::string& task, const std::string& name, const Summary& m,
                const std::vector<PreviousToken>& previous) {
    return std::vector<std::string>{task,
                                    name,
                                    pct(m.accuracy),
                                    steps_str(m.reached),
                                    back_ahead(previous),
                                    fmt("%.1f", m.seconds)};
  };
  const Summary sep = train_seeds(rev, {}, run, "reverse, separate W_Q, W_K");
  const Summary tied = train_seeds(rev, {.tie_qk = true}, run, "reverse, tied W_Q = W_K");
  r.rows = {row("reverse", "separate W_Q, W_K", sep, {}),
            row("reverse", "tied W_Q = W_K", tied, {})};
  const Summary fsep = train_seeds(fol, {}, run, "follow, separate W_Q, W_K");
  const Summary ftied = train_seeds(fol, {.tie_qk = true}, run, "follow, tied W_Q = W_K");
  const std::vector<PreviousToken> psep = previous_tokens(fsep), ptied = previous_tokens(ftied);
  r.rows.push_back(row("follow", "separate W_Q, W_K", fsep, psep));
  r.rows.push_back(row("follow", "tied W_Q = W_K", ftied, ptied));

  // The reading leads with what tying does whatever the training (it follows from q_i = k_i),
  // then what it did here, measured, with the noise such small runs carry; the two read alike
  // only when the measured part is read against the first.
  r.reading =
      "What W_Q = W_K does, provably: each token's query is its key (q_i = k_i), so a "
      "self-attention head's scores are symmetric, s(i, j) = s(j, i) — a token's query ranks "
      "the keys as their queries rank it — and a token matches itself strongly: s(i, i) = "
      "‖q_i‖², and as s(i, j) ≤ ‖q_i‖ ‖q_j‖ (Cauchy–Schwarz), i can score j above itself only "
      "if ‖q_j‖ > ‖q_i‖, and then j scores itself above i. `qkv attend --example tied` works "
      "it by hand. The decoder's cross-attention compares two streams (its states against the "
      "encoder's), where even a shared W scores asymmetrically.\n\n";

  // The test's standard error of a difference of two accuracies, each on `n` sequences.
  const auto standard_errors = [](double a, double b, double n) {
    const double se = std::sqrt((a * (1 - a) + b * (1 - b)) / n);
    return se > 0 ? std::abs(a - b) / se : 0.0;
  };
  const double rev_tests =
      static_cast<double>(kTestExamples) * static_cast<double>(rev.seeds.size());
  const double gap = sep.accuracy - tied.accuracy;
  const auto seeds = [](const Setup& x) {
    return std::to_string(x.seeds.size()) + (x.seeds.size() == 1 ? " seed" : " seeds");
  };
  r.reading += "What it did here, measured (" + std::to_string(rev.layers) + "-layer models, " +
               seeds(rev) + " a task, " + std::to_string(kTestExamples) +
               " test sequences a seed): on reverse, separate projections reach " +
               pct(sep.accuracy) + " and tied ones " + pct(tied.accuracy) + " after " +
               grouped(rev.steps) + " steps, " +
               (std::abs(gap) < 0.0005
                    ? std::string("the same. ")
                    : "a gap of " + fmt("%.1f", 100 * std::abs(gap)) + " points (" +
                          fmt("%.1f", standard_errors(sep.accuracy, tied.accuracy, rev_tests)) +
                          " standard errors of the test), the " + (gap > 0 ? "tied" : "separate") +
                          " model behind. ");
  const auto when = [&](const Summary& m) {  // "99% at step 1,700"
    return m.reached ? "99% at step " + grouped(*m.reached)
                     : "short of 99% after " + grouped(fol.steps) + " steps";
  };
  r.reading +=
      "On follow, built to need each letter to take in the one before it — a one-way relation "
      "among tokens of one kind, where the symmetry binds — tied projections reach " +
      pct(ftied.accuracy) + " (" + when(ftied) + ") and separate ones " + pct(fsep.accuracy) +
      " (" + when(fsep) + ")" +
      (ftied.accuracy + 0.02 < fsep.accuracy ? ": the tied model behind. "
                                             : ": tying did not stop it. ") +
      "Which model got there first says little: either finds the head suddenly, after 1,000 to "
      "3,500 steps depending on the seed.\n\n";

  const PreviousToken& x = ptied.front();
  const auto ch = [&](int64_t i) {  // 'k'
    std::string q(3, '\'');
    q[1] = x.source.at(static_cast<std::size_t>(i));
    return q;
  };
  // Cauchy–Schwarz at work: the letter looks past itself at the one before only where that one's
  // vector is the longer, s(i, i) < s(i, i−1) < s(i−1, i−1).
  const bool longer = x.self < x.score_back && x.score_back < x.self_before;
  r.reading +=
      "How, with symmetric scores: the tied model has a previous-token head all the same (head " +
      std::to_string(x.head) + ": mean weight " + fmt("%.2f", x.back) + " on the letter before, " +
      fmt("%.2f", x.ahead) + " on the one after). In \"" + x.source + "\", " + ch(x.i) +
      " scores " + ch(x.i - 1) + " " + fmt("%.2f", x.score_back) + " and " + ch(x.i - 1) +
      " scores " + ch(x.i) + " " + fmt("%.2f", x.score_ahead) + "; " + ch(x.i) + " scores itself " +
      fmt("%.2f", x.self) + " and " + ch(x.i - 1) + " itself " + fmt("%.2f", x.self_before) +
      (longer ? ": " + ch(x.i - 1) + "'s vector is the longer, so " + ch(x.i) +
                    " scores it above itself, and it scores itself above " + ch(x.i) + ". "
              : ". ") +
      "The weights are not symmetric: " + fmt("%.2f", x.weight_back) + " from " + ch(x.i) + " to " +
      ch(x.i - 1) + ", " + fmt("%.2f", x.weight_ahead) +
      " back. Softmax normalizes each query's row on its own, so one score can win one row and "
      "lose the other to a stronger rival. W_Q = W_K constrains the scores, not the weights; "
      "Kitaev et al. (2020, Reformer) share them, report no loss, and keep a token from "
      "attending to itself, for the reason above. Separate W_Q and W_K let \"what I look for\" "
      "differ from \"what I am\" directly — the search query against the document's keywords "
      "— instead of through vector lengths and the rows' competition.";
  return r;
}

}  // namespace qkv::experiments
