// The byte-level BPE tokenizer as a specification: the byte alphabet, the order of merges, the
// special tokens, each rule of the smollm pre-tokenizer and the errors, on small vocabularies made
// here; then SmolLM2-135M-Instruct's own vocabulary, read from its GGUF, against the ids of Hugging
// Face's tokenizer (tests/golden/smollm2/token_ids.json), and decoding back to the text.
#include "models/text/bpe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "core/text/utf8.h"
#include "models/model_files.h"
#include "models/smollm2.h"
#include "qkv/tensor.h"

namespace qkv {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// GPT-2's byte alphabet written out independently of bpe.cpp: the printable bytes stand for
// themselves, the other 68 for U+0100, U+0101, ... in byte order.
std::string symbol_of(int byte) {
  static const std::vector<char32_t> table = [] {
    std::vector<char32_t> t(256);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      t[b] = printable ? char32_t(b) : next++;
    }
    return t;
  }();
  std::string s;
  utf8::append(s, table[byte]);
  return s;
}

// The 256 byte symbols (id = byte), then `extra` tokens from id 256 on.
std::vector<std::string> byte_vocab(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(symbol_of(b));
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  return tokens;
}

BpeTokenizer small(const std::vector<std::string>& extra, const std::vector<std::string>& merges,
                   std::vector<int32_t> types = {}) {
  return BpeTokenizer::from_vocab(byte_vocab(extra), merges, std::move(types));
}

// The tokens of `text`, as the vocabulary spells them.
std::vector<std::string> spelled(const BpeTokenizer& tok, std::string_view text) {
  std::vector<std::string> out;
  for (const int32_t id : tok.encode(text)) out.push_back(tok.token(id));
  return out;
}

