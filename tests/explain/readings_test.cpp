// The readings of src/explain/readings/, each on a run built by hand with numbers chosen so that
// the expected reading can be worked out here independently: a decoder's sinks, previous-token and
// induction heads; an alignment and its heads' entropies; the lookup task's phonebook; what each
// of a Perceiver's latents gathers (and the same on a real, untrained Perceiver's run).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "explain/untrained_perceiver.h"
#include "qkv/explain.h"

namespace qkv::explain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A causal run of n tokens, one layer, whose weights[h][i][j] are given.
explain::Run decoder_run(const std::vector<std::vector<std::vector<double>>>& w) {
  const auto heads = static_cast<int64_t>(w.size()), n = static_cast<int64_t>(w[0].size());
  explain::Run run;
  run.model.layers = 1, run.model.heads = heads;
  for (int64_t i = 0; i < n; ++i) run.tokens.push_back({.text = "t" + std::to_string(i)});
  std::vector<double> flat;
  for (const auto& head : w)
    for (const auto& row : head) flat.insert(flat.end(), row.begin(), row.end());
  run.blocks.push_back({.causal = true});
  run.blocks[0].layers.push_back({.weights = Tensor::from({1, heads, n, n}, flat)});
  return run;
}

TEST(ReadingsHeadRoles, SinksAndPreviousTokenHeadsByTheirMeanWeight) {
  // Head 0 parks everything on token 0; head 1 looks one back; head 2 splits 0.6 / 0.4 between
  // token 0 and the token before (query 1: both are token 0, weight 1).
  const explain::Run run =
      decoder_run({{{1, 0, 0, 0}, {1, 0, 0, 0}, {1, 0, 0, 0}, {1, 0, 0, 0}},
                   {{1, 0, 0, 0}, {1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}},
                   {{1, 0, 0, 0}, {1, 0, 0, 0}, {0.6, 0.4, 0, 0}, {0.6, 0, 0.4, 0}}});
  const HeadRoles r = head_roles(run);
  // Means over queries 1..3 (query 1's token before is token 0 itself): head 0 sinks 1, looks
  // back 1/3; head 1 sinks 1/3, looks back 1; head 2 sinks (1 + 0.6 + 0.6) / 3 = 0.7333 and looks
  // back (1 + 0.4 + 0.4) / 3 = 0.6. Above one half: heads 0 and 2 sink, heads 1 and 2 look back.
  ASSERT_EQ(r.sinks.size(), 2u);
  EXPECT_EQ(r.sinks[0], ScoredHead(1.0, 0, 0));
  EXPECT_NEAR(std::get<0>(r.sinks[1]), 2.2 / 3, 1e-12);
  EXPECT_EQ(std::get<2>(r.sinks[1]), 2);
  ASSERT_EQ(r.previous.size(), 2u);
  EXPECT_EQ(r.previous[0], ScoredHead(1.0, 0, 1));
  EXPECT_NEAR(std::get<0>(r.previous[1]), 0.6, 1e-12);
  EXPECT_TRUE(r.induction.empty());  // no induction scores in the run
}

TEST(ReadingsHeadRoles, InductionScoresReadTheRepeatsDiagonal) {
  // T = 3: in the repeat, position T + i − 1 looks at position i (i = 1, 2). Head 0 puts 0.8 and
  // 0.4 there, head 1 nothing: scores 0.6 and 0.
  const int64_t t = 3, n = 2 * t;
  std::vector<double> w(static_cast<std::size_t>(2 * n * n), 0.0);
  w[static_cast<std::size_t>((0 * n + t + 0) * n + 1)] = 0.8;
  w[static_cast<std::size_t>((0 * n + t + 1) * n + 2)] = 0.4;
  w[static_cast<std::size_t>((1 * n + t + 0) * n + 0)] = 1.0;  // elsewhere: not counted
  const Tensor scores = induction_scores({{.weights = Tensor::from({1, 2, n, n}, w)}}, t);
  ASSERT_EQ(scores.shape(), (Shape{1, 2}));
  EXPECT_NEAR(scores.at<double>(0, 0), 0.6, 1e-12);
  EXPECT_EQ(scores.at<double>(0, 1), 0.0);

  explain::Run run = decoder_run({{{1, 0}, {0.5, 0.5}}, {{1, 0}, {0.5, 0.5}}});
  run.induction = scores;
  const std::vector<ScoredHead> induction = head_roles(run).induction;  // above 0.3: head 0
  ASSERT_EQ(induction.size(), 1u);
  EXPECT_NEAR(std::get<0>(induction[0]), 0.6, 1e-12);
  EXPECT_EQ(std::get<2>(induction[0]), 0);
}

