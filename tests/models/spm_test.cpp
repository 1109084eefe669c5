// The SentencePiece-style tokenizer as a specification: the merge order by score, the prefix space,
// byte fallback, the unknown token, special tokens and decoding, on vocabularies made here; then
// two vocabularies SentencePiece itself trained (tests/golden/spm, make_spm_goldens.py) against its
// ids and transformers', and a perturbed vocabulary the comparison rejects.
#include "models/text/spm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "models/text/gguf_tokenizer.h"
#include "qkv/tensor.h"

namespace qkv {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kMeta = "\xE2\x96\x81";  // "▁"

std::string meta(std::string s) {  // spaces written as "▁"
  std::string out;
  for (const char c : s)
    if (c == ' ')
      out += kMeta;
    else
      out += c;
  return out;
}

// A vocabulary of (token, score) with "▁" written as a space, types all normal unless given.
struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  Vocab& add(const std::string& token, float score = 0, TokenType type = TokenType::normal) {
    tokens.push_back(meta(token));
    scores.push_back(score);
    types.push_back(int32_t(type));
    return *this;
  }
  Vocab& bytes() {  // the 256 byte tokens <0x00> … <0xFF>
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b)
      add(std::string("<0x") + hex[b / 16] + hex[b % 16] + ">", 0, TokenType::byte);
    return *this;
  }
  SpmTokenizer build(bool prefix = true, int32_t unknown = -1) const {
    return SpmTokenizer::from_vocab(tokens, scores, types, prefix, unknown);
  }
};

// The tokens of `text`, "▁" written back as a space.
std::vector<std::string> spelled(const SpmTokenizer& t, std::string_view text) {
  std::vector<std::string> out;
  for (const int32_t id : t.encode(text)) out.push_back(t.token_text(id));
  return out;
}

// a b c and the merges ab (score -1), bc (-2), abc (-3), " a" (-4).
Vocab abc() {
  Vocab v;
  v.add("<unk>", 0, TokenType::unknown).add(" ").add("a").add("b").add("c");
  v.add("ab", -1).add("bc", -2).add("abc", -3).add(" a", -4);
  return v;
}

TEST(SpmTokenizerTest, MergesThePairOfHighestScoreFirst) {
  const SpmTokenizer t = abc().build(false);
  // ab (-1) before bc (-2): "abc" is ab + c, then abc.
  EXPECT_THAT(spelled(t, "abc"), ElementsAre("abc"));
  EXPECT_THAT(spelled(t, "bca"), ElementsAre("bc", "a"));
  // Without "abc", the order decides: ab wins over bc, until bc's score is raised above ab's.
  Vocab v;
  v.add("a").add("b").add("c").add("ab", -1).add("bc", -2);
  EXPECT_THAT(spelled(v.build(false), "abc"), ElementsAre("ab", "c"));
  v.scores[4] = 0.5f;
  EXPECT_THAT(spelled(v.build(false), "abc"), ElementsAre("a", "bc"));
}

TEST(SpmTokenizerTest, TakesTheLeftmostOfEqualScores) {
  Vocab v;
  v.add("a").add("aa", -1);
  EXPECT_THAT(spelled(v.build(false), "aaa"), ElementsAre("aa", "a"));
}

TEST(SpmTokenizerTest, AddsTheSpacePrefixWhenTheVocabularySaysSo) {
  EXPECT_THAT(spelled(abc().build(true), "a b"), ElementsAre(" a", " ", "b"));
  EXPECT_THAT(spelled(abc().build(false), "a b"), ElementsAre("a", " ", "b"));
  EXPECT_TRUE(abc().build(true).encode("").empty());  // no "▁" alone for an empty text
}

