// qkv/attend.h without the command: the call a user types, the run and its checks, the worked
// examples. The command's own tests (tests/cli/attend_*) run the binary; these call the library.
#include "qkv/attend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace qkv::explain {
namespace {

CallArguments small() {
  CallArguments a;
  a.query = "[[1, 0], [0, 1]]";
  a.keys = "[[1, 0], [0, 1], [1, 1]]";
  a.values = "[[1], [2], [3]]";
  return a;
}

// A field as the command spells it: key_lengths → --key-lengths.
std::string flag(std::string_view field, std::string_view value) {
  std::string f = "--" + std::string(field);
  std::replace(f.begin(), f.end(), '_', '-');
  return value.empty() ? f : f + " " + std::string(value);
}

// The message of call_from's FieldError as the command shows it, and the field it names.
std::string message_of(const CallArguments& a, std::string* field = nullptr) {
  try {
    call_from(a);
  } catch (const FieldError& e) {
    if (field != nullptr) *field = e.field();
    return e.message(flag);
  }
  return "";
}

TEST(AttendLibrary, InlineCallRunsToTheSoftmaxByHand) {
  const AttentionCall c = call_from(small());
  ASSERT_EQ(c.q.shape(), (std::vector<int64_t>{2, 2}));
  ASSERT_EQ(c.k.shape(), (std::vector<int64_t>{3, 2}));
  const Attended run = attend(c, true);
  EXPECT_TRUE(run.first.empty());  // 2 × 3: shown step by step
  // Query [1, 0]: scores 1, 0, 1 scaled by 1/√2; weights e^{s}/Σ; output Σ w v.
  const double s = 1 / std::sqrt(2.0), z = 2 * std::exp(s) + 1;
  const double expected = (1 * std::exp(s) + 2 * 1 + 3 * std::exp(s)) / z;
  EXPECT_NEAR(run.result.out.value(0), expected, 1e-6);
  EXPECT_NEAR(run.result.weights.value(1), 1 / z, 1e-12);
  EXPECT_EQ(call_heading(c, run.path),
            "attention: score scaled-dot, scale 0.7071, softmax, output by the " +
                std::string(to_string(run.path)) + " path\n");
}

TEST(AttendLibrary, UnknownScoreListsEveryScore) {
  CallArguments a = small();
  a.score = "dott";
  const std::string m = message_of(a);
  EXPECT_NE(m.find("--score 'dott' is unknown; expected scaled-dot, dot,"), std::string::npos) << m;
  for (Score s : all_scores()) EXPECT_NE(m.find(to_string(s)), std::string::npos) << m;
  EXPECT_NE(m.find(" or uniform"), std::string::npos) << m;
}

TEST(AttendLibrary, ArgumentErrorsNameTheField) {
  CallArguments a = small();
  a.key_lengths = "3,x";
  std::string field;
  EXPECT_EQ(message_of(a, &field),
            "--key-lengths '3,x' has 'x', not an integer; expected comma-separated lengths, one "
            "per batch, e.g. 3,5");
  EXPECT_EQ(field, "key_lengths");
  a = small();
  a.query_labels = "a,b,c";
  EXPECT_NE(message_of(a).find("--query-labels has 3 labels but --query [[1, 0], [0, 1]] has 2"),
            std::string::npos)
      << message_of(a);
  a = small();
  a.keys = "[[1, 0], [0]]";
  EXPECT_NE(message_of(a, &field).find("--keys inline matrix"), std::string::npos) << message_of(a);
  EXPECT_EQ(field, "keys");
  // check_attention's errors too: the first field they name.
  a = small();
  a.values = "[[1], [2]]";
  EXPECT_EQ(message_of(a, &field).rfind("--values [[1], [2]] has shape [2, 1]", 0), 0u)
      << message_of(a);
  EXPECT_EQ(field, "values");
  a = small();
  a.params = {"w.npy"};
  EXPECT_EQ(message_of(a, &field),
            "--params is given but score scaled-dot has no parameters; expected --params only "
            "with --score general or additive");
  EXPECT_EQ(field, "params");
}

// The library never names the command's options: what() names the fields by themselves (Python
// spells them as its own keywords), and what the user typed stays as typed, braces included.
TEST(AttendLibrary, WhatNamesFieldsAndKeepsTypedBraces) {
  CallArguments a = small();
  a.score = "{query}";
  try {
    call_from(a);
    FAIL() << "an unknown score passed";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "score");
    EXPECT_EQ(std::string(e.what()).rfind("score '{query}' is unknown; expected scaled-dot", 0), 0u)
        << e.what();
  }
  a = small();
  a.query = "{keys}/missing.npy";
  EXPECT_EQ(message_of(a).rfind("--query {keys}/missing.npy: cannot open", 0), 0u) << message_of(a);
  a = small();
  a.values.clear();
  std::string field;
  EXPECT_EQ(message_of(a, &field),
            "expected --query, --keys and --values (.npy files or inline matrices such as "
            "\"[[1, 0], [0, 1]]\")");
  EXPECT_EQ(field, "values");
}