// A trained model's run: one cross-attention block of [1, H, T, S] weights.
explain::Run cross_run(int64_t heads, int64_t steps, int64_t source, const std::vector<double>& w) {
  explain::Run run;
  run.model.family = "transformer";
  run.blocks.push_back({.kind = BlockKind::cross_attention, .name = "cross-attention"});
  run.blocks[0].layers.push_back({.weights = Tensor::from({1, heads, steps, source}, w)});
  return run;
}

TEST(ReadingsAlignment, EntropyPerHeadIsTheMeanOverSteps) {
  const double third = 1.0 / 3;
  // Head 0: one-hot rows (entropy 0); head 1: uniform rows (ln 3); head 2: one of each (ln 3 / 2).
  const explain::Run run = cross_run(3, 2, 3,
                                     {1, 0, 0, 0, 1, 0,                          //
                                      third, third, third, third, third, third,  //
                                      0, 0, 1, third, third, third});
  const Tensor a = alignment(run, 0);
  ASSERT_EQ(a.shape(), (Shape{3, 2, 3}));
  EXPECT_EQ(a.dtype(), DType::f64);
  EXPECT_EQ(a.at<double>(2, 0, 2), 1.0);
  const std::vector<double> entropy = head_entropy(a);
  ASSERT_EQ(entropy.size(), 3u);
  EXPECT_EQ(entropy[0], 0.0);
  EXPECT_NEAR(entropy[1], std::log(3.0), 1e-12);
  EXPECT_NEAR(entropy[2], std::log(3.0) / 2, 1e-12);
  EXPECT_EQ(sharpest_head(entropy), 0);
  EXPECT_THROW(alignment(run, 1), Error);  // one layer only
  EXPECT_THROW(alignment(explain::Run{}, 0), Error);
}

TEST(ReadingsPhonebook, ParsesOnlyThePhonebookFormat) {
  const std::optional<Phonebook> p = parse_phonebook("? b a3 b7 c1");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->query, 'b');
  ASSERT_EQ(p->entries.size(), 3u);
  EXPECT_EQ(p->entries[0].key, 'a');
  EXPECT_EQ(p->entries[0].number, '3');
  EXPECT_EQ(p->entries[0].at, 4);  // "? b " then "a3": the key at 4, its number at 5
  EXPECT_EQ(p->entries[2].at, 10);
  EXPECT_EQ(p->asked, 1u);
  EXPECT_FALSE(parse_phonebook("? z a3 b7")->asked);
  for (const char* bad : {"a3 b7 c1", "? b a3 b", "? b a3b7", "? B a3", "? b"})
    EXPECT_FALSE(parse_phonebook(bad)) << bad;
}

