// printable(): the user's text as the terminal shows it — control characters and bytes that are
// not UTF-8 spelled out, everything else (UTF-8 letters, symbols, backslashes) as it is.
#include <gtest/gtest.h>

#include <string>

#include "qkv/explain.h"

namespace qkv::explain {
namespace {

TEST(Printable, KeepsOrdinaryTextAndUtf8AsItIs) {
  EXPECT_EQ(printable("The cat sat on the mat."), "The cat sat on the mat.");
  EXPECT_EQ(printable("café → naïve 東京 😀"), "café → naïve 東京 😀");
  EXPECT_EQ(printable(R"(C:\path\x1b)"), R"(C:\path\x1b)");  // a typed backslash stays one
  EXPECT_EQ(printable(""), "");
}

TEST(Printable, SpellsOutC0ControlsAndDel) {
  EXPECT_EQ(printable("a\x1b[2Jb"), "a\\x1b[2Jb");                 // clear screen
  EXPECT_EQ(printable("\x1b]0;title\x07"), "\\x1b]0;title\\x07");  // window title, bell
  EXPECT_EQ(printable("one\ntwo\r\tthree"), "one\\ntwo\\r\\tthree");
  EXPECT_EQ(printable(std::string("nul\0x", 5)), "nul\\x00x");
  EXPECT_EQ(printable("del\x7f"), "del\\x7f");
}

TEST(Printable, SpellsOutC1ControlsAndBidiOverrides) {
  EXPECT_EQ(printable("a\xc2\x9b"
                      "31mb"),
            "a\\u009b31mb");                     // U+009B, the 8-bit CSI
  EXPECT_EQ(printable("\xc2\x85"), "\\u0085");   // NEL
  EXPECT_EQ(printable("\xc2\xa0"), "\xc2\xa0");  // U+00A0 is not a control
  EXPECT_EQ(printable("abc\xe2\x80\xae"
                      "def"),
            "abc\\u202edef");                       // right-to-left override
  EXPECT_EQ(printable("\xe2\x80\xa8"), "\\u2028");  // line separator
}

TEST(Printable, SpellsOutBytesThatAreNotUtf8) {
  EXPECT_EQ(printable("caf\xc3"), "caf\\xc3");  // cut short
  EXPECT_EQ(printable("\x80"
                      "a"),
            "\\x80a");                                               // a stray continuation byte
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a surrogate
  EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  EXPECT_EQ(printable("\xff\xfe"), "\\xff\\xfe");
}

TEST(Printable, LinesKeepTheirBreaksAndTabsButNothingElse) {
  EXPECT_EQ(printable_lines("a\n\tb\x1b[2Jc\r\n"), "a\n\tb\\x1b[2Jc\\r\n");
  EXPECT_EQ(printable_lines(""), "");
  EXPECT_EQ(printable_lines("\n"), "\n");
}

TEST(Printable, OneLineIsCutOnACharacterBoundaryAndSaysHowMuchMore) {
  EXPECT_EQ(printable_line("short\n", 100), "short\\n");
  EXPECT_EQ(printable_line("abcdef", 4), "abcd… (2 more bytes)");
  // "aé": the cut at byte 2 would fall inside é (2 bytes), so it comes before it.
  EXPECT_EQ(printable_line("a\xC3\xA9zz", 2), "a… (4 more bytes)");
}

TEST(Printable, WholeCharactersStopsBeforeACutCharacter) {
  const std::string emoji = "\xF0\x9F\x98\x80";  // U+1F600, four bytes
  EXPECT_EQ(whole_characters("ab" + emoji), 6u);
  EXPECT_EQ(whole_characters("ab" + emoji.substr(0, 3)), 2u);
  EXPECT_EQ(whole_characters("ab" + emoji.substr(0, 1)), 2u);
  EXPECT_EQ(whole_characters("\xC3\xA9"), 2u);  // é
  EXPECT_EQ(whole_characters("x\xC3"), 1u);     // half of é
  EXPECT_EQ(whole_characters("\x80\x80"), 2u);  // no start byte at all: whole
  EXPECT_EQ(whole_characters(""), 0u);
}

TEST(Printable, IsIdempotentAndCountsAsItsShownWidth) {
  const std::string hostile = "x\x1b[31m\xc2\x9b\xff\n東";
  EXPECT_EQ(printable(printable(hostile)), printable(hostile));
  // What is printed is what display_width counts: every escape is plain ASCII, and 東 is wide.
  EXPECT_EQ(display_width(printable(hostile)),
            static_cast<int>(std::string("x\\x1b[31m\\u009b\\xff\\n").size()) + 2);
}

TEST(CountWord, SpellsOutToTwelveThenDigits) {
  EXPECT_EQ(count_word(0), "zero");
  EXPECT_EQ(count_word(8), "eight");
  EXPECT_EQ(count_word(12), "twelve");
  EXPECT_EQ(count_word(13), "13");
}

// Columns as a terminal draws them: CJK, kana, Hangul and most emoji take two, combining marks
// and joiners none, so tables of such tokens line up.
TEST(DisplayWidth, WideCharactersTakeTwoColumnsAndMarksNone) {
  EXPECT_EQ(display_width("river bank"), 10);
  EXPECT_EQ(display_width("東京"), 4);
  EXPECT_EQ(display_width("カタカナ"), 8);
  EXPECT_EQ(display_width("한국어"), 6);
  EXPECT_EQ(display_width("😀!"), 3);
  EXPECT_EQ(display_width("e\u0301"), 1);           // e + combining acute
  EXPECT_EQ(display_width("a\u200db"), 2);          // zero-width joiner
  EXPECT_EQ(display_width("caf\u00e9 \u00ad"), 6);  // é precomposed; the soft hyphen shows
  EXPECT_EQ(display_width("\xff"), 1);              // not UTF-8: one column (printable's \xff)
  EXPECT_EQ(pad_left("東京", 6), "  東京");
  EXPECT_EQ(pad_right("é", 3), "é  ");
}

TEST(DisplayWidth, ClipCutsAtColumnsNeverInsideAWideCharacter) {
  EXPECT_EQ(clip("東京タワー", 6), "東京…");  // 2 + 2 + "…"; タ would reach 7
  EXPECT_EQ(clip("東京タワー", 5), "東京…");
  EXPECT_EQ(clip("東京タワー", 10), "東京タワー");           // fits exactly
  EXPECT_EQ(clip("noe\u0308l and more", 5), "noe\u0308l…");  // the mark stays with its e
  EXPECT_LE(display_width(clip("😀😀😀😀", 4)), 4);
}

}  // namespace
}  // namespace qkv::explain

