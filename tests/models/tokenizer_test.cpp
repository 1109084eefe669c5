// The WordPiece tokenizer of all-MiniLM-L6-v2 as a specification: each step of BERT's basic
// tokenizer, WordPiece, truncation, byte spans, UTF-8 and vocabulary errors; random inputs never
// crash it; and on the goldens (tests/golden/minilm/tokens.json, from transformers' pure-Python
// BertTokenizer) every id matches.
#include "models/text/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "models/minilm.h"
#include "models/model_files.h"
#include "core/text/unicode_tables.h"
#include "qkv/tensor.h"

namespace qkv {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const WordPieceTokenizer& minilm() { return test::minilm_tokenizer(); }

std::vector<std::string> words(std::string_view text) { return minilm().basic_tokenize(text); }

std::vector<std::string> pieces(std::string_view text, std::size_t max_length = 256) {
  std::vector<std::string> out;
  for (const Token& t : minilm().encode(text, max_length).tokens) out.push_back(t.text);
  return out;
}

// The message of the qkv::Error that encoding `text` throws ("" when it encodes).
std::string encode_error(std::string_view text) {
  try {
    minilm().encode(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    return e.what();
  }
  return "";
}

TEST(TokenizerTest, VocabularyOfMiniLM) {
  const WordPieceTokenizer& tok = minilm();
  EXPECT_EQ(tok.size(), 30522u);
  EXPECT_EQ(tok.pad_id(), 0);
  EXPECT_EQ(tok.unk_id(), 100);
  EXPECT_EQ(tok.cls_id(), 101);
  EXPECT_EQ(tok.sep_id(), 102);
  EXPECT_EQ(tok.id("[MASK]"), 103);
  EXPECT_EQ(tok.token(101), "[CLS]");
  EXPECT_EQ(tok.id("##ing"), 2075);
  EXPECT_EQ(tok.id("not-a-token"), -1);
  EXPECT_THROW(tok.token(-1), Error);
  EXPECT_THROW(tok.token(30522), Error);
}

TEST(TokenizerTest, LowercasesAndStripsAccents) {
  EXPECT_THAT(words("Café naïve Ångström RÉSUMÉ"),
              ElementsAre("cafe", "naive", "angstrom", "resume"));
  // Decomposed input (e + U+0301) gives the same word as the precomposed é.
  EXPECT_THAT(words("cafe\u0301"), ElementsAre("cafe"));
  // str.lower()'s full mapping: İ → i + U+0307, and the mark goes with the accents.
  EXPECT_THAT(words("İstanbul"), ElementsAre("istanbul"));
  // A word of marks only vanishes.
  EXPECT_THAT(words("a \u0301 b"), ElementsAre("a", "b"));
  // Hiragana が is か + U+3099 under NFD; the voicing mark is Mn.
  EXPECT_THAT(words("ひらがな"), ElementsAre("ひらかな"));
}

TEST(TokenizerTest, FinalSigmaAsPythonLower) {
  // Σ ending a word (punctuation after it is case-ignorable) is ς; inside a word σ.
  EXPECT_THAT(words("ΟΔΟΣ ΟΔΟΣ."), ElementsAre("οδος", "οδος", "."));
  EXPECT_THAT(words("ΟΔΟΣ.Α"), ElementsAre("οδοσ", ".", "α"));
  EXPECT_THAT(words("Σ"), ElementsAre("σ"));  // nothing cased before it
  EXPECT_THAT(pieces("ΟΔΟΣ"), ElementsAre("[CLS]", "ο", "##δ", "##ος", "[SEP]"));
}

TEST(TokenizerTest, HangulSyllablesBecomeJamo) {
  // NFD splits 한 into ᄒ ᅡ ᆫ; the vocabulary holds the jamo.
  EXPECT_THAT(words("한국"), ElementsAre("\u1112\u1161\u11ab\u1100\u116e\u11a8"));
  EXPECT_EQ(minilm().encode("한국").ids(),
            (std::vector<int32_t>{101, 1469, 30006, 30021, 29991, 30014, 30020, 102}));
}

TEST(TokenizerTest, SpacesAroundCjkIdeographsOnly) {
  EXPECT_THAT(words("我爱NLP处理"), ElementsAre("我", "爱", "nlp", "处", "理"));
  // Kana and Hangul are not CJK ideographs: they stay in their words.
  EXPECT_THAT(words("東京タワー"), ElementsAre("東", "京", "タワー"));
  EXPECT_TRUE(unicode::is_cjk(0x4E00));
  EXPECT_TRUE(unicode::is_cjk(0x2F800));
  EXPECT_FALSE(unicode::is_cjk(0x3042));  // あ
  EXPECT_FALSE(unicode::is_cjk(0xAC00));  // 가
}

TEST(TokenizerTest, SplitsOffEveryPunctuationCharacter) {
  EXPECT_THAT(words("don't!"), ElementsAre("don", "'", "t", "!"));
  // ASCII symbols that Unicode does not call punctuation count too.
  EXPECT_THAT(words("$5^`~"), ElementsAre("$", "5", "^", "`", "~"));
  EXPECT_THAT(words("¿Qué?—sí…"), ElementsAre("¿", "que", "?", "—", "si", "…"));
  EXPECT_THAT(words("a+b=c"), ElementsAre("a", "+", "b", "=", "c"));
}

TEST(TokenizerTest, DropsControlCharactersAndSplitsOnWhitespace) {
  EXPECT_THAT(words(std::string("a\0b\x07"
                                "c",
                                5)),
              ElementsAre("abc"));
  EXPECT_THAT(words("x\u200by soft\u00adhyphen \ufffd"), ElementsAre("xy", "softhyphen"));
  EXPECT_THAT(words("tab\there\nnew\r\nline\u3000ideo\u00a0nbsp"),
              ElementsAre("tab", "here", "new", "line", "ideo", "nbsp"));
  // U+2028 and U+2029 are not BERT whitespace, but Python's str.split() splits on them.
  EXPECT_THAT(words("a\u2028b\u2029c"), ElementsAre("a", "b", "c"));
  EXPECT_TRUE(words(" \t\n ").empty());
}

TEST(TokenizerTest, SpecialTokensInTheTextStayWhole) {
  EXPECT_THAT(words("a[MASK]b [SEP]"), ElementsAre("a", "[MASK]", "b", "[SEP]"));
  EXPECT_EQ(minilm().encode("a[MASK]b").ids(), (std::vector<int32_t>{101, 1037, 103, 1038, 102}));
  // Matched verbatim only: lowercase is ordinary text.
  EXPECT_THAT(words("[mask] [CLS"), ElementsAre("[", "mask", "]", "[", "cls"));
}

TEST(TokenizerTest, WordPieceIsGreedyLongestMatchFirst) {
  EXPECT_THAT(pieces("unaffable embeddings"), ElementsAre("[CLS]", "una", "##ffa", "##ble", "em",
                                                          "##bed", "##ding", "##s", "[SEP]"));
  EXPECT_EQ(minilm().encode("the running dogs").ids(),
            (std::vector<int32_t>{101, 1996, 2770, 6077, 102}));
}

TEST(TokenizerTest, WordWithoutAMatchIsOneUnk) {
  EXPECT_THAT(pieces("☃"), ElementsAre("[CLS]", "[UNK]", "[SEP]"));
  // x matches, ##☃ does not: the whole word is [UNK], not x + [UNK].
  EXPECT_THAT(pieces("x☃ ok"), ElementsAre("[CLS]", "[UNK]", "ok", "[SEP]"));
}

TEST(TokenizerTest, WordsOverOneHundredCharactersAreUnk) {
  const Encoding hundred = minilm().encode(std::string(100, 'a'));
  EXPECT_EQ(hundred.tokens.size(), 52u);  // aaa, 48 × ##aa, ##a between [CLS] and [SEP]
  EXPECT_EQ(pieces(std::string(101, 'a')), (std::vector<std::string>{"[CLS]", "[UNK]", "[SEP]"}));
  // Characters count, not bytes: 100 × é (200 bytes) is still WordPiece's to split.
  std::string e100;
  for (int i = 0; i < 100; ++i) e100 += "é";
  EXPECT_GT(minilm().encode(e100).tokens.size(), 3u);
  EXPECT_EQ(minilm().encode(e100 + "é").tokens.size(), 3u);
}

TEST(TokenizerTest, TruncatesToMaxLengthKeepingSep) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += "word ";
  const Encoding e = minilm().encode(text);
  EXPECT_EQ(e.tokens.size(), 256u);
  EXPECT_TRUE(e.truncated);
  EXPECT_EQ(e.tokens.front().id, 101);
  EXPECT_EQ(e.tokens.back().id, 102);
  EXPECT_EQ(e.tokens[254].text, "word");
  // Exactly full is not truncated.
  const Encoding fits = minilm().encode("a b c", 5);
  EXPECT_EQ(fits.tokens.size(), 5u);
  EXPECT_FALSE(fits.truncated);
  EXPECT_THAT(pieces("a b c", 4), ElementsAre("[CLS]", "a", "b", "[SEP]"));
  EXPECT_THAT(pieces("a b c", 2), ElementsAre("[CLS]", "[SEP]"));
  EXPECT_FALSE(minilm().encode("", 2).truncated);
  try {
    minilm().encode("x", 1);
    ADD_FAILURE() << "max_length 1 was accepted";
  } catch (const Error& err) {
    EXPECT_THAT(err.what(), HasSubstr("max_length is 1"));
  }
}

TEST(TokenizerTest, SpansPointAtTheOriginalBytes) {
  const std::string text = "Héllo, wörld! 日本 x\u200by 한";
  const Encoding e = minilm().encode(text);
  std::vector<std::string> spans;
  for (const Token& t : e.tokens) spans.push_back(text.substr(t.begin, t.end - t.begin));
  EXPECT_THAT(spans, ElementsAre("", "Héllo", ",", "wörld", "!", "日", "本", "x", "y", "한", "한",
                                 "한", ""));
  EXPECT_EQ(e.tokens.front().begin, 0u);
  EXPECT_EQ(e.tokens.back().begin, text.size());
  EXPECT_EQ(e.tokens.back().end, text.size());
  // Pieces of one word split its bytes; a special token written in the text spans itself.
  const std::string t2 = "unaffable [MASK]";
  const Encoding e2 = minilm().encode(t2);
  ASSERT_EQ(e2.tokens.size(), 6u);
  EXPECT_EQ(t2.substr(e2.tokens[1].begin, e2.tokens[1].end - e2.tokens[1].begin), "una");
  EXPECT_EQ(t2.substr(e2.tokens[2].begin, e2.tokens[2].end - e2.tokens[2].begin), "ffa");
  EXPECT_EQ(t2.substr(e2.tokens[3].begin, e2.tokens[3].end - e2.tokens[3].begin), "ble");
  EXPECT_EQ(t2.substr(e2.tokens[4].begin, e2.tokens[4].end - e2.tokens[4].begin), "[MASK]");
}

TEST(TokenizerTest, InvalidUtf8NamesTheByteAndOffset) {
  struct Case {
    std::string bytes, message;
  };
  const Case cases[] = {
      {"ab\xff", "byte 0xff at offset 2 (not a UTF-8 lead byte)"},
      {"\x80", "byte 0x80 at offset 0 (a continuation byte without a lead byte)"},
      {"x\xc0\xaf", "byte 0xc0 at offset 1 (an overlong encoding)"},
      {"\xe0\x80\xaf", "byte 0xe0 at offset 0 (an overlong encoding)"},
      {"\xf0\x80\x80\xaf", "byte 0xf0 at offset 0 (an overlong encoding)"},
      {"\xed\xa0\x80", "byte 0xed at offset 0 (a surrogate"},
      {"\xed\xbf\xbf", "byte 0xed at offset 0 (a surrogate"},
      {"\xf4\x90\x80\x80", "byte 0xf4 at offset 0 (a code point above U+10FFFF)"},
      {"\xf5\x80\x80\x80", "byte 0xf5 at offset 0 (not a UTF-8 lead byte)"},
      {"abc\xe2\x82", "byte 0xe2 at offset 3 (a sequence cut short by the end of the text)"},
      {"\xe2\x28\xa1", "byte 0xe2 at offset 0 (a sequence cut short by a byte"},
      {"ok [CLS] \xc3", "byte 0xc3 at offset 9"},
  };
  for (const Case& c : cases) {
    const std::string message = encode_error(c.bytes);
    EXPECT_THAT(message, HasSubstr("text is not valid UTF-8: " + c.message)) << c.message;
    EXPECT_THROW(minilm().basic_tokenize(c.bytes), Error) << c.message;
  }
  // The edges of the valid ranges.
  for (const char* ok : {"\x7f", "\xc2\x80", "\xed\x9f\xbf", "\xee\x80\x80", "\xef\xbf\xbf",
                         "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf"}) {
    EXPECT_EQ(encode_error(ok), "") << ok;
  }
}

// A vocabulary file in the test's temporary directory, removed afterwards.
struct VocabFile {
  std::string path;
  explicit VocabFile(const std::string& bytes) {
    path = (std::filesystem::temp_directory_path() /
            ("qkv_vocab_" + std::to_string(std::random_device{}()) + ".txt"))
               .string();
    std::ofstream(path, std::ios::binary) << bytes;
  }
  ~VocabFile() { std::remove(path.c_str()); }
};

TEST(TokenizerTest, VocabularyFileErrors) {
  try {
    WordPieceTokenizer::from_vocab_file("/nonexistent/vocab.txt");
    ADD_FAILURE() << "a missing file was read";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/vocab.txt: cannot open"));
  }
  const VocabFile no_unk("[PAD]\n[CLS]\n[SEP]\nhello\n");
  try {
    WordPieceTokenizer::from_vocab_file(no_unk.path);
    ADD_FAILURE() << "a vocabulary without [UNK] was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(no_unk.path + ": the vocabulary (4 tokens) has no [UNK]"));
  }
  const VocabFile latin1("[PAD]\n[UNK]\n[CLS]\n[SEP]\ncaf\xe9\n");
  try {
    WordPieceTokenizer::from_vocab_file(latin1.path);
    ADD_FAILURE() << "a vocabulary in Latin-1 was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(": the vocabulary is not valid UTF-8: byte 0xe9 at offset 27"));
  }
  for (const char* missing : {"[CLS]", "[SEP]", "[PAD]"}) {
    std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]"};
    std::erase(vocab, std::string(missing));
    EXPECT_THROW(WordPieceTokenizer(std::move(vocab)), Error) << missing;
  }
}