// "? b a3 b7 c1" (12 characters) through a lookup model built by hand: encoder head 1 binds each
// number to its key (0.9), head 0 does not (0.1); the cross-attention's one head puts 0.7 on
// "b", 0.2 on "7" and 0.1 on "a" at the first output step; the values' norms are 1 at every
// position but "7", where v = (3, 4): norm 5.
explain::Run lookup_run() {
  explain::Run run;
  run.model = {.family = "transformer", .task = "lookup", .layers = 1, .heads = 1};
  run.text = "? b a3 b7 c1";
  run.output.decoded = "7";
  const int64_t s = 12;
  std::vector<double> enc(static_cast<std::size_t>(2 * s * s), 0.0);
  for (const int64_t at : {4, 7, 10}) {
    enc[static_cast<std::size_t>((0 * s + at + 1) * s + at)] = 0.1;
    enc[static_cast<std::size_t>((1 * s + at + 1) * s + at)] = 0.9;
  }
  std::vector<double> w(static_cast<std::size_t>(s), 0.0), z(static_cast<std::size_t>(s), -5.0);
  w[7] = 0.7, w[8] = 0.2, w[4] = 0.1;
  z[5] = -1.25, z[8] = 2.5, z[11] = 0.5;
  std::vector<double> v(static_cast<std::size_t>(s * 2), 0.0);
  for (int64_t j = 0; j < s; ++j) v[static_cast<std::size_t>(2 * j)] = 1;
  v[16] = 3, v[17] = 4;
  run.blocks.push_back({.kind = BlockKind::cross_attention, .name = "cross-attention"});
  run.blocks[0].layers.push_back({.score = Score::dot,
                                  .v = Tensor::from({1, 1, s, 2}, v),
                                  .logits = Tensor::from({1, 1, 1, s}, z),
                                  .weights = Tensor::from({1, 1, 1, s}, w)});
  run.blocks.push_back({.name = "encoder self-attention"});
  run.blocks[1].layers.push_back({.weights = Tensor::from({1, 2, s, s}, enc)});
  return run;
}

TEST(ReadingsPhonebook, BindMatchAndValueOfAHandBuiltModel) {
  const std::optional<Phonebook> book = phonebook(lookup_run());
  ASSERT_TRUE(book);
  EXPECT_EQ(book->bind_layer, 0);
  EXPECT_EQ(book->bind_head, 1);
  EXPECT_THAT(book->bind, ElementsAre(0.9, 0.9, 0.9));
  EXPECT_EQ(book->match_head, 0);
  EXPECT_EQ(book->score, Score::dot);
  EXPECT_THAT(book->weight, ElementsAre(0.1, 0.7 + 0.2, 0.0));
  EXPECT_THAT(book->logit, ElementsAre(-1.25, 2.5, 0.5));  // each number's logit
  // Σ weight·‖v‖: the entry "b7" 0.7·1 + 0.2·5 = 1.7 of 0.1·1 + 1.7 = 1.8.
  EXPECT_NEAR(book->asked_share, 1.7 / 1.8, 1e-12);
  EXPECT_EQ(book->answer, "7");

  const std::vector<std::string> lines = phonebook_lines(*book);
  EXPECT_THAT(lines[0], HasSubstr("encoder layer 0, head 1: each number attends"));
  EXPECT_THAT(lines[1], HasSubstr("3→a 0.90   7→b 0.90   1→c 0.90"));
  EXPECT_THAT(lines[4], HasSubstr("b7 0.90 (logit 2.5) ←"));
  EXPECT_THAT(lines[5], HasSubstr("94% of what that head reads back"));
  EXPECT_THAT(lines[6], HasSubstr("the model answers \"7\": its number"));
  EXPECT_THAT(lines[7], HasSubstr("SELECT number FROM book WHERE name = 'b'"));
  for (const std::string& line : lines) EXPECT_LE(display_width(line), 78) << line;
}

TEST(ReadingsPhonebook, NoneForAnotherTaskOrSource) {
  explain::Run run = lookup_run();
  run.model.task = "dates";
  EXPECT_FALSE(phonebook(run));
  run = lookup_run();
  run.text = "a3 b7 c1";
  EXPECT_FALSE(phonebook(run));
  run = lookup_run();
  run.blocks.pop_back();  // a transformer without its encoder's self-attention
  EXPECT_FALSE(phonebook(run));
  run.model.family = "rnnsearch";  // RNNsearch binds with its GRUs: no encoder block needed
  ASSERT_TRUE(phonebook(run));
  EXPECT_TRUE(phonebook(run)->additive);
}