namespace qkv::explain {
namespace {

TEST(TableRow, PadsByDisplayColumnsLeftThenRightAndDropsTrailingBlanks) {
  // "—" is one column of three bytes, "猫" two columns: padding counts columns, not bytes.
  EXPECT_EQ(table_row({"a", "—", "猫"}, {3, 4, 4}), "a      —   猫");
  EXPECT_EQ(table_row({"case", "x", "1.5"}, {6, 3, 5}, 2), "case   x     1.5");
  EXPECT_EQ(table_row({"a", "b"}, {2, 3}, 1, 2), "a     b");
  EXPECT_EQ(table_row({"left", ""}, {6, 4}, 2), "left");        // nothing trails
  EXPECT_EQ(table_row({"toolong", "1"}, {3, 1}), "toolong 1");  // never cut
}

TEST(TableRow, RenderTableIsMadeOfItsRows) {
  const Table t{.row_labels = {"Jon", "Joan"},
                .column_labels = {"John", "Joan"},
                .cells = {{"0.71", "0.24"}, {"0.10", "0.90"}}};
  EXPECT_EQ(render(t),
            "        John  Joan\n"
            "  Jon   0.71  0.24\n"
            "  Joan  0.10  0.90\n");
}

}  // namespace
}  // namespace qkv::explain