TEST(AttendLibrary, InputFilesLeaveOutInlineMatrices) {
  CallArguments a = small();
  a.keys = "k.npy";
  a.params = {"w.npy"};
  const auto files = input_files(a);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0], (std::pair<std::string, std::string>{"keys", "k.npy"}));
  EXPECT_EQ(files[1], (std::pair<std::string, std::string>{"params", "w.npy"}));
}

TEST(AttendLibrary, FirstNonFiniteNamesItsIndex) {
  Tensor t = Tensor::from({2, 3}, std::vector<double>{0, 1, 2, 3, 4, 5});
  EXPECT_EQ(first_non_finite(t), "");
  t.at<double>(1, 2) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(first_non_finite(t), "[1, 2]");
}

TEST(AttendLibrary, NaNInIsANoteNotAnError) {
  AttentionCall c = call_from(small());
  EXPECT_EQ(non_finite_note(c, flag), "");
  c.q.at<double>(0, 1) = std::numeric_limits<double>::infinity();
  EXPECT_EQ(non_finite_note(c, flag),
            "note: NaN or ∞ in --query (first at [0, 1]): the rows that read them are NaN (NaN in, "
            "NaN out)\n");
  EXPECT_NO_THROW(attend(c, true));
}

TEST(AttendLibrary, OverflowCheckRejectsANaNResultFromFiniteInputs) {
  const AttentionCall c = call_from(small());
  AttentionResult r = run_case(c);
  EXPECT_NO_THROW(check_overflow(c, r));
  r.out.at<double>(1, 0) = std::numeric_limits<double>::quiet_NaN();  // perturbed
  try {
    check_overflow(c, r);
    FAIL() << "a NaN output from finite inputs passed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::runtime);
    EXPECT_NE(std::string(e.what()).find("the scores overflow float64: output row [1] has"),
              std::string::npos)
        << e.what();
  }
  CallArguments huge = small();
  huge.query = "[[1e200, 0]]";
  huge.keys = "[[1e200, 0], [0, 1]]";
  huge.values = "[[1], [2]]";
  EXPECT_THROW(attend(call_from(huge), true), Error);
}

TEST(AttendLibrary, LargeCallsAreSummarizedFromTheirFirstRows) {
  CallArguments a;
  std::string rows = "[";
  for (int i = 0; i < 20; ++i) rows += std::string(i ? "," : "") + "[" + std::to_string(i) + ", 1]";
  a.query = a.keys = a.values = rows + "]";
  const Attended run = attend(call_from(a), false);
  ASSERT_EQ(run.first.size(), 1u);
  EXPECT_EQ(run.first[0].out.dim(-2), kSummaryRows);
  EXPECT_FALSE(run.result.weights.defined());  // only out and logsumexp: no L×S matrix
  EXPECT_EQ(run.result.out.dim(-2), 20);
}

TEST(AttendLibrary, ExamplesAreInNameOrderAndFindable) {
  const auto& all = examples();
  ASSERT_GE(all.size(), 8u);
  for (std::size_t i = 1; i < all.size(); ++i) EXPECT_LT(all[i - 1].name, all[i].name);
  EXPECT_EQ(find_example("phonebook").name, "phonebook");
  try {
    find_example("nope");
    FAIL();
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "example");
    EXPECT_NE(e.message(flag).find("--example 'nope' is not a built-in example; expected one of: "
                                   "bank, laplace,"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NE(example_list().find(all[0].name), std::string::npos);
}

TEST(AttendLibrary, ExampleTextAndJsonCoverEveryRun) {
  const Example& e = find_example("tied");
  const auto results = run_example(e);
  ASSERT_EQ(results.size(), e.runs.size());
  const std::string text = explain_example(e, results, {});
  EXPECT_EQ(text.rfind("tied — " + e.title + "\n", 0), 0u);
  for (std::size_t i = 0; i < e.runs.size(); ++i)
    EXPECT_NE(text.find("━━ Run " + std::to_string(i + 1) + " of " + std::to_string(e.runs.size())),
              std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(json_of(e, results));
  EXPECT_EQ(j.at("example"), "tied");
  EXPECT_EQ(j.at("runs").size(), e.runs.size());
  EXPECT_EQ(json_of(e, results, 2), j.dump(2));
}

TEST(AttendLibrary, SameInputsSeesAChangedValue) {
  const AttentionCall a = call_from(small());
  AttentionCall b = call_from(small());  // Tensor copies share storage: read again
  EXPECT_TRUE(same_inputs(a, b));
  b.v.at<double>(2, 0) = 3.5;
  EXPECT_FALSE(same_inputs(a, b));
}

}  // namespace
}  // namespace qkv::explain