TEST(TokenizerTest, VocabularyFileLinesAsPythonReadsThem) {
  // \r\n and \r end lines too; a repeated token keeps its last id; no final newline is fine.
  const VocabFile f("[PAD]\r\n[UNK]\r[CLS]\n[SEP]\nhi\n##s\nhi\nthere");
  const WordPieceTokenizer tok = WordPieceTokenizer::from_vocab_file(f.path);
  EXPECT_EQ(tok.size(), 8u);
  EXPECT_EQ(tok.id("[UNK]"), 1);
  EXPECT_EQ(tok.id("hi"), 6);
  EXPECT_EQ(tok.token(4), "hi");
  EXPECT_EQ(tok.encode("His there").ids(), (std::vector<int32_t>{2, 6, 5, 7, 3}));
  EXPECT_EQ(tok.encode("hello [MASK]").ids(), (std::vector<int32_t>{2, 1, 1, 1, 1, 3}));
}

// Random bytes and random valid UTF-8: a clean qkv::Error (bytes only) or a well-formed encoding.
TEST(TokenizerTest, RandomInputsNeverCrash) {
  const WordPieceTokenizer& tok = minilm();
  std::mt19937 rng(20240607);
  // Code points from everywhere, weighted toward the tokenizer's special cases.
  const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0x0, 0x7F},        {0x80, 0x24F},    {0x300, 0x36F},     {0x370, 0x3FF},
      {0x1100, 0x11FF},   {0x2000, 0x206F}, {0x3000, 0x30FF},   {0x4E00, 0x4E40},
      {0xAC00, 0xD7A3},   {0xE000, 0xFFFF}, {0x1D165, 0x1D172}, {0x1F300, 0x1F6FF},
      {0x10000, 0x10FFFF}};
  auto utf8 = [](char32_t cp) {
    if (cp < 0x80) return std::string(1, char(cp));
    const int length = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    std::string s(1, char((0xF00 >> length) | cp >> 6 * (length - 1)));  // 110…, 1110…, 11110…
    for (int k = length - 2; k >= 0; --k) s += char(0x80 | (cp >> 6 * k & 0x3F));
    return s;
  };
  const char* fragments[] = {"[CLS]", "[SEP]", "[MASK]", "[", " ", "Σ", "##", "ing"};
  int errors = 0, encodings = 0;
  for (int n = 0; n < 40000; ++n) {
    const bool valid = n % 2 == 1;
    std::string text;
    const int length = std::uniform_int_distribution<int>(0, 40)(rng);
    for (int i = 0; i < length; ++i) {
      if (!valid) {
        text += char(rng() % 4 == 0 ? 0x80 | rng() % 0x80 : rng() % 256);
      } else if (rng() % 8 == 0) {
        text += fragments[rng() % std::size(fragments)];
      } else {
        const auto& [lo, hi] = ranges[rng() % ranges.size()];
        char32_t cp = lo + rng() % (hi - lo + 1);
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
        text += utf8(cp);
      }
    }
    const std::size_t max_length = 2 + rng() % 40;
    const std::string repro =
        "case " + std::to_string(n) + " (seed 20240607), max_length " + std::to_string(max_length);
    Encoding e;
    try {
      e = tok.encode(text, max_length);
    } catch (const Error& err) {
      EXPECT_FALSE(valid) << repro << ": " << err.what();
      EXPECT_THAT(err.what(), HasSubstr("is not valid UTF-8")) << repro;
      ++errors;
      continue;
    }
    ++encodings;
    ASSERT_GE(e.tokens.size(), 2u) << repro;
    ASSERT_LE(e.tokens.size(), max_length) << repro;
    EXPECT_EQ(e.tokens.front().id, tok.cls_id()) << repro;
    EXPECT_EQ(e.tokens.back().id, tok.sep_id()) << repro;
    for (const Token& t : e.tokens) {
      ASSERT_GE(t.id, 0) << repro;
      ASSERT_LT(std::size_t(t.id), tok.size()) << repro;
      EXPECT_EQ(t.text, tok.token(t.id)) << repro;
      EXPECT_LE(t.begin, t.end) << repro;
      EXPECT_LE(t.end, text.size()) << repro;
    }
  }
  EXPECT_GT(errors, 10000);  // most random byte strings are not UTF-8
  EXPECT_GT(encodings, 20000);
}

// Every golden text encodes to exactly transformers' ids and tokens.
TEST(TokenizerTest, MatchesTransformersOnTheGoldens) {
  const nlohmann::json golden = test::read_golden_json("tokens.json");
  ASSERT_TRUE(golden.is_array());
  ASSERT_GE(golden.size(), 50u);
  int matched = 0;
  for (std::size_t i = 0; i < golden.size(); ++i) {
    const std::string text = golden[i]["text"].get<std::string>();
    const Encoding e = minilm().encode(text, 256);
    std::vector<std::string> tokens;
    for (const Token& t : e.tokens) tokens.push_back(t.text);
    const bool same = e.ids() == golden[i]["ids"].get<std::vector<int32_t>>();
    EXPECT_TRUE(same) << "text " << i << ": " << golden[i]["text"].dump();
    EXPECT_EQ(tokens, golden[i]["tokens"].get<std::vector<std::string>>()) << "text " << i;
    matched += same;
  }
  EXPECT_EQ(matched, int(golden.size()));
}

}  // namespace
}  // namespace qkv
