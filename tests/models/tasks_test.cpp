// The synthetic tasks of `qkv train`: deterministic generators, a held-out split that training
// never sees, answers that are right, and dates that format as the issue spells them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "models/seq2seq/dates.h"
#include "qkv/model.h"

namespace qkv {
namespace {

using ::testing::HasSubstr;

TEST(Vocabulary, SpecialTokensFirstThenOneIdACharacter) {
  const Vocabulary v("abc");
  EXPECT_EQ(v.size(), 6);
  EXPECT_EQ(v.encode("cab"), (std::vector<int32_t>{5, 3, 4}));
  EXPECT_EQ(v.decode({Vocabulary::kBos, 5, 3, Vocabulary::kEos, 4}), "ca");  // stops at EOS
  EXPECT_EQ(v.token(Vocabulary::kPad), "<pad>");
  EXPECT_EQ(v.token(Vocabulary::kEos), "</s>");
  EXPECT_EQ(v.token(4), "b");
}

TEST(Vocabulary, UnknownCharacterIsAnErrorNamingIt) {
  const Vocabulary v("abc");
  try {
    v.encode("abz");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'z'"));
    EXPECT_THAT(e.what(), HasSubstr("\"abc\""));
  }
  EXPECT_THROW(Vocabulary("abca"), Error);
}

TEST(Tasks, UnknownTaskListsTheKnownOnes) {
  try {
    make_task("reversal");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    for (const std::string& name : task_names()) EXPECT_THAT(e.what(), HasSubstr(name));
  }
}

TEST(Tasks, SameSeedSameExamplesDifferentSeedDifferentOnes) {
  for (const std::string& name : task_names()) {
    SCOPED_TRACE(name);
    const Task task = make_task(name);
    nn::Rng a(7), b(7), c(8);
    const auto x = task.batch(a, Split::train, 50), y = task.batch(b, Split::train, 50),
               z = task.batch(c, Split::train, 50);
    int same = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(x[i].source, y[i].source);
      EXPECT_EQ(x[i].target, y[i].target);
      same += x[i].source == z[i].source;
    }
    EXPECT_LT(same, 10);
  }
}

// The split is a function of the source alone, so no training example is ever a test example.
TEST(Tasks, HeldOutSplitNeverLeaksIntoTraining) {
  for (const std::string& name : task_names()) {
    SCOPED_TRACE(name);
    const Task task = make_task(name);
    nn::Rng rng(3);
    std::set<std::string> test;
    for (const Example& e : task.batch(rng, Split::test, 300)) {
      EXPECT_TRUE(in_test_split(e.source)) << e.source;
      test.insert(e.source);
    }
    for (const Example& e : task.batch(rng, Split::train, 3000)) {
      EXPECT_FALSE(in_test_split(e.source)) << e.source;
      EXPECT_EQ(test.count(e.source), 0u) << e.source;
    }
  }
}

TEST(Tasks, AboutOneSourceInTenIsHeldOut) {
  nn::Rng rng(5);
  int held = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    std::string s;
    for (int j = 0; j < 10; ++j) s += static_cast<char>('a' + rng.below(20));
    held += in_test_split(s);
  }
  EXPECT_NEAR(static_cast<double>(held) / n, 0.1, 0.01);
}

TEST(Tasks, SequenceTasksAnswerRightWithinTheirSizes) {
  nn::Rng rng(11);
  std::set<char> symbols;
  for (const Example& e : make_task("reverse").batch(rng, Split::train, 500)) {
    EXPECT_GE(e.source.size(), 8u);
    EXPECT_LE(e.source.size(), 16u);
    EXPECT_EQ(e.target, std::string(e.source.rbegin(), e.source.rend()));
    symbols.insert(e.source.begin(), e.source.end());
  }
  EXPECT_EQ(symbols.size(), 20u);
  EXPECT_EQ(*symbols.begin(), 'a');
  EXPECT_EQ(*symbols.rbegin(), 't');
  for (const Example& e : make_task("sort").batch(rng, Split::train, 100))
    EXPECT_TRUE(std::is_sorted(e.target.begin(), e.target.end()) &&
                std::is_permutation(e.target.begin(), e.target.end(), e.source.begin()))
        << e.source << " → " << e.target;
  const Task copy = make_task("copy", {.min_length = 4, .max_length = 6, .symbols = 5});
  EXPECT_EQ(copy.vocab().characters(), "abcde");
  EXPECT_EQ(copy.max_source_length(), 6);
  for (const Example& e : copy.batch(rng, Split::train, 100)) {
    EXPECT_EQ(e.target, e.source);
    EXPECT_GE(e.source.size(), 4u);
    EXPECT_LE(e.source.size(), 6u);
  }
  EXPECT_THROW(make_task("copy", {.min_length = 7, .max_length = 6}), Error);
  EXPECT_THROW(make_task("copy", {.symbols = 27}), Error);
}

