// Sentence pairs as BERT reads them, [CLS] A [SEP] B [SEP] with token types 0 then 1, against
// Hugging Face transformers (tests/golden/minilm/pairs.json and pair_*_<i>.npy, made by
// tests/golden/make_minilm_goldens.py): the pure-Python BertTokenizer(a, b, truncation=True,
// max_length=n) ids and token_type_ids, and BertModel's float64 run with those token types.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "models/bert/bert.h"
#include "models/minilm.h"
#include "models/model_files.h"
#include "models/text/tokenizer.h"
#include "nn/compare.h"
#include "qkv/npy.h"

namespace qkv {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const WordPieceTokenizer& tokenizer() { return test::minilm_tokenizer(); }

using test::Minilm;
using test::minilm;

using test::max_abs_diff;  // +∞ when the shapes differ

std::vector<std::string> texts_of(const Encoding& e) {
  std::vector<std::string> out;
  for (const Token& t : e.tokens) out.push_back(t.text);
  return out;
}

// "a a … a", n words: n pieces.
std::string words(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += i ? " a" : "a";
  return s;
}

// ---- tokenizer ----------------------------------------------------------------------------------

// Every golden pair (one that fits, and 'longest_first' cutting A only, B only, both on a tie, A to
// 256 in all, and an empty B) encodes to exactly transformers' ids, token types and tokens.
TEST(TokenizerPairTest, MatchesTransformersOnEveryGoldenPair) {
  const nlohmann::json golden = test::read_golden_json("pairs.json")["pairs"];
  ASSERT_GE(golden.size(), 6u);
  for (std::size_t i = 0; i < golden.size(); ++i) {
    const nlohmann::json& g = golden[i];
    const std::string a = g["a"], b = g["b"];
    const std::size_t max_length = g["max_length"];
    SCOPED_TRACE("golden pair " + std::to_string(i) + ", max_length " + std::to_string(max_length) +
                 ": " + g["a"].dump() + " / " + g["b"].dump());
    const Encoding e = tokenizer().encode_pair(a, b, max_length);
    EXPECT_EQ(e.ids(), g["ids"].get<std::vector<int32_t>>());
    EXPECT_EQ(e.type_ids(), g["token_type_ids"].get<std::vector<int32_t>>());
    EXPECT_EQ(texts_of(e), g["tokens"].get<std::vector<std::string>>());
    // Truncated exactly when the whole pair would not fit.
    const std::size_t whole =
        tokenizer().encode(a, 1 << 20).tokens.size() + tokenizer().encode(b, 1 << 20).tokens.size();
    EXPECT_EQ(e.truncated, whole - 1 > max_length);
  }
}

// The rule as transformers states it, on the uncut lengths: while the pair is too long, drop the
// last piece of the longer text (of B when they are as long). The tokenizer stops splitting each
// text once no further piece could be kept; this checks that changes nothing.
TEST(TokenizerPairTest, LongestFirstDropsFromTheLongerTextOneAtATime) {
  for (std::size_t max_length = 3; max_length <= 14; ++max_length)
    for (std::size_t la = 0; la <= 16; ++la)
      for (std::size_t lb = 0; lb <= 16; ++lb) {
        std::size_t ka = la, kb = lb;
        while (ka + kb + 3 > max_length) (ka > kb ? ka : kb) -= 1;
        const Encoding e = tokenizer().encode_pair(words(la), words(lb), max_length);
        std::vector<int32_t> types(ka + 2, 0);
        types.resize(ka + kb + 3, 1);
        ASSERT_EQ(e.type_ids(), types)
            << "|A| " << la << ", |B| " << lb << ", max_length " << max_length;
        EXPECT_EQ(e.truncated, ka + kb < la + lb);
      }
}

TEST(TokenizerPairTest, SegmentsAndSpansPointIntoTheirOwnText) {
  const std::string a = "Héllo, wörld", b = "It's [MASK]!";
  const Encoding e = tokenizer().encode_pair(a, b);
  EXPECT_THAT(texts_of(e), ElementsAre("[CLS]", "hello", ",", "world", "[SEP]", "it", "'", "s",
                                       "[MASK]", "!", "[SEP]"));
  EXPECT_THAT(e.type_ids(), ElementsAre(0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1));
  std::vector<std::string> spans;
  for (const Token& t : e.tokens) {
    const std::string& own = t.segment == 0 ? a : b;
    spans.push_back(own.substr(t.begin, t.end - t.begin));
  }
  EXPECT_THAT(spans, ElementsAre("", "Héllo", ",", "wörld", "", "It", "'", "s", "[MASK]", "!", ""));
  EXPECT_EQ(e.tokens[4].begin, a.size());  // A's [SEP] closes A
  EXPECT_EQ(e.tokens.back().begin, b.size());
  EXPECT_FALSE(e.truncated);
  // A single text is all segment 0.
  EXPECT_THAT(tokenizer().encode("It's").type_ids(), ElementsAre(0, 0, 0, 0, 0));
}

TEST(TokenizerPairTest, RoomForThreeSpecialTokensOrAnError) {
  EXPECT_THAT(texts_of(tokenizer().encode_pair("a b", "c", 3)),
              ElementsAre("[CLS]", "[SEP]", "[SEP]"));
  EXPECT_TRUE(tokenizer().encode_pair("a b", "c", 3).truncated);
  EXPECT_FALSE(tokenizer().encode_pair("", "", 3).truncated);
  EXPECT_THAT([] { tokenizer().encode_pair("a", "b", 2); },
              ::testing::ThrowsMessage<Error>(HasSubstr("max_length is 2; expected at least 3")));
  EXPECT_THAT([] { tokenizer().encode_pair("a", "b\xff", 8); },
              ::testing::ThrowsMessage<Error>(HasSubstr("not valid UTF-8")));
}

// ---- encoder ------------------------------------------------------------------------------------

struct GoldenPair {
  int index;
  std::vector<int32_t> ids, types;
  Tensor attentions, hidden;  // [6, 12, L, L], [7, L, 384]
};

std::vector<GoldenPair> golden_pairs_with_dumps() {
  std::vector<GoldenPair> out;
  const nlohmann::json pairs = test::read_golden_json("pairs.json")["pairs"];
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    if (!pairs[i]["dumps"].get<bool>()) continue;
    const std::string base = test::golden_dir() + "/pair_";
    const std::string n = std::to_string(i) + ".npy";
    out.push_back({static_cast<int>(i), pairs[i]["ids"].get<std::vector<int32_t>>(),
                   pairs[i]["token_type_ids"].get<std::vector<int32_t>>(),
                   read_npy(base + "attentions_" + n), read_npy(base + "hidden_" + n)});
  }
  EXPECT_FALSE(out.empty()) << "pairs.json names no pair with dumps";
  return out;
}