// A Perceiver's run: one latent block over "a#b#" (counted '#'), one head, two latents.
TEST(ReadingsGathers, SharesSpreadAndTopOfAHandBuiltRun) {
  explain::Run run;
  run.model.family = "perceiver";
  run.text = "a#b#";
  run.counted = '#';
  run.blocks.push_back({.kind = BlockKind::latent});
  run.blocks[0].layers.push_back(
      {.weights = Tensor::from({1, 1, 2, 4}, std::vector<double>{0.1, 0.4, 0.1, 0.4,  //
                                                                 0.25, 0.25, 0.25, 0.25})});
  const Gathers g = gathers(run, 2);
  EXPECT_EQ(g.count, 2);
  EXPECT_EQ(g.length, 4);
  EXPECT_EQ(g.uniform_share, 0.5);
  ASSERT_EQ(g.gathered.size(), 2u);
  const LatentGather& first = g.gathered[0];
  EXPECT_NEAR(first.counted_mean, 0.8, 1e-12);
  EXPECT_NEAR(*first.times_uniform, 1.6, 1e-12);
  const double entropy = -2 * (0.1 * std::log(0.1) + 0.4 * std::log(0.4));
  EXPECT_NEAR(first.effective_positions, std::exp(entropy), 1e-12);
  ASSERT_EQ(first.top.size(), 2u);
  EXPECT_EQ(first.top[0].first, 1);  // a tie: the earlier position first
  EXPECT_EQ(first.top[1].first, 3);
  EXPECT_NEAR(g.gathered[1].effective_positions, 4.0, 1e-12);
  EXPECT_NEAR(*g.gathered[1].times_uniform, 1.0, 1e-12);

  run.text = "abcd";  // no '#': no times-uniform
  EXPECT_FALSE(gathers(run, 2).gathered[0].times_uniform);
  EXPECT_THROW(gathers(explain::Run{}, 2), Error);
}

// explain::capture on an untrained Perceiver: its weights are distributions and the gathers add
// them up (moved from tests/models/perceiver_test.cpp's PerceiverExplain).
TEST(ReadingsGathers, WeightsOfARealRunAreDistributionsAndSharesAddUp) {
  const std::string input = kUntrainedPerceiverInput;
  const explain::Run run = untrained_perceiver_run();
  const Gathers e = gathers(run, 4);
  EXPECT_EQ(e.count, 3);
  EXPECT_EQ(e.heads, 2);
  EXPECT_EQ(e.latents, 3);
  EXPECT_EQ(e.length, 32);
  ASSERT_EQ(e.gathered.size(), 3u);
  double p = 0;
  for (double x : run.output.probabilities) p += x;
  EXPECT_NEAR(p, 1.0, 1e-9);
  const Block& latents = run.blocks.at(0);
  EXPECT_EQ(latents.kind, BlockKind::latent);
  EXPECT_EQ(latents.queries.size(), 3u);
  EXPECT_EQ(latents.keys.size(), 32u);
  for (int64_t h = 0; h < e.heads; ++h)
    for (int64_t n = 0; n < e.latents; ++n) {
      double row = 0, hashes = 0;
      for (int64_t l = 0; l < e.length; ++l) {
        const double w = latents.weight(0, h, n, l);
        row += w;
        if (input[static_cast<std::size_t>(l)] == '#') hashes += w;
      }
      EXPECT_NEAR(row, 1.0, 1e-5) << "head " << h << " latent " << n;
      EXPECT_NEAR(
          e.gathered[static_cast<std::size_t>(n)].counted_share[static_cast<std::size_t>(h)],
          hashes, 1e-12);
    }
  for (const LatentGather& g : e.gathered) {
    ASSERT_EQ(g.top.size(), 4u);
    EXPECT_GE(g.top[0].second, g.top[3].second);
    EXPECT_GT(g.effective_positions, 1.0);
    EXPECT_LE(g.effective_positions, 32.0 + 1e-9);
  }
}

}  // namespace
}  // namespace qkv::explain