TEST(Dates, TheIssuesExamplesAllNormalizeToTheSameDay) {
  const Date d{2021, 3, 3};
  EXPECT_EQ(format_date(d, DateFormat::spelled), "march 3rd 2021");
  EXPECT_EQ(format_date(d, DateFormat::us_short), "03/03/21");
  EXPECT_EQ(format_date(d, DateFormat::day_month), "3 Mar 2021");
  EXPECT_EQ(format_date(d, DateFormat::ymd_slashes), "2021/3/3");
  EXPECT_EQ(format_date(d, DateFormat::weekday), "Wednesday, March 3, 2021");
  EXPECT_EQ(iso_date(d), "2021-03-03");
}

TEST(Dates, OrdinalsWeekdaysAndLeapYears) {
  EXPECT_EQ(format_date({1999, 12, 31}, DateFormat::spelled), "december 31st 1999");
  EXPECT_EQ(format_date({1999, 12, 11}, DateFormat::spelled), "december 11th 1999");
  EXPECT_EQ(format_date({1999, 12, 12}, DateFormat::spelled), "december 12th 1999");
  EXPECT_EQ(format_date({1999, 12, 22}, DateFormat::spelled), "december 22nd 1999");
  EXPECT_EQ(format_date({1999, 12, 31}, DateFormat::us_short), "12/31/99");
  EXPECT_EQ(format_date({2000, 2, 29}, DateFormat::weekday), "Tuesday, February 29, 2000");
  EXPECT_EQ(format_date({1950, 1, 1}, DateFormat::weekday), "Sunday, January 1, 1950");
  EXPECT_EQ(format_date({2049, 12, 31}, DateFormat::day_month), "31 Dec 2049");
  EXPECT_EQ(format_date({1969, 7, 20}, DateFormat::weekday), "Sunday, July 20, 1969");
  EXPECT_EQ(days_in_month(2000, 2), 29);
  EXPECT_EQ(days_in_month(2100, 2), 28);
  EXPECT_EQ(days_in_month(2024, 2), 29);
  EXPECT_EQ(days_in_month(2023, 2), 28);
  EXPECT_EQ(days_in_month(2023, 4), 30);
}

// Every generated source is one of the formats of the very day its target names.
TEST(Dates, GeneratedExamplesAreValidDaysIn1950To2049InEveryFormat) {
  const Task task = make_task("dates");
  nn::Rng rng(13);
  std::set<int> formats;
  for (const Example& e : task.batch(rng, Split::train, 2000)) {
    ASSERT_EQ(e.target.size(), 10u) << e.target;
    const Date d{std::stoi(e.target.substr(0, 4)), std::stoi(e.target.substr(5, 2)),
                 std::stoi(e.target.substr(8, 2))};
    EXPECT_EQ(iso_date(d), e.target);
    EXPECT_GE(d.year, 1950);
    EXPECT_LE(d.year, 2049);
    EXPECT_GE(d.day, 1);
    EXPECT_LE(d.day, days_in_month(d.year, d.month));
    int found = -1;
    for (int f = 0; f < kDateFormats; ++f)
      if (format_date(d, static_cast<DateFormat>(f)) == e.source) found = f;
    EXPECT_GE(found, 0) << e.source << " → " << e.target;
    formats.insert(found);
    EXPECT_LE(static_cast<int64_t>(e.source.size()), task.max_source_length());
    EXPECT_NO_THROW(task.vocab().encode(e.source));
  }
  EXPECT_EQ(formats.size(), static_cast<std::size_t>(kDateFormats));
}

