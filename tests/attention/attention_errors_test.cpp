// Every invalid input to qkv::attention / attention_backward throws qkv::Error (a usage error)
// whose message names the argument and the sizes found and expected (docs/CONVENTIONS.md §2).
// Sizes are picked distinct (B = 2, Hq = 6, Hkv = 3, L = 5, S = 9, Dk = 4, Dv = 7, A = 13, and
// odd wrong values like 11 or 17) so that "the message mentions 11" means it names the culprit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <limits>
#include <ostream>
#include <string>

#include "kernels/reference/naive_attention.h"
#include "qkv/attention.h"
#include "usage_error.h"

namespace qkv_test {
namespace {

using qkv::DType;
using qkv::Score;
using qkv::Shape;
using qkv::Tensor;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
constexpr auto error_of = qkv::test::usage_error_of;

// `word` appears as a whole identifier (case-insensitive): "k" in "k has shape" or "params.w",
// not the "k" of "mask". A plain matcher class (not MATCHER_P): the tests link gtest, not gmock.
class HasWordMatcher {
 public:
  using is_gtest_matcher = void;
  explicit HasWordMatcher(std::string word) : word_(lower(std::move(word))) {}
  bool MatchAndExplain(const std::string& message, std::ostream*) const {
    const std::string s = lower(message);
    auto ident = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
    for (size_t pos = s.find(word_); pos != std::string::npos; pos = s.find(word_, pos + 1)) {
      const bool left = pos == 0 || !ident(s[pos - 1]);
      const bool right = pos + word_.size() == s.size() || !ident(s[pos + word_.size()]);
      if (left && right) return true;
    }
    return false;
  }
  void DescribeTo(std::ostream* os) const { *os << "mentions the word \"" << word_ << '"'; }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "does not mention the word \"" << word_ << '"';
  }

