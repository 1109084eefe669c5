// tests/cli/attend_examples_test.cpp — the worked examples `qkv attend --example lsi`,
// `--example recommend` and `--example tied`, checked against numbers worked out here from their
// inputs (restated below) or, for the SVD, by NumPy in examples/attend/make_lsi.py — never copied
// from qkv's output.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_runner.h"

namespace {

using qkv::testing::CliResult;
using qkv::testing::run_qkv;
using ::testing::HasSubstr;

// Every number of a nested JSON array, row-major.
void flatten(const nlohmann::json& x, std::vector<double>& out) {
  if (x.is_array())
    for (const auto& y : x) flatten(y, out);
  else
    out.push_back(x.get<double>());
}

std::vector<double> numbers(const nlohmann::json& x) {
  std::vector<double> out;
  flatten(x, out);
  return out;
}

nlohmann::json example_json(const std::string& name) {
  const CliResult r = run_qkv({"attend", "--example", name, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  return nlohmann::json::parse(r.out);
}

// `attend --help` said "'list' for all seven" when there were eight: the count is the list's.
TEST(AttendExamples, HelpCountsTheExamplesTheListShows) {
  const CliResult list = run_qkv({"attend", "--example", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.describe();
  const auto shown = std::count(list.out.begin(), list.out.end(), '\n');
  ASSERT_EQ(shown, 8) << list.out;  // examples/attend/*.json
  const CliResult help = run_qkv({"attend", "--help"});
  EXPECT_THAT(help.out, HasSubstr("or 'list' for all eight;")) << help.out;
}

// ---- lsi: the seeds' user-movie matrix

// Ratings of StarWars, Matrix, IronMan, UGotMail, Titanic.
constexpr std::array<std::array<double, 5>, 7> kUsers = {{{1, 1, 1, 0, 0},
                                                          {3, 3, 3, 0, 0},
                                                          {4, 4, 4, 0, 0},
                                                          {5, 5, 5, 0, 0},
                                                          {0, 2, 0, 4, 4},
                                                          {0, 0, 0, 5, 5},
                                                          {0, 1, 0, 2, 2}}};
constexpr std::array<std::array<double, 5>, 2> kNewUsers = {{{5, 0, 0, 0, 0}, {0, 4, 5, 0, 0}}};

double cosine(const double* a, const double* b, int n) {
  double ab = 0, aa = 0, bb = 0;
  for (int i = 0; i < n; ++i) ab += a[i] * b[i], aa += a[i] * a[i], bb += b[i] * b[i];
  return ab / std::sqrt(aa * bb);
}

TEST(AttendExamples, LsiRawCosineIsTheCosineOfTheRatings) {
  const nlohmann::json run = example_json("lsi").at("runs").at(0);
  EXPECT_EQ(run.at("score"), "cosine");
  const std::vector<double> scores = numbers(run.at("scores"));
  ASSERT_EQ(scores.size(), 14u);  // 2 new users × 7 users
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 7; ++j)
      EXPECT_NEAR(scores[i * 7 + j], cosine(kNewUsers[i].data(), kUsers[j].data(), 5), 1e-12)
          << "P" << i + 8 << " vs P" << j + 1;
  EXPECT_NEAR(scores[0], 1 / std::sqrt(3.0), 1e-12);  // P8 shares one movie of three with P1
  EXPECT_EQ(scores[4], 0.0);                          // and none with P5
}

// Run 2: W_Q = W_K = V_k Σ_k⁻¹. The cosines in concept space are NumPy's (make_lsi.py: an SVD
// by LAPACK); they are also the cosines of the projected rows the run reports as Q and K.
TEST(AttendExamples, LsiConceptCosineIsAttentionsCosineScore) {
  const nlohmann::json run = example_json("lsi").at("runs").at(1);
  const std::vector<double> scores = numbers(run.at("scores"));
  const std::vector<double> q = numbers(run.at("query")), k = numbers(run.at("keys"));
  ASSERT_EQ(scores.size(), 14u);
  ASSERT_EQ(q.size(), 4u);  // two new users in two concepts
  ASSERT_EQ(k.size(), 14u);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 7; ++j)
      EXPECT_NEAR(scores[i * 7 + j], cosine(&q[i * 2], &k[j * 2], 2), 1e-12);
  EXPECT_NEAR(scores[0], 0.993103, 1e-6);       // P8 vs P1: a sci-fi fan, like P1
  EXPECT_NEAR(scores[5], -0.187904, 1e-6);      // P8 vs P6: the romance fan
  EXPECT_NEAR(scores[7], 0.999221, 1e-6);       // P9 vs P1
  EXPECT_NEAR(q[0], 0.225245, 1e-6);            // P8 folded in: (0.23, -0.07), as in the seed
  EXPECT_NEAR(std::abs(q[1]), 0.066593, 1e-6);  // (a concept's sign is the SVD's choice)
  // P8 and P9 share no movie, yet in concept space their cosine is 0.9877 (the seed's number).
  EXPECT_NEAR(cosine(&q[0], &q[2], 2), 0.9877037969111454, 1e-9);
  // P1-P4 rate in one proportion, so they are one direction in either space: equal scores.
  for (int j = 1; j < 4; ++j) EXPECT_NEAR(scores[j], scores[0], 1e-12);
}

// Run 3: two different projections; the score is no longer symmetric, and P8 finds P5-P7.
TEST(AttendExamples, LsiTwoProjectionsMatchSciFiToRomance) {
  const nlohmann::json run = example_json("lsi").at("runs").at(2);
  const std::vector<double> scores = numbers(run.at("scores"));
  const std::vector<double> weights = numbers(run.at("weights"));
  ASSERT_EQ(scores.size(), 14u);
  EXPECT_NEAR(scores[5], 0.926465, 1e-6);   // P8 vs P6
  EXPECT_NEAR(scores[0], -0.441616, 1e-6);  // P8 vs P1
  EXPECT_NEAR(weights[4] + weights[5] + weights[6], 0.998232, 1e-6);
}

TEST(AttendExamples, LsiTextShowsTheReading) {
  const CliResult r = run_qkv({"attend", "--example", "lsi"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("W_Q = W_K = V_k"));
  EXPECT_THAT(r.out, HasSubstr("Run 3 of 3"));
  EXPECT_THAT(r.out, HasSubstr("0.99"));
}

// ---- recommend: DIN's target item against the history, softmax and raw scores

constexpr std::array<std::array<double, 4>, 2> kTargets = {{{0.9, 0.3, 0, 0.5}, {0, 0, 1, 0.4}}};
constexpr std::array<std::array<double, 4>, 5> kHistory = {
    {{1, 0, 0, 0}, {0.9, 0.2, 0, 0}, {0.8, 0.3, 0, 0}, {0, 1, 0, 0}, {0.4, 0, 0, 0.9}}};

// weights[i][j] for normalize softmax (or none) of the dot products, and out = weights · history.
void expected(bool softmax, std::vector<double>& weights, std::vector<double>& out) {
  weights.assign(10, 0), out.assign(8, 0);
  for (int i = 0; i < 2; ++i) {
    double sum = 0;
    for (int j = 0; j < 5; ++j) {
      double dot = 0;
      for (int d = 0; d < 4; ++d) dot += kTargets[i][d] * kHistory[j][d];
      weights[i * 5 + j] = softmax ? std::exp(dot) : dot;
      sum += weights[i * 5 + j];
    }
    for (int j = 0; j < 5; ++j) {
      if (softmax) weights[i * 5 + j] /= sum;
      for (int d = 0; d < 4; ++d) out[i * 4 + d] += weights[i * 5 + j] * kHistory[j][d];
    }
  }
}

TEST(AttendExamples, RecommendSoftmaxAndRawScoresSideBySide) {
  const nlohmann::json runs = example_json("recommend").at("runs");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].at("normalize"), "softmax");
  EXPECT_EQ(runs[1].at("normalize"), "none");
  for (int run = 0; run < 2; ++run) {
    std::vector<double> weights, out;
    expected(run == 0, weights, out);
    const std::vector<double> got_w = numbers(runs[run].at("weights"));
    const std::vector<double> got_out = numbers(runs[run].at("out"));
    ASSERT_EQ(got_w.size(), weights.size());
    ASSERT_EQ(got_out.size(), out.size());
    for (std::size_t i = 0; i < weights.size(); ++i) EXPECT_NEAR(got_w[i], weights[i], 1e-12);
    for (std::size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(got_out[i], out[i], 1e-12);
  }
  // The point of the example: softmax gives ChefsTable, which matches only Cosmos (0.36), an
  // almost even blend (1 / (4 + e^0.36) = 0.184 per unmatched item); raw scores sum to 3.69 for
  // Interstellar and 0.36 for ChefsTable.
  const std::vector<double> soft = numbers(runs[0].at("weights"));
  EXPECT_NEAR(soft[5], 1 / (4 + std::exp(0.36)), 1e-12);
  const std::vector<double> raw = numbers(runs[1].at("weights"));
  double interstellar = 0, chefs_table = 0;
  for (int j = 0; j < 5; ++j) interstellar += raw[j], chefs_table += raw[5 + j];
  EXPECT_NEAR(interstellar, 3.69, 1e-12);
  EXPECT_NEAR(chefs_table, 0.36, 1e-12);
}

TEST(AttendExamples, RecommendTextShowsTheReading) {
  const CliResult r = run_qkv({"attend", "--example", "recommend"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("DIN drops the softmax"));
  EXPECT_THAT(r.out, HasSubstr("Run 2 of 2: normalize none"));
}

// ---- tied: W_Q = W_K makes the scores symmetric, and a token's best match itself

// "the cat sat", one-hot features noun, verb, det; each run's W_Q and W_K (3 features → 2),
// restated from examples/attend/tied.json.
using Projection = std::array<std::array<double, 2>, 3>;
constexpr std::array<std::array<double, 3>, 3> kTheCatSat = {{{0, 0, 1}, {1, 0, 0}, {0, 1, 0}}};
constexpr Projection kAsks = {{{0, 2}, {2, 0}, {0, 0}}};     // a noun wants a det, a verb a noun
constexpr Projection kAnswers = {{{2, 0}, {0, 0}, {0, 2}}};  // a noun says so, a det says so
constexpr Projection kCatLonger = {{{3, 0}, {2, 0}, {0, 0}}};
constexpr std::array<std::pair<Projection, Projection>, 3> kTiedRuns = {
    {{kAsks, kAnswers}, {kAsks, kAsks}, {kCatLonger, kCatLonger}}};
enum Token { the = 0, cat = 1, sat = 2 };

// x·W for the three tokens.
std::array<std::array<double, 2>, 3> project(const Projection& w) {
  std::array<std::array<double, 2>, 3> out{};
  for (int t = 0; t < 3; ++t)
    for (int d = 0; d < 2; ++d)
      for (int f = 0; f < 3; ++f) out[t][d] += kTheCatSat[t][f] * w[f][d];
  return out;
}

// The scores q_i·k_j and the softmax weights of (q_i·k_j)/√2, row by row.
void tied_expected(int run, std::vector<double>& scores, std::vector<double>& weights) {
  const auto q = project(kTiedRuns[run].first), k = project(kTiedRuns[run].second);
  scores.assign(9, 0), weights.assign(9, 0);
  for (int i = 0; i < 3; ++i) {
    double sum = 0;
    for (int j = 0; j < 3; ++j) {
      scores[i * 3 + j] = q[i][0] * k[j][0] + q[i][1] * k[j][1];
      weights[i * 3 + j] = std::exp(scores[i * 3 + j] / std::sqrt(2.0));
      sum += weights[i * 3 + j];
    }
    for (int j = 0; j < 3; ++j) weights[i * 3 + j] /= sum;
  }
}

int argmax_row(const std::vector<double>& w, int row) {
  int best = 0;
  for (int j = 1; j < 3; ++j)
    if (w[row * 3 + j] > w[row * 3 + best]) best = j;
  return best;
}

TEST(AttendExamples, TiedScoresAndWeightsAreTheProjectionsProducts) {
  const nlohmann::json runs = example_json("tied").at("runs");
  ASSERT_EQ(runs.size(), 3u);
  for (int run = 0; run < 3; ++run) {
    SCOPED_TRACE("run " + std::to_string(run + 1));
    std::vector<double> scores, weights;
    tied_expected(run, scores, weights);
    EXPECT_EQ(runs[run].at("score"), "scaled-dot");
    EXPECT_NEAR(runs[run].at("scale").get<double>(), 1 / std::sqrt(2.0), 1e-15);
    const std::vector<double> got_s = numbers(runs[run].at("scores")),
                              got_w = numbers(runs[run].at("weights"));
    ASSERT_EQ(got_s.size(), 9u);
    ASSERT_EQ(got_w.size(), 9u);
    for (int i = 0; i < 9; ++i) {
      EXPECT_NEAR(got_s[i], scores[i], 1e-12) << "entry " << i;
      EXPECT_NEAR(got_w[i], weights[i], 1e-12) << "entry " << i;
    }
  }
}

// What the example shows: separate projections send "sat" to "cat"; tied ones, with every vector
// as long as the others, send it to itself; tied with "cat" the longer, "sat" finds "cat" and
// "cat" itself. Tied scores are symmetric, and each diagonal entry is ‖q‖².
TEST(AttendExamples, TiedFindsItselfWhereSeparateFindsTheSubject) {
  const nlohmann::json runs = example_json("tied").at("runs");
  ASSERT_EQ(runs.size(), 3u);
  const std::vector<double> separate = numbers(runs[0].at("weights")),
                            tied = numbers(runs[1].at("weights")),
                            longer = numbers(runs[2].at("weights"));
  EXPECT_EQ(argmax_row(separate, sat), cat);
  EXPECT_EQ(argmax_row(separate, cat), the);
  EXPECT_EQ(argmax_row(tied, sat), sat);
  EXPECT_EQ(argmax_row(tied, cat), cat);
  EXPECT_EQ(argmax_row(longer, sat), cat);
  EXPECT_EQ(argmax_row(longer, cat), cat);
  // By hand: e^(4/√2) / (e^(4/√2) + 2) = 0.894 on the match, run 1's "cat", run 2's "sat" itself.
  const double sharp = std::exp(4 / std::sqrt(2.0)) / (std::exp(4 / std::sqrt(2.0)) + 2);
  EXPECT_NEAR(separate[sat * 3 + cat], sharp, 1e-12);
  EXPECT_NEAR(tied[sat * 3 + sat], sharp, 1e-12);
  EXPECT_NEAR(sharp, 0.894, 5e-4);
  // Run 3: s(sat, cat) = 2·3 = 6, s(sat, sat) = 4, s(cat, cat) = 9; weights 0.80 and 0.11 across.
  EXPECT_NEAR(longer[sat * 3 + cat], 0.795, 5e-4);
  EXPECT_NEAR(longer[cat * 3 + sat], 0.107, 5e-4);
  for (int run : {1, 2}) {
    const std::vector<double> s = numbers(runs[run].at("scores"));
    const std::vector<double> q = numbers(runs[run].at("query"));
    for (int i = 0; i < 3; ++i) {
      EXPECT_NEAR(s[i * 3 + i], q[i * 2] * q[i * 2] + q[i * 2 + 1] * q[i * 2 + 1], 1e-12);
      for (int j = 0; j < 3; ++j) EXPECT_EQ(s[i * 3 + j], s[j * 3 + i]) << i << ", " << j;
    }
  }
  // Separate projections: not symmetric ("sat" scores "cat" 4, "cat" scores "sat" 0).
  const std::vector<double> s0 = numbers(runs[0].at("scores"));
  EXPECT_EQ(s0[sat * 3 + cat], 4.0);
  EXPECT_EQ(s0[cat * 3 + sat], 0.0);
}

TEST(AttendExamples, TiedTextShowsTheReading) {
  const CliResult r = run_qkv({"attend", "--example", "tied"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  // Its title said "each token's best match is itself", which its own run 3 shows untrue.
  EXPECT_THAT(r.out, HasSubstr("tied — W_Q = W_K: symmetric scores; a token prefers another only "
                               "if it is longer\n"));
  EXPECT_THAT(r.out, HasSubstr("Run 3 of 3"));
  EXPECT_THAT(r.out, HasSubstr("s(a, a) = ‖q_a‖²"));
}

}  // namespace
