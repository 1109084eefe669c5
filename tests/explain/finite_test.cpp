// qkv/finite.h and explain::require_finite: a result that came out NaN or ∞ is a runtime error that
// names the first such number, never a result. Checked on hand-built runs, each with one bad value.
#include "qkv/finite.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "qkv/explain.h"

namespace qkv {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The message of the runtime error `f` throws; "" (and a failure) when it throws none.
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::runtime);
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

// Two blocks of one layer each, every number finite: a seq2seq-like run.
explain::Run two_block_run() {
  explain::Run run;
  for (const char* name : {"cross-attention", "decoder self-attention"}) {
    explain::Block b{.kind = explain::BlockKind::cross_attention, .name = name};
    b.layers.push_back({.weights = Tensor::from({1, 1, 2, 2}, {0.5, 0.5, 0.25, 0.75})});
    run.blocks.push_back(b);
  }
  run.blocks[1].kind = explain::BlockKind::self_attention;
  run.output.probabilities = {0.1, 0.9};
  return run;
}

TEST(Finite, NumbersAndTensorsNameWhatCameOut) {
  EXPECT_NO_THROW(require_finite(1.5, "cos(a, b)"));
  EXPECT_THAT(error_of([] { require_finite(kNaN, "cos(a, b)"); }),
              ::testing::StartsWith("cos(a, b) came out NaN; the model computes non-finite"));
  EXPECT_THAT(error_of([] { require_finite(-kInf, "x"); }), ::testing::StartsWith("x came out −∞"));
  EXPECT_NO_THROW(require_finite(Tensor(), "an undefined tensor is nothing to check"));
  const Tensor e = Tensor::from({3, 2}, {0.0, 1.0, 0.5, 0.5, 1.0, kInf});
  EXPECT_THAT(error_of([&] {
                require_finite_rows(e, [](int64_t i) { return "text " + std::to_string(i + 1); });
              }),
              ::testing::StartsWith("the embedding of text 3 came out +∞;"));
}

TEST(Finite, ARunIsCheckedBlockByBlockAndItsOutput) {
  explain::Run run = two_block_run();
  EXPECT_NO_THROW(explain::require_finite(run));
  // The second block is named after it; the first of a seq2seq too (not a sentence's).
  run.blocks[1].layers[0].weights = Tensor::from({1, 1, 2, 2}, {0.5, 0.5, kNaN, 0.75});
  EXPECT_THAT(
      error_of([&] { explain::require_finite(run); }),
      ::testing::StartsWith("layer 0's attention weights (decoder self-attention) came out NaN;"));
  run = two_block_run();
  run.blocks[0].layers[0].weights = Tensor::from({1, 1, 2, 2}, {kInf, 0.5, 0.5, 0.75});
  EXPECT_THAT(error_of([&] { explain::require_finite(run); }),
              ::testing::StartsWith("layer 0's attention weights (cross-attention) came out +∞"));
  run = two_block_run();
  run.output.probabilities[1] = kNaN;
  EXPECT_THAT(error_of([&] { explain::require_finite(run); }),
              ::testing::StartsWith("the probability of class 1 came out NaN"));
  // A sentence's one self-attention block goes unnamed, with its layers' outputs.
  explain::Run sentence;
  sentence.blocks.push_back({.name = "self-attention"});
  sentence.blocks[0].layers.resize(2);
  sentence.hidden = {Tensor::from({1, 1, 2}, {1.0, 2.0}), Tensor::from({1, 1, 2}, {1.0, -kInf})};
  EXPECT_THAT(error_of([&] { explain::require_finite(sentence); }),
              ::testing::StartsWith("layer 1's output came out −∞;"));
}

}  // namespace
}  // namespace qkv