 private:
  static std::string lower(std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  }
  std::string word_;
};
::testing::Matcher<const std::string&> HasWord(std::string word) {
  return HasWordMatcher(std::move(word));
}

Tensor randn(const Shape& shape, uint64_t seed = 1) {
  return tensor_of(shape, Normal(seed).vec(numel_of(shape)), DType::f64);
}

constexpr int64_t B = 2, Hq = 6, Hkv = 3, L = 5, S = 9, Dk = 4, Dv = 7, A = 13;

struct Inputs {
  Tensor q = randn({B, Hq, L, Dk}, 1);
  Tensor k = randn({B, Hkv, S, Dk}, 2);
  Tensor v = randn({B, Hkv, S, Dv}, 3);
  qkv::AttentionOptions o;
  std::string run() const {
    return error_of([&] { qkv::attention(q, k, v, o); });
  }
  std::string run_backward(const Tensor& dout) const {
    return error_of([&] { qkv::attention_backward(dout, q, k, v, o); });
  }
};

TEST(AttentionErrors, ValidInputsDoNotThrow) {
  Inputs in;
  EXPECT_NO_THROW(qkv::attention(in.q, in.k, in.v, in.o));
  EXPECT_NO_THROW(qkv::attention_backward(randn({B, Hq, L, Dv}), in.q, in.k, in.v, in.o));
}

TEST(AttentionErrors, RankMismatch) {
  Inputs in;
  in.k = randn({Hkv, S, Dk});
  in.v = randn({Hkv, S, Dv});
  EXPECT_THAT(in.run(), AllOf(AnyOf(HasWord("k"), HasWord("q")),
                              AnyOf(HasSubstr("rank"), HasSubstr("[3, 9, 4]"))));
  Inputs in2;
  in2.v = randn({Hkv, S, Dv});
  EXPECT_THAT(in2.run(), AllOf(HasWord("v"), AnyOf(HasSubstr("rank"), HasSubstr("[3, 9, 7]"))));
}

TEST(AttentionErrors, RankAboveFourOrBelowTwo) {
  // A rank-5 tensor may already be refused by Tensor itself; either way it is a qkv::Error that
  // says rank and 5.
  EXPECT_THAT(error_of([] {
                Inputs in;
                in.q = Tensor({1, B, Hq, L, Dk}, DType::f64);
                qkv::attention(in.q, in.k, in.v, in.o);
              }),
              AllOf(HasSubstr("rank"), HasSubstr("5")));
  Inputs in;
  in.q = randn({Dk});
  in.k = randn({Dk});
  in.v = randn({Dv});
  EXPECT_THAT(in.run(), AllOf(AnyOf(HasWord("q"), HasWord("k"), HasWord("v")),
                              AnyOf(HasSubstr("rank"), HasSubstr("[4]"))));
}

TEST(AttentionErrors, UndefinedOrBoolInputs) {
  Inputs in;
  in.q = Tensor();
  EXPECT_THAT(in.run(), HasWord("q"));
  Inputs in2;
  in2.v = Tensor({B, Hkv, S, Dv}, DType::b8);
  EXPECT_THAT(in2.run(), AllOf(HasWord("v"), HasSubstr("bool")));
}

TEST(AttentionErrors, BatchMismatch) {
  Inputs in;
  in.k = randn({11, Hkv, S, Dk});
  in.v = randn({11, Hkv, S, Dv});
  EXPECT_THAT(in.run(), AllOf(AnyOf(HasWord("k"), HasWord("v")), HasSubstr("11"), HasSubstr("2")));
  Inputs in2;
  in2.v = randn({11, Hkv, S, Dv});
  EXPECT_THAT(in2.run(), AllOf(HasWord("v"), HasSubstr("11")));
}

TEST(AttentionErrors, QueryHeadsNotAMultipleOfKvHeads) {
  Inputs in;
  in.k = randn({B, 4, S, Dk});
  in.v = randn({B, 4, S, Dv});
  EXPECT_THAT(in.run(), AllOf(AnyOf(HasWord("k"), HasWord("q"), HasSubstr("head")), HasSubstr("6"),
                              HasSubstr("4")));
  Inputs in2;  // k and v disagreeing on Hkv is wrong too
  in2.v = randn({B, 1, S, Dv});
  EXPECT_THAT(in2.run(), AllOf(HasWord("v"), HasSubstr("[2, 1, 9, 7]")));
}

TEST(AttentionErrors, QueryAndKeyDimsMustMatchForDotLaplaceCosine) {
  for (Score score : {Score::scaled_dot, Score::dot, Score::laplace, Score::cosine}) {
    SCOPED_TRACE(score_name(score));
    Inputs in;
    in.q = randn({B, Hq, L, 12});
    in.k = randn({B, Hkv, S, 10});
    in.o.score = score;
    EXPECT_THAT(in.run(),
                AllOf(AnyOf(HasWord("k"), HasWord("q")), HasSubstr("12"), HasSubstr("10")));
  }
}

TEST(AttentionErrors, KeyAndValueLengthsMustMatch) {
  Inputs in;
  in.v = randn({B, Hkv, 13, Dv});
  EXPECT_THAT(in.run(), AllOf(HasWord("v"), HasSubstr("13"), HasSubstr("9")));
}

TEST(AttentionErrors, MaskThatCannotBroadcast) {
  for (const Shape& shape : {Shape{L, 8}, Shape{3, 1, 1, S}, Shape{1, Hkv, L, S}, Shape{11}}) {
    SCOPED_TRACE(shape_string(shape));
    Inputs in;
    in.o.mask = Tensor(shape, DType::b8);
    EXPECT_THAT(in.run(), AllOf(HasWord("mask"), AnyOf(HasSubstr(shape_string(shape)),
                                                       HasSubstr("8"), HasSubstr("11"))));
  }
  EXPECT_THAT(error_of([] {
                Inputs in;
                in.o.mask = Tensor({1, 1, 1, L, S}, DType::b8);
                qkv::attention(in.q, in.k, in.v, in.o);
              }),
              AllOf(HasSubstr("rank"), HasSubstr("5")));
}

TEST(AttentionErrors, BoolAndFloatMasksAreBothAccepted) {
  for (DType dtype : {DType::b8, DType::f32, DType::f64}) {
    SCOPED_TRACE(std::string(qkv::dtype_name(dtype)));
    Inputs in;
    in.o.mask = Tensor::full({L, S}, 1.0, dtype);
    EXPECT_NO_THROW(qkv::attention(in.q, in.k, in.v, in.o));
    EXPECT_NO_THROW(qkv::attention_backward(randn({B, Hq, L, Dv}), in.q, in.k, in.v, in.o));
  }
}

TEST(AttentionErrors, KeyLengthsWrongSizeOrOutOfRange) {
  Inputs in;
  in.o.key_lengths = {4, 4, 4};
  EXPECT_THAT(in.run(), AllOf(HasSubstr("key_lengths"), HasSubstr("3"), HasSubstr("2")));
  in.o.key_lengths = {-1, 4};
  EXPECT_THAT(in.run(), AllOf(HasSubstr("key_lengths"), HasSubstr("-1")));
  in.o.key_lengths = {4, 10};
  EXPECT_THAT(in.run(), AllOf(HasSubstr("key_lengths"), HasSubstr("10"), HasSubstr("9")));
  in.o.key_lengths = {0, S};  // both ends of the range are fine
  EXPECT_NO_THROW(qkv::attention(in.q, in.k, in.v, in.o));
}

TEST(AttentionErrors, ScaleMustBeFinite) {
  Inputs in;
  in.o.scale = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(in.run(), AllOf(HasSubstr("scale"), AnyOf(HasSubstr("nan"), HasSubstr("NaN"))));
  for (double inf : {kInf, -kInf}) {
    in.o.scale = inf;
    EXPECT_THAT(in.run(), AllOf(HasSubstr("scale"),
                                AnyOf(HasSubstr("inf"), HasSubstr("Inf"), HasSubstr("∞"))));
  }
  in.o.scale = -3.0;  // any finite value, negative and zero included
  EXPECT_NO_THROW(qkv::attention(in.q, in.k, in.v, in.o));
  in.o.scale = 0.0;
  EXPECT_NO_THROW(qkv::attention(in.q, in.k, in.v, in.o));
}

TEST(AttentionErrors, GeneralNeedsW) {
  Inputs in;
  in.o.score = Score::general;
  EXPECT_THAT(in.run(), AllOf(HasWord("w"), HasSubstr("general")));
  in.o.params.w = randn({Dk, 11});
  EXPECT_THAT(in.run(), AllOf(HasWord("w"), HasSubstr("11")));
  in.o.params.w = randn({16});
  EXPECT_THAT(in.run(), AllOf(HasWord("w"), HasSubstr("16")));
  in.o.params.w = randn({Dk, Dk});
  EXPECT_NO_THROW(qkv::attention(in.q, in.k, in.v, in.o));
}

TEST(AttentionErrors, AdditiveNeedsWqWkAndV) {
  auto valid = [] {
    qkv::ScoreParams p;
    p.w_q = randn({A, Dk});
    p.w_k = randn({A, Dk});
    p.v = randn({A});
    return p;
  };
  Inputs in;
  in.o.score = Score::additive;
  in.o.params = valid();
  EXPECT_NO_THROW(qkv::attention(in.q, in.k, in.v, in.o));

  in.o.params = valid();
  in.o.params.w_q = Tensor();
  EXPECT_THAT(in.run(), HasWord("w_q"));
  in.o.params = valid();
  in.o.params.w_k = Tensor();
  EXPECT_THAT(in.run(), HasWord("w_k"));
  in.o.params = valid();
  in.o.params.v = Tensor();
  EXPECT_THAT(in.run(), AllOf(HasWord("v"), HasSubstr("additive")));

  in.o.params = valid();
  in.o.params.w_q = randn({A, 15});  // W_q must be [A, Dq]
  EXPECT_THAT(in.run(), AllOf(HasWord("w_q"), HasSubstr("15")));
  in.o.params = valid();
  in.o.params.w_k = randn({14, Dk});  // W_k's A disagrees with W_q's
  EXPECT_THAT(in.run(), AllOf(HasWord("w_k"), HasSubstr("14"), HasSubstr("13")));
  in.o.params = valid();
  in.o.params.w_k = randn({A, 15});  // W_k must be [A, Dk]
  EXPECT_THAT(in.run(), AllOf(HasWord("w_k"), HasSubstr("15")));
  in.o.params = valid();
  in.o.params.v = randn({17});  // v must be [A]; A is set by all three, so either may be blamed
  EXPECT_THAT(in.run(),
              AllOf(AnyOf(HasWord("v"), HasWord("w_q")), HasSubstr("17"), HasSubstr("13")));
}

TEST(AttentionErrors, UniformWithoutNormalizationIsRejected) {
  Inputs in;
  in.o.score = Score::uniform;
  in.o.normalize = qkv::Normalize::none;
  EXPECT_THAT(in.run(), AllOf(HasSubstr("uniform"), HasSubstr("none")));
}

TEST(AttentionErrors, BackwardValidatesToo) {
  Inputs in;
  EXPECT_THAT(in.run_backward(randn({B, Hq, L, 8})), AllOf(HasWord("dout"), HasSubstr("8")));
  EXPECT_THAT(in.run_backward(Tensor()), HasWord("dout"));
  in.o.scale = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(in.run_backward(randn({B, Hq, L, Dv})), HasSubstr("scale"));
  Inputs in2;
  in2.v = randn({B, Hkv, 13, Dv});
  EXPECT_THAT(in2.run_backward(randn({B, Hq, L, Dv})), AllOf(HasWord("v"), HasSubstr("13")));
  Inputs in3;
  in3.o.score = Score::general;
  EXPECT_THAT(in3.run_backward(randn({B, Hq, L, Dv})), HasWord("w"));
}

}  // namespace
}  // namespace qkv_test