std::string from_vocab_error(std::vector<std::string> tokens,
                             const std::vector<std::string>& merges,
                             std::vector<int32_t> types = {}) {
  try {
    BpeTokenizer::from_vocab(std::move(tokens), merges, std::move(types));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(BpeTest, ByteAlphabetGivesEveryByteASymbol) {
  EXPECT_EQ(symbol_of(' '), "Ġ");
  EXPECT_EQ(symbol_of('\n'), "Ċ");
  EXPECT_EQ(symbol_of('\t'), "ĉ");
  EXPECT_EQ(symbol_of(0), "Ā");
  EXPECT_EQ(symbol_of(0x7F), "ġ");
  EXPECT_EQ(symbol_of(0xAD), "Ń");  // the soft hyphen, the last of the 68
  EXPECT_EQ(symbol_of('a'), "a");
  EXPECT_EQ(symbol_of(0xE9), "é");
  const BpeTokenizer tok = small({}, {});
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(tok.token_text(b), std::string(1, char(b))) << "byte " << b;
    EXPECT_EQ(tok.id_of(symbol_of(b)), b);
  }
  // Without merges every byte is its own token: ASCII, and the bytes of longer characters.
  for (int b = 0; b < 128; ++b) {
    EXPECT_THAT(tok.encode(std::string(1, char(b))), ElementsAre(b)) << "byte " << b;
  }
  EXPECT_THAT(tok.encode("é"), ElementsAre(0xC3, 0xA9));
  EXPECT_THAT(tok.encode("😀"), ElementsAre(0xF0, 0x9F, 0x98, 0x80));
  EXPECT_THAT(tok.encode(" a"), ElementsAre(' ', 'a'));
  const std::string all = "\t\n\r\x01 ~\x7F é€😀";
  EXPECT_EQ(tok.decode(tok.encode(all)), all);
  // A multi-symbol token stands for the bytes of its symbols.
  const BpeTokenizer the = small({"Ġthe", "ĊĊ"}, {});
  EXPECT_EQ(the.token_text(256), " the");
  EXPECT_EQ(the.token_text(257), "\n\n");
  EXPECT_EQ(the.decode({256, 'x', 257}), " thex\n\n");
}

TEST(BpeTest, BytesWithoutASymbolAreDropped) {
  // As HF's BPE drops a character it cannot find when there is no unknown token: the neighbours
  // then meet, and may merge.
  std::vector<std::string> tokens = byte_vocab({"!!"});
  tokens[4] = "<no byte 4>";
  const BpeTokenizer tok = BpeTokenizer::from_vocab(tokens, {"! !"}, {});
  EXPECT_THAT(tok.encode("a\x04"
                         "b"),
              ElementsAre('a', 'b'));
  EXPECT_THAT(tok.encode("\x04"), ElementsAre());
  EXPECT_THAT(tok.encode("!\x04!"), ElementsAre(256));
  EXPECT_EQ(tok.decode(tok.encode("x\x04\x04y")), "xy");
}

std::string encode_error(const BpeTokenizer& tok, std::string_view text) {
  try {
    tok.encode(text, BpeTokenizer::Unspelled::refuse);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    return e.what();
  }
  return "(no error)";
}

// Refused, the character is named with its bytes (a control character by its code point), and
// the vocabulary by how many byte tokens it lacks. The special tokens' own bytes are not spelled.
TEST(BpeTest, BytesWithoutASymbolCanBeRefused) {
  std::vector<std::string> tokens = byte_vocab({"<|im_start|>"});
  tokens[4] = "<no byte 4>";
  tokens['Q'] = "<no Q>";
  tokens[0xC3] = "<no byte c3>";
  tokens['<'] = "<no <>";
  std::vector<int32_t> types(257, int32_t(TokenType::normal));
  types[256] = int32_t(TokenType::control);
  const BpeTokenizer tok = BpeTokenizer::from_vocab(tokens, {}, types);
  const std::string lacks =
      " has no token in this model's vocabulary (it lacks 4 of the 256 byte tokens); expected "
      "only characters the vocabulary can spell";
  EXPECT_EQ(encode_error(tok, "hello, Q!"), "the text's character 'Q' (byte 0x51)" + lacks);
  EXPECT_EQ(encode_error(tok, "caf\u00e9"),
            "the text's character '\u00e9' (bytes 0xc3 0xa9)" + lacks);
  // ASCII control characters are left out as Hugging Face leaves them out: SmolLM2 lacks 21 of
  // them, and its goldens (tests/golden/smollm2/token_ids.json) drop \x04.
  EXPECT_EQ(tok.encode("a\x04b", BpeTokenizer::Unspelled::refuse), tok.encode("a\x04b"));
  EXPECT_EQ(tok.encode("a\x04b").size(), 2u);
  EXPECT_EQ(encode_error(tok, "a < b"), "the text's character '<' (byte 0x3c)" + lacks);
  EXPECT_THAT(tok.encode("<|im_start|>hi", BpeTokenizer::Unspelled::refuse),
              ElementsAre(256, 'h', 'i'));
  // Dropping stays the default, as Hugging Face's.
  EXPECT_THAT(tok.encode("hi Q"), ElementsAre('h', 'i', ' '));
}

TEST(BpeTest, MergesApplyInRankOrder) {
  // The pair of lowest rank is merged first, wherever it is in the piece.
  EXPECT_THAT(spelled(small({"bc", "ab"}, {"b c", "a b"}), "abc"), ElementsAre("a", "bc"));
  EXPECT_THAT(spelled(small({"bc", "ab"}, {"a b", "b c"}), "abc"), ElementsAre("ab", "c"));
  // A merge waits for the merges that make its parts.
  const BpeTokenizer the = small({"Ġt", "he", "Ġthe"}, {"Ġ t", "h e", "Ġt he"});
  EXPECT_THAT(spelled(the, " the"), ElementsAre("Ġthe"));
  EXPECT_THAT(spelled(the, " then"), ElementsAre("Ġthe", "n"));
  // A token of the vocabulary that no merge makes is never produced.
  EXPECT_THAT(spelled(small({"Ġthe"}, {}), " the"), ElementsAre("Ġ", "t", "h", "e"));
  // A merge of high rank is still taken when nothing better applies.
  EXPECT_THAT(spelled(small({"xy", "ab"}, {"x y", "a b"}), "ab"), ElementsAre("ab"));
}

TEST(BpeTest, EqualRanksMergeLeftmostFirst) {
  const BpeTokenizer tok = small({"aa", "aaa"}, {"a a", "aa a"});
  EXPECT_THAT(spelled(tok, "aa"), ElementsAre("aa"));
  EXPECT_THAT(spelled(tok, "aaa"), ElementsAre("aaa"));        // a a → aa, then aa a
  EXPECT_THAT(spelled(tok, "aaaa"), ElementsAre("aa", "aa"));  // both a a before aa a
  EXPECT_THAT(spelled(tok, "aaaaa"), ElementsAre("aa", "aaa"));
  // "aa a" outranking "a a" changes nothing here: "aa" must exist before "aa a" can apply.
  const BpeTokenizer right = small({"aa", "aaa"}, {"aa a", "a a"});
  EXPECT_THAT(spelled(right, "aaa"), ElementsAre("aaa"));
  // A long run stays linear in what it does and gives the leftmost pairs.
  const std::string run(1001, 'a');
  const std::vector<int32_t> ids = tok.encode(run);
  ASSERT_EQ(ids.size(), 500u);  // 499 × "aa", then "aaa"
  EXPECT_EQ(ids.front(), 256);
  EXPECT_EQ(ids.back(), 257);
}

TEST(BpeTest, SpecialTokensStayWhole) {
  using T = TokenType;
  const std::vector<std::string> extra = {"<s>", "<s>>", "<n>", "<u>", "<|im_start|>"};
  std::vector<int32_t> types(256, int32_t(T::normal));
  for (const T t : {T::control, T::control, T::normal, T::user_defined, T::control}) {
    types.push_back(int32_t(t));
  }
  const BpeTokenizer tok = small(extra, {}, types);
  EXPECT_THAT(tok.encode("<s>"), ElementsAre(256));
  EXPECT_THAT(tok.encode("<s><s>"), ElementsAre(256, 256));
  // The longest of the specials that start at the same byte.
  EXPECT_THAT(tok.encode("a<s>>b"), ElementsAre('a', 257, 'b'));
  // User-defined tokens too; a normal token is not matched whole.
  EXPECT_THAT(tok.encode("<u>"), ElementsAre(259));
  EXPECT_THAT(tok.encode("<n>"), ElementsAre('<', 'n', '>'));
  // The text on either side of a marker is tokenized on its own.
  EXPECT_THAT(tok.encode("<|im_start|>user\n"), ElementsAre(260, 'u', 's', 'e', 'r', '\n'));
  EXPECT_THAT(tok.encode("<|im_start"),
              ElementsAre('<', '|', 'i', 'm', '_', 's', 't', 'a', 'r', 't'));
  EXPECT_EQ(tok.type(260), T::control);
  EXPECT_EQ(tok.type('a'), T::normal);
  EXPECT_EQ(tok.decode({260, 'h', 'i', 256}), "<|im_start|>hi<s>");
}

// The smollm pre-tokenizer (from_vocab's default); the others: bpe_pretokenizer_test.cpp.
std::vector<std::string> pieces(std::string_view text) {
  static const BpeTokenizer tok = small({}, {});
  return tok.pre_tokenize(text);
}

TEST(BpeTest, PreTokenizerIsolatesEveryDigit) {
  EXPECT_THAT(pieces("1234"), ElementsAre("1", "2", "3", "4"));
  EXPECT_THAT(pieces("3.14"), ElementsAre("3", ".", "1", "4"));
  EXPECT_THAT(pieces("abc123def"), ElementsAre("abc", "1", "2", "3", "def"));
  // Every \p{N}, not only ASCII digits: ½ (No), Ⅻ (Nl), ٣ (Nd).
  EXPECT_THAT(pieces("½Ⅻ٣"), ElementsAre("½", "Ⅻ", "٣"));
  // The space before a digit is cut from it, and ends its stretch: "  " is one piece.
  EXPECT_THAT(pieces(" 1"), ElementsAre(" ", "1"));
  EXPECT_THAT(pieces("a  1"), ElementsAre("a", "  ", "1"));
  EXPECT_THAT(pieces("x\n 1"), ElementsAre("x", "\n ", "1"));
}

TEST(BpeTest, PreTokenizerFollowsTheGpt2Regex) {
  EXPECT_THAT(pieces(""), ElementsAre());
  EXPECT_THAT(pieces("Hello world"), ElementsAre("Hello", " world"));
  // Contractions, lower case only; an apostrophe otherwise is punctuation.
  EXPECT_THAT(pieces("don't we'll they're I've I'm he'd it's"),
              ElementsAre("don", "'t", " we", "'ll", " they", "'re", " I", "'ve", " I", "'m", " he",
                          "'d", " it", "'s"));
  EXPECT_THAT(pieces("I'M"), ElementsAre("I", "'", "M"));
  EXPECT_THAT(pieces("''s"), ElementsAre("''", "s"));
  EXPECT_THAT(pieces("'sa"), ElementsAre("'s", "a"));
  // One space joins the run after it: letters, or anything not space, letter or number.
  EXPECT_THAT(pieces("foo() {}"), ElementsAre("foo", "()", " {}"));
  EXPECT_THAT(pieces("!!! ok"), ElementsAre("!!!", " ok"));
  EXPECT_THAT(pieces("e\u0301t\u00e9"), ElementsAre("e", "\u0301", "t\u00e9"));  // Mn is not \p{L}
  EXPECT_THAT(pieces("你好，世界"), ElementsAre("你好", "，", "世界"));
  // White space: a run before a non-space gives up its last character to what follows.
  EXPECT_THAT(pieces("  a   b"), ElementsAre(" ", " a", "  ", " b"));
  EXPECT_THAT(pieces("a\tb"), ElementsAre("a", "\t", "b"));
  EXPECT_THAT(pieces("a\t\tb"), ElementsAre("a", "\t", "\t", "b"));
  EXPECT_THAT(pieces("x\n y"), ElementsAre("x", "\n", " y"));
  EXPECT_THAT(pieces("x \n"), ElementsAre("x", " \n"));
  EXPECT_THAT(pieces("end   "), ElementsAre("end", "   "));
  EXPECT_THAT(pieces(" "), ElementsAre(" "));
  // Only U+0020 joins a word; other White_Space (no-break space, U+3000) stands apart.
  EXPECT_THAT(pieces("a\u00a0b"), ElementsAre("a", "\u00a0", "b"));
  EXPECT_THAT(pieces("a \u3000b"), ElementsAre("a", " ", "\u3000", "b"));
  // U+001C is space to Python's str.isspace() but not White_Space; U+200B is not either.
  EXPECT_THAT(pieces("a\x1c\u200b b"), ElementsAre("a", "\x1c\u200b", " b"));
}

TEST(BpeTest, ErrorsNameWhatIsWrong) {
  const BpeTokenizer tok = small({"ab"}, {"a b"});
  EXPECT_THAT(
      [&] {
        try {
          tok.encode("ok\xC3(");
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("not valid UTF-8: byte 0xc3 at offset 2"));
  EXPECT_THROW(tok.decode({0, 257}), Error);
  EXPECT_THROW(tok.decode({-1}), Error);
  EXPECT_THROW(tok.token_text(257), Error);
  EXPECT_EQ(tok.id_of("missing"), -1);
  EXPECT_EQ(tok.size(), 257u);

  EXPECT_THAT(from_vocab_error(byte_vocab({"ab"}), {"a c"}), HasSubstr("makes a token not in"));
  EXPECT_THAT(from_vocab_error(byte_vocab({"ab"}), {"a zz"}),
              HasSubstr("merge 0 \"a zz\" names a token not in the vocabulary"));
  EXPECT_THAT(from_vocab_error(byte_vocab({"ab"}), {"ab"}), HasSubstr("two tokens separated"));
  EXPECT_THAT(from_vocab_error(byte_vocab({"ab"}), {"a  b"}), HasSubstr("two tokens separated"));
  EXPECT_THAT(from_vocab_error(byte_vocab(), {}, {1, 1}), HasSubstr("2 token types for 256"));
  EXPECT_THAT(from_vocab_error({}, {}), HasSubstr("no tokens"));
  EXPECT_THAT(from_vocab_error(byte_vocab({"\xFF"}), {}), HasSubstr("token 256"));
}

// A GGUF file of metadata alone (version 3, no tensors): string values, and arrays of strings.
std::string gguf_metadata(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& entries) {
  std::string out = "GGUF";
  auto u32 = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
  auto u64 = [&](uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); };
  auto str = [&](const std::string& v) {
    u64(v.size());
    out += v;
  };
  u32(3);
  u64(0);
  u64(entries.size());
  for (const auto& [key, values] : entries) {
    str(key);
    if (values.size() == 1) {
      u32(8);  // string
      str(values[0]);
    } else {
      u32(9);  // array of strings
      u32(8);
      u64(values.size());
      for (const std::string& v : values) str(v);
    }
  }
  return out;
}

TEST(BpeTest, FromGgufReadsTheVocabularyAndRefusesOtherPreTokenizers) {
  std::vector<std::string> tokens = byte_vocab({"ab", "<|im_end|>"});
  auto file = [&](const std::string& model, const std::string& pre) {
    return GgufFile::parse(gguf_metadata({{"tokenizer.ggml.model", {model}},
                                          {"tokenizer.ggml.pre", {pre}},
                                          {"tokenizer.ggml.tokens", tokens},
                                          {"tokenizer.ggml.merges", {"a b", "b c"}}}),
                           "tiny.gguf");
  };
  // Merges are checked: "b c" makes "bc", which is not in the vocabulary.
  EXPECT_THROW(BpeTokenizer::from_gguf(file("gpt2", "smollm")), Error);
  tokens.push_back("bc");
  const BpeTokenizer tok = BpeTokenizer::from_gguf(file("gpt2", "smollm"));
  EXPECT_EQ(tok.size(), 259u);
  EXPECT_THAT(tok.encode("abc"), ElementsAre(256, 'c'));
  // Without tokenizer.ggml.token_type every token is normal: none is matched whole.
  EXPECT_EQ(tok.type(257), TokenType::normal);
  EXPECT_EQ(tok.pre_tokenizer(), PreTokenizer::smollm);
  // Each name llama.cpp gives the pre-tokenizers qkv has.
  for (const auto& [pre, expected] :
       {std::pair{"llama-bpe", PreTokenizer::llama3}, std::pair{"llama3", PreTokenizer::llama3},
        std::pair{"llama-v3", PreTokenizer::llama3}, std::pair{"qwen2", PreTokenizer::qwen2},
        std::pair{"deepseek-r1-qwen", PreTokenizer::qwen2}, std::pair{"gpt-2", PreTokenizer::gpt2}})
    EXPECT_EQ(BpeTokenizer::from_gguf(file("gpt2", pre)).pre_tokenizer(), expected) << pre;
  // Another name, or another model, is one line naming it and listing what qkv reads.
  for (const auto& [model, pre] : {std::pair{"gpt2", "default"}, std::pair{"gpt2", "falcon"},
                                   std::pair{"gpt2", "Llama-BPE"}, std::pair{"llama", "smollm"}}) {
    try {
      BpeTokenizer::from_gguf(file(model, pre));
      ADD_FAILURE() << model << " " << pre << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                "tiny.gguf: tokenizer.ggml.model \"" + std::string(model) +
                    "\" with tokenizer.ggml.pre \"" + pre +
                    "\"; qkv's byte-level BPE tokenizer reads \"gpt2\" with the pre-tokenizers "
                    "\"smollm\", \"gpt-2\", \"llama-bpe\", \"llama3\", \"llama-v3\", \"qwen2\", "
                    "\"deepseek-r1-qwen\"");
    }
  }
}

// ---- SmolLM2-135M-Instruct ----

const BpeTokenizer& smollm2() { return test::smollm2_tokenizer(); }

TEST(BpeSmolLM2Test, VocabularyAndSpecialTokens) {
  const BpeTokenizer& tok = smollm2();
  EXPECT_EQ(tok.size(), 49152u);
  EXPECT_EQ(tok.id_of("<|endoftext|>"), 0);
  EXPECT_EQ(tok.id_of("<|im_start|>"), 1);
  EXPECT_EQ(tok.id_of("<|im_end|>"), 2);
  EXPECT_EQ(tok.type(1), TokenType::control);
  EXPECT_EQ(tok.type(17), TokenType::normal);
  EXPECT_EQ(tok.token_text(tok.id_of("Ġthe")), " the");
  EXPECT_EQ(tok.token(198), "Ċ");
  EXPECT_THAT(tok.encode("<|im_start|>user\n"), ElementsAre(1, tok.id_of("user"), 198));
}

TEST(BpeSmolLM2Test, IdsMatchHuggingFace) {
  const nlohmann::json golden = test::read_golden_json("token_ids.json", "smollm2");
  const nlohmann::json& cases = golden.at("cases");
  ASSERT_GE(cases.size(), 40u);
  int dropping = 0;
  for (const nlohmann::json& c : cases) {
    const std::string text = c.at("text").get<std::string>();
    const std::vector<int32_t> expected = c.at("ids").get<std::vector<int32_t>>();
    const std::vector<int32_t> ids = smollm2().encode(text);
    EXPECT_EQ(ids, expected) << "text: " << testing::PrintToString(text);
    // Decoding gives the text back, less the bytes SmolLM2 has no symbol for (0x04, ...).
    std::string kept;
    for (const char b : text) {
      if (smollm2().id_of(symbol_of(static_cast<unsigned char>(b))) >= 0) kept += b;
    }
    dropping += kept != text;
    EXPECT_EQ(smollm2().decode(expected), kept) << "text: " << testing::PrintToString(text);
  }
  EXPECT_EQ(dropping, 1);  // the case of the bytes without a symbol
}

TEST(BpeSmolLM2Test, DecodeInvertsEncode) {
  const std::vector<std::string> texts = {
      "",
      " ",
      "\n\n \t x",
      "A sentence with 123 numbers, émojis 🙂‍↔️ and 漢字.",
      "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\n 2 + 2?<|im_end|>\n",
      "<|im_end",
      std::string("nul\0byte", 8),
  };
  for (const std::string& text : texts) {
    EXPECT_EQ(smollm2().decode(smollm2().encode(text)), text) << testing::PrintToString(text);
  }
}

}  // namespace
}  // namespace qkv
