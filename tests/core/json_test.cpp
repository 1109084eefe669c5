// qkv/json.h: the one bounded parse of JSON from files and users. Nesting is measured on the text
// before anything is parsed (a header of 100,000 nested '[' killed the process, issue 26), and
// every failure is a JsonError whose message a caller can put after the name of the file.
#include "qkv/json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace qkv {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string nested(int depth, char open = '[', char close = ']') {
  return std::string(static_cast<std::size_t>(depth), open) +
         std::string(static_cast<std::size_t>(depth), close);
}

// The JsonError `text` raises, or a failed test when it parses.
JsonError error_of(const std::string& text, int max_depth = kMaxJsonDepth) {
  try {
    parse_json(text, nullptr, max_depth);
  } catch (const JsonError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e;
  }
  ADD_FAILURE() << "parsed: " << text.substr(0, 80);
  return JsonError("", JsonError::Reason::syntax, 0);
}

TEST(JsonDepth, TheLimitItselfParsesOneMoreLevelIsRefused) {
  EXPECT_EQ(parse_json(nested(kMaxJsonDepth)).dump(), nested(kMaxJsonDepth));
  const JsonError e = error_of(nested(kMaxJsonDepth + 1));
  EXPECT_EQ(e.reason(), JsonError::Reason::too_deep);
  EXPECT_EQ(std::string(e.what()),
            "nests arrays and objects more than 64 deep (at byte 64); expected at most 64 levels");
  EXPECT_EQ(e.byte(), 64u);
}

TEST(JsonDepth, ObjectsAndArraysCountAlike) {
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += "{\"a\":[";
  deep += "1";
  for (int i = 0; i < 40; ++i) deep += "]}";
  EXPECT_EQ(error_of(deep).reason(), JsonError::Reason::too_deep);  // 80 levels
  EXPECT_EQ(parse_json(deep, nullptr, 80)["a"][0]["a"][0].is_object(), true);
}

// What the sweep sent: 100,000 levels (200 KB). Refused at byte 64, before the parser sees it.
TEST(JsonDepth, AHundredThousandLevelsAreRefusedNotACrash) {
  EXPECT_EQ(error_of(nested(100'000)).byte(), 64u);
  EXPECT_EQ(error_of(nested(100'000, '{', '}')).byte(), 64u);
}

TEST(JsonDepth, BracketsInStringsDoNotCount) {
  const std::string brackets =
      "[\"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"]";
  const nlohmann::json j = parse_json(brackets);
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j[0].get<std::string>().size(), 2001u);
  // An escaped backslash before the closing quote ends the string: the brackets after it count.
  EXPECT_EQ(error_of("[\"\\\\\"," + nested(64) + "]").reason(), JsonError::Reason::too_deep);
}

TEST(JsonDepth, CheckAloneTakesItsOwnLimit) {
  EXPECT_NO_THROW(check_json_depth("[[[1]]]", 3));
  EXPECT_THROW(check_json_depth("[[[[1]]]]", 3), JsonError);
  EXPECT_NO_THROW(check_json_depth("", 3));
}

TEST(JsonParse, SyntaxErrorsAndHugeNumbersAreJsonErrors) {
  const JsonError syntax = error_of("{\"a\":");
  EXPECT_EQ(syntax.reason(), JsonError::Reason::syntax);
  EXPECT_THAT(syntax.what(), StartsWith("is not valid JSON: "));
  EXPECT_EQ(syntax.byte(), 6u);
  EXPECT_EQ(syntax.kind(), Error::Kind::invalid_argument);
  const JsonError huge = error_of("[1e999]");
  EXPECT_EQ(huge.reason(), JsonError::Reason::out_of_range);
  EXPECT_THAT(huge.what(), HasSubstr("1e999"));
  // Without nlohmann's tag, which tells a reader nothing: "is not valid JSON: parse error at …".
  for (const JsonError& e : {syntax, huge, error_of("{\"x\": NaN}")})
    EXPECT_THAT(e.what(), Not(HasSubstr("json.exception"))) << e.what();
  EXPECT_THAT(error_of("{\"x\": NaN}").what(),
              StartsWith("is not valid JSON: parse error at line 1, column 7: "));
}

TEST(JsonParse, ACallbackAndAnotherJsonTypeAreHonoured) {
  int keys = 0;
  const auto j = parse_json<nlohmann::ordered_json>(
      R"({"b":1,"a":2})", [&](int, nlohmann::ordered_json::parse_event_t event, auto&) {
        keys += event == nlohmann::ordered_json::parse_event_t::key;
        return true;
      });
  EXPECT_EQ(keys, 2);
  EXPECT_EQ(j.begin().key(), "b");  // ordered: the text's order
}

}  // namespace
}  // namespace qkv
