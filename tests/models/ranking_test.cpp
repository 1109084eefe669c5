// qkv::rank_by_cosine, what `qkv search` shows: a query's cosines with each line, the softmax of
// them at a temperature (attention's weights over the lines as keys), and the lines in order.
// Expected values worked by hand from unit vectors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "qkv/sentence_model.h"

namespace qkv {
namespace {

using ::testing::ElementsAre;

TEST(RankByCosine, CosinesSoftmaxAndOrderOfHandMadeVectors) {
  // The query (1, 0); lines at 90°, 0° and 60° from it, and one equal to the 0° line.
  const double c60 = 0.5, s60 = std::sqrt(3.0) / 2;
  const Tensor e = Tensor::from({5, 2}, {1.0, 0.0, 0.0, 1.0, 1.0, 0.0, c60, s60, 1.0, 0.0});
  const double tau = 0.5;
  const Ranking r = rank_by_cosine(e, tau);
  ASSERT_EQ(r.cosine.size(), 4u);
  EXPECT_NEAR(r.cosine[0], 0.0, 1e-7);
  EXPECT_NEAR(r.cosine[1], 1.0, 1e-7);
  EXPECT_NEAR(r.cosine[2], 0.5, 1e-7);
  EXPECT_NEAR(r.cosine[3], 1.0, 1e-7);
  // softmax of (0, 1, 0.5, 1) / 0.5 = exp(0, 2, 1, 2) / Σ.
  const double sum = 1 + 2 * std::exp(2.0) + std::exp(1.0);
  EXPECT_NEAR(r.weight[0], 1 / sum, 1e-7);
  EXPECT_NEAR(r.weight[1], std::exp(2.0) / sum, 1e-7);
  EXPECT_NEAR(r.weight[2], std::exp(1.0) / sum, 1e-7);
  EXPECT_NEAR(r.weight[3], std::exp(2.0) / sum, 1e-7);
  EXPECT_THAT(r.order, ElementsAre(1u, 3u, 2u, 0u));  // the tie keeps line order
}

TEST(RankByCosine, ATinyTemperatureStaysFiniteANaNLineIsAnError) {
  const Tensor e = Tensor::from({3, 2}, {1.0, 0.0, 0.0, 1.0, 1.0, 0.0});
  const Ranking r = rank_by_cosine(e, 1e-6);  // exp(-1e6) underflows to 0, never inf/inf
  EXPECT_DOUBLE_EQ(r.weight[1], 1.0);
  EXPECT_DOUBLE_EQ(r.weight[0], 0.0);
  const Tensor bad =
      Tensor::from({3, 2}, {1.0, 0.0, std::numeric_limits<double>::quiet_NaN(), 1.0, 1.0, 0.0});
  try {
    rank_by_cosine(bad, 0.05);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::StartsWith("cos(q, k) of line 1 came out NaN"));
  }
}

}  // namespace
}  // namespace qkv
