// explain::capture on a sentence pair: the tokens of [CLS] A [SEP] B [SEP] with their segments,
// surfaces and word indices; the questions (focus, find_token, is_other_word) across the pair; and
// the captured attention against transformers (tests/golden/minilm/pair_attentions_0.npy), which
// holds only if SentenceModel::encode_captured passes the token types through.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "models/model_files.h"
#include "qkv/explain.h"
#include "qkv/npy.h"

namespace qkv::explain {
namespace {

using ::testing::ElementsAre;

const SentenceModel& minilm() {
  static const SentenceModel model = SentenceModel::load(test::minilm_dir());
  return model;
}

// Golden pair 0 of pairs.json, the one with attention and hidden-state dumps.
const std::string kA = "The animal didn't cross the street.", kB = "It was too tired.";

TEST(ExplainedPairTest, TokensKnowTheirSegmentSurfaceAndWord) {
  const explain::Run e = capture(minilm(), kA, std::string_view(kB));
  EXPECT_TRUE(e.pair);
  EXPECT_EQ(e.text, kA);
  EXPECT_EQ(e.text_b, kB);
  EXPECT_FALSE(e.truncated);
  std::vector<std::string> texts, surfaces;
  std::vector<int> segments;
  std::vector<int64_t> words;
  for (const TokenInfo& t : e.tokens) {
    texts.push_back(t.text), surfaces.push_back(t.surface);
    segments.push_back(t.segment), words.push_back(t.word);
  }
  EXPECT_THAT(texts,
              ElementsAre("[CLS]", "the", "animal", "didn", "'", "t", "cross", "the", "street", ".",
                          "[SEP]", "it", "was", "too", "tired", ".", "[SEP]"));
  EXPECT_THAT(surfaces, ElementsAre("", "The", "animal", "didn", "'", "t", "cross", "the", "street",
                                    ".", "", "It", "was", "too", "tired", ".", ""));
  EXPECT_THAT(segments, ElementsAre(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1));
  // B's words continue the count after A's: one index, one word of the whole sequence.
  EXPECT_THAT(words, ElementsAre(-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, -1, 9, 10, 11, 12, 13, -1));
  EXPECT_TRUE(e.tokens[10].special);
  EXPECT_TRUE(e.tokens[15].punctuation);
}

TEST(ExplainedPairTest, FocusAndWordQuestionsSpanThePair) {
  const explain::Run e = capture(minilm(), kA, std::string_view(kB));
  EXPECT_EQ(default_focus(e), 11);  // "it", the first pronoun, in B
  EXPECT_EQ(find_token(e, "it"), 11);
  EXPECT_EQ(find_token(e, "the:2"), 7);
  EXPECT_EQ(find_token(e, "16"), 16);
  EXPECT_EQ(find_token(e, "17"), std::nullopt);
  EXPECT_TRUE(is_other_word(e, 11, 2));    // it → animal, across the pair
  EXPECT_FALSE(is_other_word(e, 11, 10));  // A's [SEP]
  EXPECT_FALSE(is_other_word(e, 11, 15));  // "."
  EXPECT_FALSE(is_other_word(e, 11, 11));  // itself
  const std::vector<HeadPick> p = picks(e, 11, 3);
  EXPECT_EQ(p.size(), 72u);
}

// The captured weights are the float64 reference: within 1e-5 of transformers' eager attention,
// the tolerance of the single-text goldens; the embedding is the mean of the last hidden states.
TEST(ExplainedPairTest, CapturedAttentionMatchesTransformersWithTokenTypes) {
  const explain::Run e = capture(minilm(), kA, std::string_view(kB));
  const std::string base = test::golden_dir() + "/";
  const Tensor attentions = read_npy(base + "pair_attentions_0.npy");  // [6, 12, L, L]
  const Tensor hidden = read_npy(base + "pair_hidden_0.npy");          // [7, L, 384]
  const int64_t L = e.size();
  ASSERT_EQ(attentions.shape(), (Shape{6, 12, L, L}));
  double worst = 0;
  for (int64_t l = 0; l < 6; ++l)
    for (int64_t h = 0; h < 12; ++h)
      for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j)
          worst =
              std::max(worst, std::abs(e.weight(l, h, i, j) - attentions.at<float>(l, h, i, j)));
  EXPECT_LE(worst, 1e-5);
  // sentence-transformers' pooling of the golden last layer: mean over the tokens, unit length.
  std::vector<double> mean(384, 0.0);
  double norm = 0;
  for (int64_t j = 0; j < 384; ++j) {
    for (int64_t i = 0; i < L; ++i) mean[j] += hidden.at<float>(6, i, j) / static_cast<double>(L);
    norm += mean[j] * mean[j];
  }
  double worst_embedding = 0;
  for (int64_t j = 0; j < 384; ++j)
    worst_embedding = std::max(worst_embedding,
                               std::abs(e.output.embedding.value(j) - mean[j] / std::sqrt(norm)));
  EXPECT_LE(worst_embedding, 1e-5);
}

TEST(ExplainedPairTest, ASingleTextIsNoPair) {
  const explain::Run e = capture(minilm(), kA);
  EXPECT_FALSE(e.pair);
  EXPECT_EQ(e.text_b, "");
  for (const TokenInfo& t : e.tokens) EXPECT_EQ(t.segment, 0);
  EXPECT_EQ(e.size(), 11);
  EXPECT_EQ(default_focus(e), 8);  // no pronoun: the last word, "street"
}

}  // namespace
}  // namespace qkv::explain
