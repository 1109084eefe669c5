// The pre-tokenizers of byte-level BPE (models/text/pre_tokenizers.h) as a specification: each rule
// of Llama 3's, Qwen 2's and GPT-2's regex on texts made to try it, Llama 3's ignore_merges, Qwen's
// NFC; then, for each pre-tokenizer, a vocabulary trained with Hugging Face's tokenizers
// (tests/golden/bpe/<pre>.gguf) against the ids and pieces that library gives
// (tests/golden/make_bpe_pretokenizer_goldens.py), and each file read with the wrong rules, which
// the comparison must reject.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "models/model_files.h"
#include "models/text/bpe.h"
#include "models/text/nfc.h"
#include "models/text/pre_tokenizers.h"
#include "qkv/tensor.h"

namespace qkv {
namespace {

using ::testing::ElementsAre;

// The pieces of `text` under `p`, cut by pre_tokenizer_cuts.
std::vector<std::string> pieces(PreTokenizer p, std::string_view text) {
  std::vector<std::string> out;
  std::size_t begin = 0;
  for (const std::size_t end : pre_tokenizer_cuts(p, text)) {
    out.emplace_back(text.substr(begin, end - begin));
    begin = end;
  }
  return out;
}
std::vector<std::string> llama3(std::string_view t) { return pieces(PreTokenizer::llama3, t); }
std::vector<std::string> qwen2(std::string_view t) { return pieces(PreTokenizer::qwen2, t); }

TEST(BpePreTokenizerTest, NamesAreLlamaCppsAndTheFlagsFollowTheModels) {
  EXPECT_EQ(pre_tokenizer_named("llama-bpe"), PreTokenizer::llama3);
  EXPECT_EQ(pre_tokenizer_named("qwen2"), PreTokenizer::qwen2);
  EXPECT_EQ(pre_tokenizer_named("gpt-2"), PreTokenizer::gpt2);
  EXPECT_EQ(pre_tokenizer_named("smollm"), PreTokenizer::smollm);
  EXPECT_EQ(pre_tokenizer_named("gpt2"), std::nullopt);     // llama.cpp's name is "gpt-2"
  EXPECT_EQ(pre_tokenizer_named("default"), std::nullopt);  // llama.cpp's is not GPT-2's regex
  EXPECT_EQ(pre_tokenizer_name(PreTokenizer::llama3), "llama-bpe");
  EXPECT_TRUE(ignores_merges(PreTokenizer::llama3));
  EXPECT_FALSE(ignores_merges(PreTokenizer::qwen2));
  EXPECT_TRUE(normalizes_to_nfc(PreTokenizer::qwen2));
  EXPECT_FALSE(normalizes_to_nfc(PreTokenizer::llama3));
}

TEST(BpePreTokenizerTest, Llama3ContractionsInAnyCase) {
  EXPECT_THAT(llama3("it's I'M WE'LL They'Re"),
              ElementsAre("it", "'s", " I", "'M", " WE", "'LL", " They", "'Re"));
  // ſ folds to s under (?i:...), as Oniguruma folds it; the GPT-2 regex is lower case only.
  EXPECT_THAT(llama3("x'\u017f"), ElementsAre("x", "'\u017f"));
  EXPECT_THAT(pieces(PreTokenizer::gpt2, "I'M"), ElementsAre("I", "'", "M"));
  // Not a contraction: the apostrophe is the one character allowed before letters.
  EXPECT_THAT(llama3("'x rock'n"), ElementsAre("'x", " rock", "'n"));
  EXPECT_THAT(llama3("''s"), ElementsAre("''", "s"));  // a punctuation run comes first
}

TEST(BpePreTokenizerTest, Llama3LettersTakeOneCharacterBefore) {
  // [^\r\n\p{L}\p{N}]?\p{L}+: a space, a tab, punctuation — but not a newline or a digit.
  EXPECT_THAT(llama3("\tword ,word .word\nword"),
              ElementsAre("\tword", " ,", "word", " .", "word", "\n", "word"));
  EXPECT_THAT(llama3("(hello) $x 1a"), ElementsAre("(hello", ")", " $", "x", " ", "1", "a"));
  EXPECT_THAT(llama3("a\u00a0b"), ElementsAre("a", "\u00a0b"));  // any white space but \r \n
  EXPECT_THAT(llama3("你好，世界"), ElementsAre("你好", "，世界"));
}

TEST(BpePreTokenizerTest, DigitsThreeAtATimeOrOne) {
  EXPECT_THAT(llama3("1234567"), ElementsAre("123", "456", "7"));
  EXPECT_THAT(llama3("a 12 ½Ⅻ٣"), ElementsAre("a", " ", "12", " ", "½Ⅻ٣"));
  EXPECT_THAT(qwen2("1234"), ElementsAre("1", "2", "3", "4"));
  EXPECT_THAT(qwen2("x 12"), ElementsAre("x", " ", "1", "2"));
  // GPT-2 keeps a run whole, with the space before it; smollm cuts every digit apart.
  EXPECT_THAT(pieces(PreTokenizer::gpt2, "x 1234"), ElementsAre("x", " 1234"));
  EXPECT_THAT(pieces(PreTokenizer::smollm, "x 12"), ElementsAre("x", " ", "1", "2"));
}

TEST(BpePreTokenizerTest, Llama3PunctuationKeepsTheNewlinesAfterIt) {
  // ␠?[^\s\p{L}\p{N}]+[\r\n]*
  EXPECT_THAT(llama3("!!!\n\nx"), ElementsAre("!!!\n\n", "x"));
  EXPECT_THAT(llama3("end.\r\n\r\nnext"), ElementsAre("end", ".\r\n\r\n", "next"));
  EXPECT_THAT(llama3("a --> b"), ElementsAre("a", " -->", " b"));
  EXPECT_THAT(llama3("a. \n"), ElementsAre("a", ".", " \n"));
}

TEST(BpePreTokenizerTest, Llama3WhiteSpaceEndsAtItsLastNewline) {
  // \s*[\r\n]+ takes white space up to the run's last \r or \n; \s+(?!\S) leaves the last space
  // of a run to the word after it; \s+ takes the rest.
  EXPECT_THAT(llama3("a  \n\n  b\r\n\tc"), ElementsAre("a", "  \n\n", " ", " b", "\r\n", "\tc"));
  EXPECT_THAT(llama3("  \u3000\n a"), ElementsAre("  \u3000\n", " a"));
  EXPECT_THAT(llama3("\n\n\n"), ElementsAre("\n\n\n"));
  EXPECT_THAT(llama3("  a   b"), ElementsAre(" ", " a", "  ", " b"));
  EXPECT_THAT(llama3("end   "), ElementsAre("end", "   "));
  EXPECT_THAT(llama3("x \t1"), ElementsAre("x", " ", "\t", "1"));
  EXPECT_THAT(llama3(""), ElementsAre());
}

// Byte symbols of GPT-2's alphabet for the bytes used below (printable ASCII stands for itself,
// the space is Ġ).
BpeTokenizer ascii_vocab(std::vector<std::string> extra, const std::vector<std::string>& merges,
                         PreTokenizer pre) {
  std::vector<std::string> tokens = {"Ġ"};
  for (char c = '!'; c <= '~'; ++c) tokens.emplace_back(1, c);
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  return BpeTokenizer::from_vocab(tokens, merges, {}, pre);
}

TEST(BpePreTokenizerTest, Llama3TakesAPieceThatIsATokenWhole) {
  // "Ġzebra" is a token that no merge makes; "ab" is made by a merge (" ab" is Ġ, ab).
  for (const PreTokenizer pre : {PreTokenizer::llama3, PreTokenizer::qwen2}) {
    const BpeTokenizer tok = ascii_vocab({"Ġzebra", "ab"}, {"a b"}, pre);
    const int32_t zebra = tok.id_of("Ġzebra"), ab = tok.id_of("ab"), space = tok.id_of("Ġ");
    const std::vector<int32_t> ids = tok.encode(" zebra ab");
    if (pre == PreTokenizer::llama3) {
      EXPECT_THAT(ids, ElementsAre(zebra, space, ab));
    } else {  // Qwen's tokenizer.json merges: the token is never produced
      EXPECT_EQ(ids.size(), 8u);
      EXPECT_EQ(ids[7], ab);
    }
    EXPECT_EQ(tok.decode(ids), " zebra ab");
  }
}

TEST(BpePreTokenizerTest, NfcComposesReordersAndLeavesNfcAlone) {
  EXPECT_EQ(to_nfc("cafe\u0301"), "caf\u00e9");
  EXPECT_EQ(to_nfc("\u212b"), "\u00c5");               // a singleton: Å
  EXPECT_EQ(to_nfc("\u1100\u1161\u11a8"), "\uac01");   // Hangul L V T
  EXPECT_EQ(to_nfc("a\u0307\u0323"), "\u1ea1\u0307");  // dot below (220) sorts first
  EXPECT_EQ(to_nfc("\u0344"), "\u0308\u0301");         // excluded from composition
  EXPECT_EQ(to_nfc("e\u0301\u0301"), "\u00e9\u0301");  // the second acute is blocked
  EXPECT_EQ(to_nfc("\u0301e"), "\u0301e");             // no starter before the mark
  const std::string nfc = "Ångström 你好 😀 ﬁ Ⅻ";       // already NFC (ﬁ, Ⅻ: not NFKC)
  EXPECT_EQ(to_nfc(nfc), nfc);
  EXPECT_EQ(to_nfc("plain ASCII and Latin-1: é"), "plain ASCII and Latin-1: é");
  // Qwen's tokenizer puts the text in NFC between its special tokens, before the pieces.
  const BpeTokenizer tok = ascii_vocab({"Ã", "©", "Ã©"}, {"Ã ©"}, PreTokenizer::qwen2);
  EXPECT_EQ(tok.encode("e\u0301"), tok.encode("\u00e9"));
  EXPECT_THAT(tok.pre_tokenize("cafe\u0301!"), ElementsAre("caf\u00e9", "!"));
  EXPECT_EQ(tok.decode(tok.encode("e\u0301")), "\u00e9");
}

// ---- vocabularies trained with Hugging Face's tokenizers (tests/golden/bpe) ----

struct Golden {
  nlohmann::json json;
  GgufFile file;
};

Golden golden(const std::string& pre) {
  nlohmann::json json = test::read_golden_json(pre + ".json", "bpe");
  GgufFile file = GgufFile::open(test::golden_dir("bpe") + "/" + pre + ".gguf");
  return {std::move(json), std::move(file)};
}

// How many cases `tok` gives other ids than the golden's.
int mismatches(const BpeTokenizer& tok, const nlohmann::json& cases) {
  int wrong = 0;
  for (const nlohmann::json& c : cases)
    wrong += tok.encode(c.at("text").get<std::string>()) != c.at("ids").get<std::vector<int32_t>>();
  return wrong;
}

// The file's vocabulary with another pre-tokenizer's rules.
BpeTokenizer with_rules(const GgufFile& f, PreTokenizer pre) {
  return BpeTokenizer::from_vocab(f.meta("tokenizer.ggml.tokens").get<std::vector<std::string>>(),
                                  f.meta("tokenizer.ggml.merges").get<std::vector<std::string>>(),
                                  f.meta("tokenizer.ggml.token_type").get<std::vector<int32_t>>(),
                                  pre);
}

class BpeGoldenTest : public ::testing::TestWithParam<const char*> {};

TEST_P(BpeGoldenTest, IdsAndPiecesMatchHuggingFace) {
  const Golden g = golden(GetParam());
  const BpeTokenizer tok = BpeTokenizer::from_gguf(g.file);
  EXPECT_EQ(pre_tokenizer_name(tok.pre_tokenizer()), g.json.at("pre").get<std::string>());
  EXPECT_EQ(tok.size(), g.json.at("vocab_size").get<std::size_t>());
  const nlohmann::json& cases = g.json.at("cases");
  ASSERT_GE(cases.size(), 40u);
  for (const nlohmann::json& c : cases) {
    const std::string text = c.at("text").get<std::string>();
    const std::vector<int32_t> ids = tok.encode(text, BpeTokenizer::Unspelled::refuse);
    EXPECT_EQ(ids, c.at("ids").get<std::vector<int32_t>>())
        << "text: " << testing::PrintToString(text);
    if (c.contains("pieces"))
      EXPECT_EQ(tok.pre_tokenize(text), c.at("pieces").get<std::vector<std::string>>())
          << "text: " << testing::PrintToString(text);
    // Decoding gives the text back (in NFC where the model normalizes).
    EXPECT_EQ(tok.decode(ids), normalizes_to_nfc(tok.pre_tokenizer()) ? to_nfc(text) : text)
        << "text: " << testing::PrintToString(text);
  }
}

INSTANTIATE_TEST_SUITE_P(PreTokenizers, BpeGoldenTest,
                         ::testing::Values("llama-bpe", "qwen2", "smollm", "gpt-2"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

// The comparison above rejects a vocabulary read with another model's rules.
TEST(BpeGoldenTest, ComparisonRejectsTheWrongPreTokenizer) {
  const Golden llama = golden("llama-bpe");
  const nlohmann::json& cases = llama.json.at("cases");
  EXPECT_EQ(mismatches(with_rules(llama.file, PreTokenizer::llama3), cases), 0);
  // Qwen's rules: digits one at a time, no ignore_merges, NFC.
  const BpeTokenizer as_qwen = with_rules(llama.file, PreTokenizer::qwen2);
  EXPECT_GE(mismatches(as_qwen, cases), 3);
  const std::string digits = "1234567890";
  EXPECT_NE(as_qwen.encode(digits), with_rules(llama.file, PreTokenizer::llama3).encode(digits));
  EXPECT_THAT(as_qwen.pre_tokenize(digits),
              ElementsAre("1", "2", "3", "4", "5", "6", "7", "8", "9", "0"));
  // Llama 3's rules on Qwen's vocabulary; GPT-2's (without the digit split) on SmolLM's, whose
  // merges, learned on split digits, join none: only white space running into a digit differs.
  const Golden qwen = golden("qwen2"), smollm = golden("smollm");
  EXPECT_GE(mismatches(with_rules(qwen.file, PreTokenizer::llama3), qwen.json.at("cases")), 3);
  EXPECT_GE(mismatches(with_rules(smollm.file, PreTokenizer::gpt2), smollm.json.at("cases")), 1);
  // The golden states which cases ignore_merges changes; without it those differ.
  EXPECT_EQ(llama.json.at("cases_changed_by_ignore_merges").get<int>(), 2);
}

}  // namespace
}  // namespace qkv