// Fast path (fp32) and capture run (float64 attention) with the pair's token types, every layer
// within 1e-5 of transformers' float64 run, the tolerance of the single-text goldens
// (BertEncodeTest.MatchesTransformersLayerByLayer).
TEST(BertPairTest, MatchesTransformersLayerByLayerWithTokenTypes) {
  const Minilm& m = minilm();
  for (const GoldenPair& g : golden_pairs_with_dumps()) {
    SCOPED_TRACE("golden pair " + std::to_string(g.index));
    const int64_t L = static_cast<int64_t>(g.ids.size());
    const std::vector<std::vector<int32_t>> types = {g.types};
    const Tensor last = bert_encode(m.weights, m.config, {g.ids}, {.token_types = &types});
    const double d_last =
        max_abs_diff(last.reshape({L, 384}), g.hidden.narrow(0, 6, 1).reshape({L, 384}));
    EXPECT_LE(d_last, 1e-5);

    BertCapture capture;
    bert_encode(m.weights, m.config, {g.ids}, {.capture = &capture, .token_types = &types});
    ASSERT_EQ(capture.layers.size(), 6u);
    double d_hidden = max_abs_diff(capture.embeddings.reshape({L, 384}),
                                   g.hidden.narrow(0, 0, 1).reshape({L, 384}));
    EXPECT_LE(d_hidden, 1e-5) << "embeddings";
    double d_weights = 0;
    for (int l = 0; l < 6; ++l) {
      SCOPED_TRACE("layer " + std::to_string(l));
      const AttentionCapture& c = capture.layers[static_cast<std::size_t>(l)];
      const Tensor& c_hidden = capture.hidden[static_cast<std::size_t>(l)];
      const double dw = max_abs_diff(c.weights.reshape({12, L, L}),
                                     g.attentions.narrow(0, l, 1).reshape({12, L, L}));
      const double dh =
          max_abs_diff(c_hidden.reshape({L, 384}), g.hidden.narrow(0, l + 1, 1).reshape({L, 384}));
      EXPECT_LE(dw, 1e-5);
      EXPECT_LE(dh, 1e-5);
      d_weights = std::max(d_weights, dw), d_hidden = std::max(d_hidden, dh);
    }
    std::printf(
        "pair %d (L=%lld): max |Δ| vs transformers: fp32 last hidden %.2e; capture run "
        "attention weights %.2e, hidden states %.2e\n",
        g.index, static_cast<long long>(L), d_last, d_weights, d_hidden);
  }
}