TEST(SpmTokenizerTest, SpellsUnknownCharactersAsBytesThenAsTheUnknownToken) {
  Vocab v = abc();
  v.bytes();
  const SpmTokenizer t = v.build(false, 0);
  // 日 is E6 97 A5: three byte tokens.
  const std::vector<int32_t> ids = t.encode("a日");
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(t.token(ids[1]), "<0xE6>");
  EXPECT_EQ(t.token(ids[3]), "<0xA5>");
  EXPECT_EQ(t.decode(ids), "a日");
  // Without the byte tokens: the unknown token, once per character; refused when asked.
  const SpmTokenizer no_bytes = abc().build(false, 0);
  EXPECT_THAT(no_bytes.encode("a日日"), ElementsAre(2, 0, 0));
  EXPECT_THAT(abc().build(false).encode("a日"), ElementsAre(2));  // no unknown token: left out
  try {
    no_bytes.encode("a日", SpmTokenizer::Unspelled::refuse);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("U+65E5 (bytes 0xe6 0x97 0xa5) has no token"));
    EXPECT_THAT(e.what(), HasSubstr("lacks 256 of the 256 byte tokens"));
  }
}

TEST(SpmTokenizerTest, KeepsSpecialTokensWholeAndPrefixesTheTextAfterThem) {
  Vocab v = abc();
  v.add("<s>", 0, TokenType::control).add("<t>", 0, TokenType::user_defined);
  v.add("<tt>", 0, TokenType::control).add("<t", 5);  // "<t" normal: never cut out
  const SpmTokenizer t = v.build(true, 0);
  EXPECT_THAT(spelled(t, "<s>a<t>b<tt><unk>"),
              ElementsAre("<s>", " a", "<t>", " ", "b", "<tt>", "<unk>"));
  EXPECT_EQ(t.decode(t.encode("<s>a<t>b")), "<s>a<t>b");
  // Merges make only normal tokens: "<" "s" ">" written apart never become <s>.
  EXPECT_EQ(t.type(t.id_of("<s>")), TokenType::control);
}

TEST(SpmTokenizerTest, DecodesTokensToTheirBytes) {
  Vocab v = abc();
  v.bytes();
  const SpmTokenizer t = v.build(true);
  EXPECT_EQ(t.token_text(t.id_of(meta(" a"))), " a");
  EXPECT_EQ(t.token_text(t.id_of("<0x0A>")), "\n");
  for (const std::string text : {"a b", "  a", "a\n\tc ", " ", "日本 ab"})
    EXPECT_EQ(t.decode(t.encode(text)), text) << text;
  EXPECT_THROW(t.decode({int32_t(t.size())}), Error);
}

