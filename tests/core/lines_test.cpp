// qkv/lines.h: texts one a line, from a file or stdin, checked UTF-8 where the line is known.
#include "qkv/lines.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "qkv/tensor.h"

namespace qkv {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(Lines, SplitDropsOneCarriageReturnAndNeedsNoFinalNewline) {
  EXPECT_THAT(split_lines("a\r\nb\n\nc"), ElementsAre("a", "b", "", "c"));
  EXPECT_THAT(split_lines("a\n"), ElementsAre("a"));
  EXPECT_THAT(split_lines("a\r\r\n"), ElementsAre("a\r"));
  EXPECT_TRUE(split_lines("").empty());
}

TEST(Lines, Utf8ProblemNamesTheFirstBadByte) {
  EXPECT_EQ(utf8_problem("héllo"), "");
  EXPECT_EQ(utf8_problem("ab\xff"), "byte 3 is 0xff");
  EXPECT_EQ(utf8_problem("\xc0\xaf"), "byte 1 is 0xc0");  // an overlong '/'
  EXPECT_EQ(message_of([] {
              check_utf8_lines({"fine", "x\xfe"}, "stdin line");
            }),
            "stdin line 2 is not valid UTF-8 (byte 2 of the line is 0xfe); expected UTF-8 text");
}

TEST(Lines, ReadLinesSkipsBlankLinesAndNamesTheSource) {
  const std::string path = ::testing::TempDir() + "qkv_lines_test.txt";
  std::ofstream(path) << "first\n\n  \nsecond\r\n";
  EXPECT_THAT(read_lines("--corpus", path), ElementsAre("first", "second"));
  std::ofstream(path) << "\n \t\n";
  EXPECT_EQ(message_of([&] { read_lines("--corpus", path); }),
            "--corpus " + path + " has no non-empty lines; expected one text a line");
  std::ofstream(path) << "ok\nbad \xff\n";
  EXPECT_THAT(message_of([&] { read_lines("--corpus", path); }),
              HasSubstr(path + " line 2 is not valid UTF-8 (byte 5 of the line is 0xff)"));
  std::filesystem::remove(path);
  EXPECT_THAT(message_of([&] { read_lines("--corpus", path); }), HasSubstr("--corpus " + path));
}

TEST(Lines, ArgumentsAreTheTextsWhenGiven) {
  EXPECT_THAT(texts_or_stdin({"a", "b"}, "texts"), ElementsAre("a", "b"));
  EXPECT_EQ(message_of([] {
              texts_or_stdin({"a", "\xff"}, "texts");
            }),
            "text 2 is not valid UTF-8 (byte 1 of the line is 0xff); expected UTF-8 text");
}

TEST(Lines, SizesCountEachStringsObject) {
  EXPECT_EQ(texts_bytes({"abc", ""}), static_cast<int64_t>(2 * sizeof(std::string) + 3));
  EXPECT_EQ(longest_text({"ab", "abcd", "a"}), 4);
  EXPECT_EQ(longest_text({}), 0);
}

}  // namespace
}  // namespace qkv