// The golden sees the token types: with B's tokens read as type 0 (what bert_encode did before
// token types) the last hidden states are far outside the 1e-5 above, so that check can fail.
TEST(BertPairTest, IgnoringTheTokenTypesFailsTheGolden) {
  const Minilm& m = minilm();
  for (const GoldenPair& g : golden_pairs_with_dumps()) {
    const int64_t L = static_cast<int64_t>(g.ids.size());
    const Tensor golden_last = g.hidden.narrow(0, 6, 1).reshape({L, 384});
    const Tensor all_zero = bert_encode(m.weights, m.config, {g.ids});
    EXPECT_GT(max_abs_diff(all_zero.reshape({L, 384}), golden_last), 1e-2) << "pair " << g.index;
    std::vector<std::vector<int32_t>> swapped = {g.types};
    for (int32_t& t : swapped[0]) t = 1 - t;
    const Tensor wrong = bert_encode(m.weights, m.config, {g.ids}, {.token_types = &swapped});
    EXPECT_GT(max_abs_diff(wrong.reshape({L, 384}), golden_last), 1e-2) << "pair " << g.index;
  }
}

// Padded batches: a pair next to a single text gives each the hidden states it gets alone.
TEST(BertPairTest, TokenTypesFollowEachSequenceInAPaddedBatch) {
  const Minilm& m = minilm();
  const Encoding pair = tokenizer().encode_pair("The animal didn't cross the street.", "It was.");
  const Encoding single = tokenizer().encode("Short.");
  const std::vector<std::vector<int32_t>> types = {single.type_ids(), pair.type_ids()};
  const Tensor batch =
      bert_encode(m.weights, m.config, {single.ids(), pair.ids()}, {.token_types = &types});
  const std::vector<std::vector<int32_t>> pair_types = {pair.type_ids()};
  const Tensor alone = bert_encode(m.weights, m.config, {pair.ids()}, {.token_types = &pair_types});
  const int64_t L = static_cast<int64_t>(pair.tokens.size());
  EXPECT_LE(max_abs_diff(batch.narrow(0, 1, 1).reshape({L, 384}), alone.reshape({L, 384})), 1e-5);
}

TEST(BertPairTest, BadTokenTypesAreNamed) {
  const Minilm& m = minilm();
  const std::vector<std::vector<int32_t>> ids = {{101, 2009, 102}};
  const std::vector<std::vector<int32_t>> two_types = {{0, 2, 0}}, short_types = {{0, 0}},
                                          no_sequences = {};
  EXPECT_THAT(
      [&] { bert_encode(m.weights, m.config, ids, {.token_types = &two_types}); },
      ::testing::ThrowsMessage<Error>(HasSubstr("token type 2 is outside the model's [0, 2)")));
  EXPECT_THAT([&] { bert_encode(m.weights, m.config, ids, {.token_types = &short_types}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("sequence 0 has 3 ids but 2 token types")));
  EXPECT_THAT(
      [&] { bert_encode(m.weights, m.config, ids, {.token_types = &no_sequences}); },
      ::testing::ThrowsMessage<Error>(HasSubstr("token_types has 0 sequences; expected 1")));
}

}  // namespace
}  // namespace qkv