TEST(SpmTokenizerTest, RefusesMalformedVocabularies) {
  const auto message = [](auto&& make) {
    try {
      make();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message([] {
                SpmTokenizer::from_vocab({"a", "b"}, {0}, {}, true);
              }),
              HasSubstr("1 scores and 2 token types for 2 tokens"));
  EXPECT_THAT(message([] {
                SpmTokenizer::from_vocab({"a"}, {std::numeric_limits<float>::quiet_NaN()}, {},
                                         true);
              }),
              HasSubstr("token 0 has the score nan; expected a finite number"));
  EXPECT_THAT(message([] { SpmTokenizer::from_vocab({"a"}, {0}, {}, true, 1); }),
              HasSubstr("the unknown token id 1 is not a token"));
  EXPECT_THAT(message([] { SpmTokenizer::from_vocab({"\xff"}, {0}, {}, true); }),
              HasSubstr("token 0"));
}

// The goldens of tests/golden/spm: SentencePiece's ids, with llama.cpp's cutting at special tokens.
nlohmann::json spm_goldens() {
  std::ifstream in(std::string(QKV_SOURCE_DIR) + "/tests/golden/spm/token_ids.json");
  if (!in) throw std::runtime_error("tests/golden/spm/token_ids.json is missing");
  return nlohmann::json::parse(in);
}

GgufTokenizer golden_tokenizer(const std::string& name) {
  return GgufTokenizer::from_gguf(
      GgufFile::open(std::string(QKV_SOURCE_DIR) + "/tests/golden/spm/" + name + ".gguf"));
}

TEST(SpmTokenizerTest, MatchesSentencePieceOnItsOwnVocabularies) {
  const nlohmann::json golden = spm_goldens();
  for (const std::string name : {"llama", "gemma"}) {
    const GgufTokenizer t = golden_tokenizer(name);
    int agree_with_transformers = 0;
    for (const auto& c : golden["cases"]) {
      const std::string text = c["text"];
      const std::vector<int32_t> ids = c[name]["ids"];
      EXPECT_EQ(t.encode(text), ids) << name << ": " << nlohmann::json(text).dump();
      // transformers, where it differs, differs in the two known ways (make_spm_goldens.py).
      if (c[name].contains("transformers_ids")) {
        EXPECT_NE(t.encode(text), c[name]["transformers_ids"].get<std::vector<int32_t>>());
      } else {
        ++agree_with_transformers;
      }
      // Decoding gives the text back, with the BOS (EOS) written as their tokens.
      std::string decoded = t.decode(ids);
      const std::string bos = t.token(t.bos()), eos = t.token(t.eos());
      ASSERT_EQ(decoded.rfind(bos, 0), 0u);
      decoded.erase(0, bos.size());
      if (t.add_eos()) decoded.erase(decoded.size() - eos.size());
      if (text.find(kMeta) == std::string::npos) {
        EXPECT_EQ(decoded, text) << name;
      }
    }
    // Measured: transformers agrees on all 45 Gemma-style cases, 33 of the Llama-style ones.
    EXPECT_EQ(agree_with_transformers, name == "gemma" ? 45 : 33) << name;
  }
}

TEST(SpmTokenizerTest, ReadsTheSpecialIdsAndFlagsOfTheFile) {
  const GgufTokenizer llama = golden_tokenizer("llama"), gemma = golden_tokenizer("gemma");
  EXPECT_EQ(llama.model(), "llama");
  EXPECT_EQ(llama.token(llama.bos()), "<s>");
  EXPECT_EQ(llama.token(llama.eos()), "</s>");
  EXPECT_EQ(llama.token(llama.unknown()), "<unk>");
  EXPECT_TRUE(llama.add_bos());
  EXPECT_FALSE(llama.add_eos());
  EXPECT_TRUE(llama.spm()->add_space_prefix());
  EXPECT_EQ(llama.type(llama.id_of("<tool>")), TokenType::user_defined);
  EXPECT_EQ(gemma.token(gemma.bos()), "<bos>");
  EXPECT_EQ(gemma.token(gemma.eos()), "<eos>");
  EXPECT_EQ(gemma.token(gemma.padding()), "<pad>");
  EXPECT_TRUE(gemma.add_eos());
  EXPECT_FALSE(gemma.spm()->add_space_prefix());
  EXPECT_THAT(gemma.encode(""), ElementsAre(gemma.bos(), gemma.eos()));
}

// The comparison with the goldens rejects a vocabulary whose scores differ: "▁t" lowered below
// "▁▁" turns the four "▁" of "   three" into "▁▁▁▁", where SentencePiece merged "▁t" first.
TEST(SpmTokenizerTest, GoldensRejectAPerturbedScore) {
  const GgufFile file =
      GgufFile::open(std::string(QKV_SOURCE_DIR) + "/tests/golden/spm/llama.gguf");
  std::vector<std::string> tokens = file.meta("tokenizer.ggml.tokens");
  std::vector<float> scores = file.meta("tokenizer.ggml.scores");
  std::vector<int32_t> types = file.meta("tokenizer.ggml.token_type");
  std::vector<int32_t> golden;
  const nlohmann::json goldens = spm_goldens();
  for (const auto& c : goldens["cases"])
    if (c["text"].get<std::string>() == "   three")
      golden = c["llama"]["ids"].get<std::vector<int32_t>>();
  ASSERT_FALSE(golden.empty());
  golden.erase(golden.begin());  // the BOS, which SpmTokenizer leaves to GgufTokenizer
  const SpmTokenizer same = SpmTokenizer::from_vocab(tokens, scores, types, true, 0);
  EXPECT_EQ(same.encode("   three"), golden);
  const auto t = std::find(tokens.begin(), tokens.end(), meta(" t")) - tokens.begin();
  ASSERT_LT(std::size_t(t), tokens.size());
  scores[t] = -1000;
  const SpmTokenizer perturbed = SpmTokenizer::from_vocab(tokens, scores, types, true, 0);
  EXPECT_NE(perturbed.encode("   three"), golden);
  EXPECT_EQ(perturbed.token(perturbed.encode("   three")[0]), meta("    "));
}

}  // namespace
}  // namespace qkv
