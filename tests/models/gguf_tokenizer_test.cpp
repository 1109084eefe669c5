// GgufTokenizer: the file's tokenizer.ggml.model picks byte-level BPE or SentencePiece; the
// special ids, add_bos / add_eos and their llama.cpp defaults; the files it refuses, each with one
// line naming the key. The vocabularies are tests/models/tiny_llama_gguf.h's, edited.
#include "models/text/gguf_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/gguf.h"
#include "models/tiny_llama_gguf.h"
#include "qkv/tensor.h"

namespace qkv {
namespace {

using test::GgufValue;
using test::TinyLlamaGguf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

GgufValue gguf_bool(bool v) { return {7, std::string(1, v ? '\1' : '\0')}; }
GgufValue gguf_f32s(const std::vector<float>& items) {
  std::string b =
      test::gguf_detail::le<uint32_t>(6) + test::gguf_detail::le<uint64_t>(items.size());
  for (const float v : items) b += test::gguf_detail::le(v);
  return {9, b};
}

GgufTokenizer read(const TinyLlamaGguf& g) {
  return GgufTokenizer::from_gguf(GgufFile::parse(g.bytes(), "tiny.gguf"));
}

std::string error_of(const TinyLlamaGguf& g) {
  try {
    read(g);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// tiny_llama_gguf with a SentencePiece vocabulary instead: <unk> <s> </s>, ▁ a b, ▁a (score -1),
// ab (-2), the bytes <0x0A> and <0x21>, and a control token <turn>.
TinyLlamaGguf spm_gguf() {
  TinyLlamaGguf g = test::tiny_llama_gguf();
  g.erase("tokenizer.ggml.merges").erase("tokenizer.ggml.pre");
  g.set("tokenizer.ggml.model", test::gguf_str("llama"))
      .set("tokenizer.ggml.tokens",
           test::gguf_strings({"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b",
                               "\xE2\x96\x81"
                               "a",
                               "ab", "<0x0A>", "<0x21>", "<turn>"}))
      .set("tokenizer.ggml.scores", gguf_f32s({0, 0, 0, 0, 0, 0, -1, -2, 0, 0, 0}))
      .set("tokenizer.ggml.token_type", test::gguf_i32s({2, 3, 3, 1, 1, 1, 1, 1, 6, 6, 3}))
      .erase("tokenizer.ggml.bos_token_id")
      .erase("tokenizer.ggml.eos_token_id")
      .erase("tokenizer.ggml.padding_token_id");
  return g;
}

TEST(GgufTokenizerTest, ReadsByteLevelBpeWithoutBosByDefault) {
  const GgufTokenizer t = read(test::tiny_llama_gguf());
  EXPECT_EQ(t.model(), "gpt2");
  EXPECT_EQ(t.pre(), "smollm");
  ASSERT_NE(t.bpe(), nullptr);
  EXPECT_FALSE(t.add_bos());
  EXPECT_EQ(t.bos(), 1);
  EXPECT_EQ(t.eos(), 2);
  EXPECT_EQ(t.padding(), 0);
  EXPECT_EQ(t.unknown(), -1);
  EXPECT_EQ(t.encode("hello"), t.bpe()->encode("hello"));
  TinyLlamaGguf g = test::tiny_llama_gguf();
  g.set("tokenizer.ggml.add_bos_token", gguf_bool(true))
      .set("tokenizer.ggml.add_eos_token", gguf_bool(true));
  const GgufTokenizer both = read(g);
  EXPECT_THAT(both.encode(""), ElementsAre(1, 2));
}

TEST(GgufTokenizerTest, ReadsSentencePieceWithLlamaCppsDefaults) {
  const GgufTokenizer t = read(spm_gguf());
  EXPECT_EQ(t.model(), "llama");
  ASSERT_NE(t.spm(), nullptr);
  // No ids stated: SentencePiece's <unk> 0, <s> 1, </s> 2; BOS added, the ▁ prefix too.
  EXPECT_EQ(t.bos(), 1);
  EXPECT_EQ(t.eos(), 2);
  EXPECT_EQ(t.unknown(), 0);
  EXPECT_TRUE(t.add_bos());
  EXPECT_FALSE(t.add_eos());
  // "ab a\n!c<turn>a": ▁a (-1) merges before ab (-2); c is unknown; after <turn> a ▁ again.
  EXPECT_THAT(t.encode("ab a\n!c<turn>a"), ElementsAre(1, 6, 5, 6, 8, 9, 0, 10, 6));
  EXPECT_EQ(t.decode({1, 6, 5, 6, 8, 9, 10, 6}), "<s>ab a\n!<turn>a");
  EXPECT_EQ(t.token_text(6), " a");
  EXPECT_EQ(t.type(8), TokenType::byte);
  EXPECT_EQ(t.id_of("ab"), 7);
  EXPECT_EQ(t.size(), 11u);
  TinyLlamaGguf g = spm_gguf();
  g.set("tokenizer.ggml.add_space_prefix", gguf_bool(false))
      .set("tokenizer.ggml.add_bos_token", gguf_bool(false));
  EXPECT_THAT(read(g).encode("ab a"), ElementsAre(7, 6));
}

TEST(GgufTokenizerTest, RefusesTokenizersItDoesNotRead) {
  TinyLlamaGguf g = test::tiny_llama_gguf();
  g.set("tokenizer.ggml.model", test::gguf_str("bert"));
  EXPECT_EQ(
      error_of(g),
      "tiny.gguf: tokenizer.ggml.model \"bert\"; qkv reads \"gpt2\" (byte-level BPE: Llama 3, "
      "Qwen, SmolLM) and \"llama\" (SentencePiece: Llama 2, Mistral, Gemma, Phi-3)");
  g.set("tokenizer.ggml.model", test::gguf_u32(3));
  EXPECT_THAT(error_of(g), HasSubstr("\"tokenizer.ggml.model\" is 3; expected a string"));
}

TEST(GgufTokenizerTest, RefusesMalformedSentencePieceVocabularies) {
  TinyLlamaGguf g = spm_gguf();
  g.erase("tokenizer.ggml.scores");
  EXPECT_THAT(error_of(g), HasSubstr("no metadata \"tokenizer.ggml.scores\""));
  g = spm_gguf();
  g.set("tokenizer.ggml.scores", test::gguf_strings({"x"}));
  EXPECT_THAT(error_of(g), HasSubstr("\"tokenizer.ggml.scores\" is an array of 1 string; "
                                     "expected an array of numbers, one per token"));
  g = spm_gguf();
  g.set("tokenizer.ggml.scores", gguf_f32s({0, 0}));
  EXPECT_THAT(error_of(g), HasSubstr("2 scores and 11 token types for 11 tokens"));
  g = spm_gguf();
  g.set("tokenizer.ggml.add_space_prefix", test::gguf_u32(1));
  EXPECT_THAT(error_of(g), HasSubstr("\"tokenizer.ggml.add_space_prefix\" is 1; expected a bool"));
  g = spm_gguf();
  g.set("tokenizer.ggml.token_type", test::gguf_i32s({2, 3, 3, 1, 1, 1, 1, 1, 6, 6, 9}));
  EXPECT_THAT(error_of(g), HasSubstr("gives token 10 (\"<turn>\") the type 9; expected 0 to 6"));
}

TEST(GgufTokenizerTest, RefusesSpecialIdsOutsideTheVocabulary) {
  TinyLlamaGguf g = spm_gguf();
  g.set("tokenizer.ggml.eos_token_id", test::gguf_u32(11));
  EXPECT_THAT(error_of(g), HasSubstr("\"tokenizer.ggml.eos_token_id\" is 11; expected a token id "
                                     "from 0 to 10 (the vocabulary holds 11 tokens)"));
  // add_bos with no BOS to add: a "gpt2" file has no default.
  g = test::tiny_llama_gguf();
  g.erase("tokenizer.ggml.bos_token_id").set("tokenizer.ggml.add_bos_token", gguf_bool(true));
  EXPECT_THAT(error_of(g), HasSubstr("\"tokenizer.ggml.add_bos_token\" is true but the file "
                                     "states no tokenizer.ggml.bos_token_id"));
}

}  // namespace
}  // namespace qkv