TEST(Lookup, TheAnswerIsTheQueriedKeysValue) {
  const Task task = make_task("lookup");
  nn::Rng rng(17);
  for (const Example& e : task.batch(rng, Split::train, 500)) {
    // "? b a3 b7 c1": the question first, then " key digit" entries
    ASSERT_EQ(e.source.rfind("? ", 0), 0u) << e.source;
    ASSERT_EQ(e.source.size() % 3, 0u) << e.source;
    const char key = e.source[2];
    std::set<char> keys;
    std::string value;
    for (std::size_t i = 3; i + 2 < e.source.size(); i += 3) {
      EXPECT_EQ(e.source[i], ' ') << e.source;
      EXPECT_TRUE(keys.insert(e.source[i + 1]).second) << "repeated key in " << e.source;
      EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(e.source[i + 2]))) << e.source;
      if (e.source[i + 1] == key) value = std::string(1, e.source[i + 2]);
    }
    EXPECT_GE(keys.size(), 3u);
    EXPECT_LE(keys.size(), 8u);
    EXPECT_EQ(e.target, value) << e.source;
    EXPECT_LE(static_cast<int64_t>(e.source.size()), task.max_source_length());
  }
}

TEST(Lookup, ItsLengthsCountThePairs) {
  const Task two = make_task("lookup", {.min_length = 2, .max_length = 2});
  EXPECT_EQ(two.max_source_length(), 9);  // "? b a3 b7"
  nn::Rng rng(5);
  for (const Example& e : two.batch(rng, Split::train, 100)) {
    ASSERT_EQ(e.source.size(), 9u) << e.source;
    EXPECT_EQ(e.target, std::string(1, e.source[e.source[2] == e.source[4] ? 5 : 8])) << e.source;
  }
  EXPECT_EQ(make_task("lookup").max_source_length(), 27);  // "? k", 8 pairs
  EXPECT_THROW(make_task("lookup", {.min_length = 5, .max_length = 27}), Error);
  EXPECT_THROW(make_task("lookup", {.min_length = 6, .max_length = 4}), Error);
}

// "c qwcxe" → "cx": the query, a space, distinct letters; the answer is the query and the letter
// right after it (never past the end: the query is never the last letter).
TEST(Follow, TheAnswerIsTheQueryAndTheLetterAfterIt) {
  const Task task = make_task("follow");
  EXPECT_EQ(task.max_source_length(), 12);  // query, space, 10 letters
  EXPECT_EQ(task.max_target_length(), 2);
  nn::Rng rng(13);
  std::set<std::size_t> places;
  for (const Example& e : task.batch(rng, Split::train, 500)) {
    SCOPED_TRACE(e.source + " → " + e.target);
    ASSERT_GE(e.source.size(), 5u);
    ASSERT_LE(e.source.size(), 12u);
    ASSERT_EQ(e.source[1], ' ');
    const std::string letters = e.source.substr(2);
    EXPECT_EQ(std::set<char>(letters.begin(), letters.end()).size(), letters.size());
    for (const char c : letters) EXPECT_TRUE(c >= 'a' && c <= 'p');  // 16 symbols
    const std::size_t at = letters.find(e.source[0]);
    ASSERT_NE(at, std::string::npos);
    ASSERT_LT(at + 1, letters.size());
    EXPECT_EQ(e.target, (std::string{e.source[0], letters[at + 1]}));
    places.insert(at);
  }
  EXPECT_EQ(places.size(), 9u);  // every place but the last of 10
  const Example e = make_task("follow", {.min_length = 2, .max_length = 2, .symbols = 2})
                        .sample(rng, Split::train);  // "a ab" or "b ba"
  EXPECT_TRUE(e.source == "a ab" && e.target == "ab" || e.source == "b ba" && e.target == "ba")
      << e.source;
  EXPECT_THROW(make_task("follow", {.min_length = 1, .max_length = 4}), Error);
  EXPECT_THROW(make_task("follow", {.min_length = 3, .max_length = 17}), Error);  // > 16 symbols
  EXPECT_THROW(make_task("follow", {.symbols = 27}), Error);
}

TEST(Tasks, ExactAccuracyCountsWholeSequences) {
  const std::vector<Example> examples = {{"ab", "ba"}, {"abc", "cba"}, {"a", "a"}, {"b", "b"}};
  EXPECT_DOUBLE_EQ(exact_accuracy({"ba", "cb", "a", "b"}, examples), 0.75);
  EXPECT_THROW(exact_accuracy({"ba"}, examples), Error);
}

}  // namespace
}  // namespace qkv
