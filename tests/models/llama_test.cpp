// SmolLM2-135M-Instruct (models/llama/llama.h) against Hugging Face transformers running the same
// GGUF file's dequantized weights with its own Llama (tests/golden/make_smollm2_goldens.py): the
// logits of every position at each position's top-10 ids and 10 more, and every head's attention
// weights in three layers. Also: a KV cache run token by token gives the full run's logits, and
// RoPE is a rotation (norms kept, relative positions only). And on a tiny hand-built file
// (tiny_llama_gguf.h): every size the metadata states is checked against the tensors and the other
// sizes, each lie named by its key; what qkv does not run (experts, scaled RoPE) is refused.
#include "models/llama/llama.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <vector>

#include "core/gguf.h"
#include "core/scratch_files.h"
#include "models/model_files.h"
#include "models/tiny_llama_gguf.h"
#include "qkv/memory.h"
#include "qkv/model.h"
#include "simd_targets.h"

namespace qkv {
namespace {

struct Smol {
  LlamaConfig config;
  LlamaWeights weights;
};

const Smol& smol() {
  static const Smol model = [] {
    const GgufFile f = GgufFile::open(test::smollm2_gguf());
    Smol s;
    s.config = read_llama_config(f);
    s.weights = read_llama_weights(f, s.config);
    return s;
  }();
  return model;
}

TEST(SmolLM2, ConfigFromTheGgufMetadata) {
  const LlamaConfig& c = smol().config;
  EXPECT_EQ(c.layers, 30);
  EXPECT_EQ(c.hidden, 576);
  EXPECT_EQ(c.heads, 9);
  EXPECT_EQ(c.kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.ffn, 1536);
  EXPECT_EQ(c.vocab, 49152);
  EXPECT_DOUBLE_EQ(c.rope_base, 100000);
  EXPECT_NEAR(c.eps, 1e-5, 1e-12);
}

// Logits within 1e-3 relative to the logit scale of the position, attention weights within 1e-4
// (issue 14's bounds): float32 through 30 layers, two implementations.
// The decoder's goldens on every SIMD target compiled in (tests/simd_targets.h): its matrix
// products and fused attention dispatch there.
QKV_PER_SIMD_TARGET(SmolLM2Simd);

TEST_P(SmolLM2Simd, LogitsAndAttentionMatchTransformers) {
  const nlohmann::json golden = test::read_golden_json("forward.json", "smollm2");
  for (const nlohmann::json& text : golden["texts"]) {
    SCOPED_TRACE(text["text"].get<std::string>());
    const auto ids = text["ids"].get<std::vector<int32_t>>();
    const auto n = static_cast<int64_t>(ids.size());
    KvCache cache;
    std::vector<AttentionCapture> capture;
    const Tensor logits =
        llama_forward(smol().weights, smol().config, ids, cache, {.capture = &capture});
    ASSERT_EQ(logits.shape(), (Shape{n, 49152}));
    double worst = 0;
    for (int64_t p = 0; p < n; ++p) {
      const nlohmann::json& g = text["positions"][static_cast<std::size_t>(p)];
      double scale = 0;
      for (const nlohmann::json& x : g["logits"])
        scale = std::max(scale, std::abs(x.get<double>()));
      for (std::size_t i = 0; i < g["ids"].size(); ++i) {
        const double ours = logits.at<float>(p, g["ids"][i].get<int64_t>());
        worst = std::max(worst, std::abs(ours - g["logits"][i].get<double>()) / scale);
      }
    }
    EXPECT_LE(worst, 1e-3) << "logits, relative to each position's largest";
    for (const auto& [layer, heads] : text["attention"].items()) {
      const Tensor& w = capture[static_cast<std::size_t>(std::stoi(layer))].weights;
      ASSERT_EQ(w.shape(), (Shape{1, 9, n, n}));
      double d = 0;
      for (int64_t h = 0; h < 9; ++h)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < n; ++j)
            d = std::max(d, std::abs(w.at<float>(0, h, i, j) - heads[h][i][j].get<double>()));
      EXPECT_LE(d, 1e-4) << "attention weights, layer " << layer;
    }
  }
}

TEST_P(SmolLM2Simd, CacheTokenByTokenGivesTheSameLogits) {
  const std::vector<int32_t> ids{504, 3575, 282, 4649, 314};
  KvCache whole;
  const Tensor all = llama_forward(smol().weights, smol().config, ids, whole);
  KvCache step;
  double d = 0, scale = 0;
  for (std::size_t t = 0; t < ids.size(); ++t) {
    const Tensor one = llama_forward(smol().weights, smol().config, {ids[t]}, step);
    for (int64_t v = 0; v < 49152; ++v) {
      d = std::max(
          d, double{std::abs(one.at<float>(0, v) - all.at<float>(static_cast<int64_t>(t), v))});
      scale = std::max(scale, double{std::abs(all.at<float>(static_cast<int64_t>(t), v))});
    }
  }
  EXPECT_EQ(step.length, 5);
  EXPECT_LE(d, 1e-4 * scale);
}

TEST_P(SmolLM2Simd, LastLogitsOnlyIsTheLastRowOfAll) {
  const std::vector<int32_t> ids{504, 3575, 282, 4649, 314};
  KvCache whole, last;
  const Tensor all = llama_forward(smol().weights, smol().config, ids, whole);
  const Tensor one =
      llama_forward(smol().weights, smol().config, ids, last, {.last_logits_only = true});
  ASSERT_EQ(one.shape(), (Shape{1, 49152}));
  EXPECT_EQ(last.length, 5);
  // The same row; a matrix product of one row may take another BLAS kernel than one of five, so
  // the last bits may differ (docs/CONVENTIONS.md §3), nothing more.
  double d = 0, scale = 0;
  for (int64_t v = 0; v < 49152; ++v) {
    d = std::max(d, double{std::abs(one.at<float>(0, v) - all.at<float>(4, v))});
    scale = std::max(scale, double{std::abs(all.at<float>(4, v))});
  }
  EXPECT_LE(d, 1e-5 * scale);
}

// RoPE of a 4-dimensional head at `start`, base 10000, with the given pairing.
void rope(Tensor& x, int64_t start, RopePairing pairing = RopePairing::adjacent) {
  LlamaConfig c;
  c.head_dim = c.rope_dims = 4;
  c.rope_pairing = pairing;
  rope(x, rope_table(c, LlamaWeights{}, 0, start, x.dim(2)));
}

TEST(SmolLM2, RopeRotatesPairsAndScoresDependOnRelativePosition) {
  Tensor q = Tensor::from({1, 1, 1, 4}, {1.0f, 2.0f, -3.0f, 0.5f});
  Tensor k = Tensor::from({1, 1, 1, 4}, {0.5f, -1.0f, 2.0f, 1.0f});
  const auto dot = [](const Tensor& a, const Tensor& b) {
    double s = 0;
    for (int64_t i = 0; i < 4; ++i) s += double{a.data<float>()[i]} * b.data<float>()[i];
    return s;
  };
  Tensor q7 = q.clone(), k3 = k.clone(), q12 = q.clone(), k8 = k.clone();
  rope(q7, 7), rope(k3, 3), rope(q12, 12), rope(k8, 8);
  EXPECT_NEAR(dot(q7, k3), dot(q12, k8), 1e-5);  // both 4 apart
  EXPECT_NEAR(dot(q7, q7), dot(q, q), 1e-5);     // a rotation keeps the norm
  // Position 1, pair 0 turns by 1 radian: (1, 2) → (cos 1 − 2 sin 1, sin 1 + 2 cos 1).
  Tensor p = q.clone();
  rope(p, 1);
  EXPECT_NEAR(p.data<float>()[0], std::cos(1.0) - 2 * std::sin(1.0), 1e-6);
  EXPECT_NEAR(p.data<float>()[1], std::sin(1.0) + 2 * std::cos(1.0), 1e-6);
  // NeoX's pairing (Qwen, Gemma) turns dimensions 0 and 2 together: (1, −3) by 1 radian.
  Tensor h = q.clone();
  rope(h, 1, RopePairing::halves);
  EXPECT_NEAR(h.data<float>()[0], std::cos(1.0) + 3 * std::sin(1.0), 1e-6);
  EXPECT_NEAR(h.data<float>()[2], std::sin(1.0) - 3 * std::cos(1.0), 1e-6);
}

// ---- the tiny model's metadata, true and lying ----

using test::gguf_f32;
using test::gguf_str;
using test::gguf_u32;
using test::gguf_u64;
using test::GgufValue;
using test::TinyLlamaGguf;
using ::testing::HasSubstr;

LlamaConfig tiny_config(const TinyLlamaGguf& g) {
  return read_llama_config(GgufFile::parse(g.bytes(), "tiny.gguf"));
}

// The message of the qkv::Error (Kind::runtime, as every fault of a file's content) that reading
// the config of `g` throws.
std::string config_error(const TinyLlamaGguf& g) {
  try {
    tiny_config(g);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::runtime) << e.what();
    return e.what();
  }
  return "(no error)";
}

TEST(TinyLlama, ConfigAndWeightsOfTheTrueFile) {
  const TinyLlamaGguf g = test::tiny_llama_gguf();
  const GgufFile f = GgufFile::parse(g.bytes(), "tiny.gguf");
  const LlamaConfig c = read_llama_config(f);
  EXPECT_EQ(c.layers, 2);
  EXPECT_EQ(c.hidden, 16);
  EXPECT_EQ(c.heads, 4);
  EXPECT_EQ(c.kv_heads, 2);
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_EQ(c.ffn, 24);
  EXPECT_EQ(c.vocab, 40);
  EXPECT_EQ(c.context, 32);
  const LlamaWeights w = read_llama_weights(f, c);
  EXPECT_EQ(w.layers.size(), 2u);
  EXPECT_EQ(llama_dense(w.embedding).shape(), (Shape{40, 16}));
  // The file's own values: the builder's first pseudo-random number, at [0, 0].
  EXPECT_EQ(llama_dense(w.embedding).at<float>(0, 0), g.tensors[0].values[0]);
}

// rope.dimension_count turns the first dimensions of each head (partial rotary); more than the
// head, or an odd count, is refused (qkv took 0 and 65 of 64 and rotated whole heads). A head
// wider than hidden / heads (attention.key_length: Mistral Nemo, Qwen 3) must match the tensors.
TEST(TinyLlama, RopeDimensionsAreAnEvenPartOfTheHead) {
  const std::string expected =
      "; expected an even number up to the head dimension 4 (llama.embedding_length 16 / 4 heads)";
  EXPECT_EQ(config_error(test::tiny_llama_gguf().set("llama.rope.dimension_count", gguf_u32(0))),
            "tiny.gguf: metadata \"llama.rope.dimension_count\" is 0; expected a positive integer");
  for (const uint32_t dims : {5u, 16u})
    EXPECT_EQ(
        config_error(test::tiny_llama_gguf().set("llama.rope.dimension_count", gguf_u32(dims))),
        "tiny.gguf: metadata \"llama.rope.dimension_count\" is " + std::to_string(dims) + expected);
  EXPECT_EQ(tiny_config(test::tiny_llama_gguf().set("llama.rope.dimension_count", gguf_u32(2)))
                .rope_dims,
            2);
  EXPECT_EQ(config_error(test::tiny_llama_gguf().set("llama.attention.key_length", gguf_u32(8))),
            "tiny.gguf: tensor \"blk.0.attn_q.weight\" is [16, 16], but llama.attention.head_count "
            "4 × llama.attention.key_length 8 makes 32 rows; the metadata and the tensors "
            "disagree");
  // Absent, the head dimension is used, as llama.cpp does.
  EXPECT_EQ(tiny_config(test::tiny_llama_gguf().erase("llama.rope.dimension_count")).rope_dims, 4);
}

// A block count of 2·10⁹ said "expected a positive integer"; 1 of 2 ran half the model.
TEST(TinyLlama, BlockCountIsCheckedAgainstTheBlocksTheTensorsHold) {
  const auto with = [](GgufValue v) {
    return config_error(test::tiny_llama_gguf().set("llama.block_count", std::move(v)));
  };
  const std::string held = "the file's tensors hold 2 blocks (blk.0 … blk.1); expected 2";
  EXPECT_EQ(with(gguf_u32(2000000000)),
            "tiny.gguf: metadata \"llama.block_count\" is 2000000000, too large: " + held);
  EXPECT_EQ(
      with(gguf_u64(std::numeric_limits<uint64_t>::max())),
      "tiny.gguf: metadata \"llama.block_count\" is 18446744073709551615, too large: " + held);
  EXPECT_EQ(with(gguf_u32(1)),
            "tiny.gguf: metadata \"llama.block_count\" is 1, too small: " + held);
  EXPECT_EQ(with(gguf_u32(0)),
            "tiny.gguf: metadata \"llama.block_count\" is 0; expected a positive integer; " +
                std::string("the file's tensors hold 2 blocks (blk.0 … blk.1)"));
  EXPECT_EQ(with(gguf_f32(NAN)),
            "tiny.gguf: metadata \"llama.block_count\" is NaN; expected a positive integer; "
            "the file's tensors hold 2 blocks (blk.0 … blk.1)");
}

TEST(TinyLlama, EverySizeIsCheckedAgainstTheTensorsAndTheOthers) {
  const auto with = [](const std::string& key, GgufValue v) {
    return config_error(test::tiny_llama_gguf().set(key, std::move(v)));
  };
  EXPECT_EQ(with("llama.embedding_length", gguf_u32(32)),
            "tiny.gguf: tensor \"token_embd.weight\" is [40, 16], but llama.embedding_length 32 "
            "and the 40 tokens of tokenizer.ggml.tokens make [40, 32]; the metadata and the "
            "tensors disagree");
  EXPECT_EQ(with("llama.embedding_length", gguf_u32(18)),
            "tiny.gguf: llama.attention.head_count 4 does not divide llama.embedding_length 18; "
            "expected whole heads");
  EXPECT_EQ(with("llama.attention.head_count", gguf_u32(16)),
            "tiny.gguf: the head dimension 1 (llama.embedding_length 16 / 16 heads) is odd; RoPE "
            "rotates pairs of dimensions");
  EXPECT_EQ(with("llama.attention.head_count_kv", gguf_u32(3)),
            "tiny.gguf: llama.attention.head_count_kv 3 does not divide "
            "llama.attention.head_count 4; expected a whole number of query heads per key/value "
            "head");
  EXPECT_EQ(with("llama.attention.head_count_kv", gguf_u32(1)),
            "tiny.gguf: tensor \"blk.0.attn_k.weight\" is [8, 16], but "
            "llama.attention.head_count_kv 1 × the head dimension 4 (llama.embedding_length 16 / "
            "4 heads) makes 4 rows; the metadata and the tensors disagree");
  EXPECT_EQ(with("llama.feed_forward_length", gguf_u32(25)),
            "tiny.gguf: tensor \"blk.0.ffn_up.weight\" is [24, 16], but "
            "llama.feed_forward_length 25 makes 25 rows; the metadata and the tensors disagree");
  EXPECT_EQ(with("llama.vocab_size", gguf_u32(99)),
            "tiny.gguf: metadata \"llama.vocab_size\" is 99; expected the 40 tokens of "
            "tokenizer.ggml.tokens");
  EXPECT_EQ(with("llama.context_length", gguf_u32(0)),
            "tiny.gguf: metadata \"llama.context_length\" is 0; expected a positive integer");
  EXPECT_EQ(with("llama.context_length", gguf_u64(uint64_t{1} << 40)),
            "tiny.gguf: metadata \"llama.context_length\" is 1099511627776, too large; expected "
            "at most 16777216");
  EXPECT_EQ(with("llama.attention.head_count", gguf_str("4")),
            "tiny.gguf: metadata \"llama.attention.head_count\" is \"4\"; expected a positive "
            "integer");
  // A NaN was shown as JSON shows it: "is null".
  EXPECT_EQ(with("llama.rope.freq_base", gguf_f32(NAN)),
            "tiny.gguf: metadata \"llama.rope.freq_base\" is NaN; expected a positive number");
  EXPECT_EQ(with("llama.attention.layer_norm_rms_epsilon", gguf_f32(-INFINITY)),
            "tiny.gguf: metadata \"llama.attention.layer_norm_rms_epsilon\" is -inf; expected a "
            "positive number");
  EXPECT_EQ(with("general.architecture", gguf_str("mamba")),
            "tiny.gguf: architecture \"mamba\", which qkv does not run; expected one of llama, qwen2, "
            "qwen3, gemma3");
}

// Files qkv would run as another model than they describe: refused, each said.
TEST(TinyLlama, WhatTheForwardPassDoesNotDoIsRefused) {
  EXPECT_EQ(config_error(test::tiny_llama_gguf().set("llama.expert_count", gguf_u32(8))),
            "tiny.gguf: metadata \"llama.expert_count\" is 8: a mixture of experts, which qkv "
            "does not run; expected a dense model");
  EXPECT_EQ(config_error(test::tiny_llama_gguf().set("llama.rope.scaling.type", gguf_str("yarn"))),
            "tiny.gguf: metadata \"llama.rope.scaling.type\" is \"yarn\": RoPE scaling qkv does not "
            "apply; expected none, linear, or Llama 3.1's rope_freqs.weight");
  // Llama 3.1's factors are read (tests/models/gguf_families_test.cpp runs them), of their shape.
  TinyLlamaGguf freqs = test::tiny_llama_gguf();
  freqs.tensors.push_back({"rope_freqs.weight", {2}, {1.0f, 1.0f}});
  EXPECT_TRUE(tiny_config(freqs).rope_factors);
  freqs.tensors.back() = {"rope_freqs.weight", {3}, {1.0f, 1.0f, 1.0f}};
  EXPECT_EQ(config_error(freqs),
            "tiny.gguf: tensor \"rope_freqs.weight\" is [3]; expected [2] for this config");
  // A factor without a type, or beside "none", scales linearly, as llama.cpp has it; NaN is
  // refused.
  EXPECT_EQ(tiny_config(test::tiny_llama_gguf().set("llama.rope.scaling.factor", gguf_f32(2)))
                .rope_scale,
            2);
  EXPECT_EQ(tiny_config(test::tiny_llama_gguf()
                            .set("llama.rope.scaling.type", gguf_str("none"))
                            .set("llama.rope.scaling.factor", gguf_f32(4)))
                .rope_scale,
            4);
  EXPECT_EQ(config_error(test::tiny_llama_gguf().set("llama.rope.scaling.factor", gguf_f32(NAN))),
            "tiny.gguf: metadata \"llama.rope.scaling.factor\" is NaN; expected a positive number");
  // Present but neutral: accepted.
  EXPECT_EQ(tiny_config(test::tiny_llama_gguf()
                            .set("llama.expert_count", gguf_u32(0))
                            .set("llama.rope.scaling.type", gguf_str("none"))
                            .set("llama.rope.scaling.factor", gguf_f32(1)))
                .layers,
            2);
}

// A tensor no layer reads ("zzz.weight", a bias) was accepted and the model generated without it;
// llama.cpp refuses a file whose tensors are not the ones its architecture creates.
TEST(TinyLlama, ATensorTheDecoderDoesNotReadIsRefused) {
  const auto with = [](test::GgufTensor t) {
    TinyLlamaGguf g = test::tiny_llama_gguf();
    g.tensors.push_back(std::move(t));
    return config_error(g);
  };
  const std::string expected =
      " that a llama decoder of 2 layers does not have; expected only the tensors of its layers "
      "(token_embd, blk.0 … blk.1, output_norm, output)";
  EXPECT_EQ(with({"zzz.weight", {4}, {}}),
            "tiny.gguf: it holds a tensor \"zzz.weight\"" + expected);
  EXPECT_EQ(with({"blk.1.attn_qkv.weight", {16, 32}, {}}),
            "tiny.gguf: it holds a tensor \"blk.1.attn_qkv.weight\"" + expected);
  EXPECT_EQ(with({"blk.0.attn_q.bias", {16}, {}}),
            "tiny.gguf: tensor \"blk.0.attn_q.bias\" is a bias, which a llama decoder does not "
            "add; expected a llama model without it");
  // A block beyond llama.block_count is named by the count.
  EXPECT_EQ(with({"blk.5.attn_q.weight", {16, 16}, {}}),
            "tiny.gguf: metadata \"llama.block_count\" is 2, too small: the file's tensors hold 6 "
            "blocks (blk.0 … blk.5); expected 6");
  // One layer: said in the singular.
  TinyLlamaGguf one = test::zero_llama_gguf(1, 16, 4, 2, 24);
  one.tensors.push_back({"zzz.weight", {4}, {}});
  EXPECT_EQ(config_error(one),
            "tiny.gguf: it holds a tensor \"zzz.weight\" that a llama decoder of 1 layer does not "
            "have; expected only the tensors of its layers (token_embd, blk.0, output_norm, "
            "output)");
  // output.weight, the one optional tensor qkv reads, is no extra.
  TinyLlamaGguf untied = test::tiny_llama_gguf();
  untied.tensors.push_back({"output.weight", {16, 40}, {}});
  EXPECT_FALSE(tiny_config(untied).tied_output);
}

// ---- the tiny model loaded and run (CausalLM: the tokenizer, the special ids, generation) ----

// The message of the qkv::Error that loading `g` (written to a scratch file) throws.
std::string load_error(const TinyLlamaGguf& g) {
  const test::ScratchDir dir("qkv-tiny-llama");
  try {
    CausalLM::load(g.write(dir.path("tiny.gguf")));
  } catch (const Error& e) {
    const std::string m = e.what();
    return m.substr(m.find("tiny.gguf"));
  }
  return "(no error)";
}

// Without merges every text fell apart into bytes ("19" → "1", "9") and generation went on.
TEST(TinyLlama, ABpeVocabularyWithoutMergesIsRefused) {
  EXPECT_EQ(load_error(test::tiny_llama_gguf().erase("tokenizer.ggml.merges")),
            "tiny.gguf: no metadata \"tokenizer.ggml.merges\"; a BPE vocabulary "
            "(tokenizer.ggml.model \"gpt2\") needs its merges");
  EXPECT_EQ(
      load_error(test::tiny_llama_gguf().set("tokenizer.ggml.merges", test::gguf_strings({}))),
      "tiny.gguf: metadata \"tokenizer.ggml.merges\" is an array of 0 items; a BPE "
      "vocabulary (tokenizer.ggml.model \"gpt2\") needs its merges");
  EXPECT_EQ(load_error(test::tiny_llama_gguf()), "(no error)");
}

// Tokens stored as integers said "the tokenizer's metadata: [json.exception.type_error.302] type
// must be string, but is number", naming neither the key nor what was expected.
TEST(TinyLlama, TokenizerArraysOfAnotherTypeAreNamed) {
  std::vector<int32_t> ids(40);
  for (int32_t i = 0; i < 40; ++i) ids[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(
      load_error(test::tiny_llama_gguf().set("tokenizer.ggml.tokens", test::gguf_i32s(ids))),
      "tiny.gguf: metadata \"tokenizer.ggml.tokens\" is an array of 40 integers; expected the "
      "vocabulary, an array of strings");
  EXPECT_EQ(
      load_error(test::tiny_llama_gguf().set("tokenizer.ggml.merges", test::gguf_i32s({1, 2}))),
      "tiny.gguf: metadata \"tokenizer.ggml.merges\" is an array of 2 integers; expected the "
      "merges, an array of strings (\"left right\")");
  const std::string types =
      "; expected an array of integers (llama.cpp's token types: 0 undefined, 1 normal, 2 "
      "unknown, 3 control, 4 user-defined, 5 unused, 6 byte)";
  EXPECT_EQ(
      load_error(test::tiny_llama_gguf().set(
          "tokenizer.ggml.token_type", test::gguf_strings(std::vector<std::string>(40, "normal")))),
      "tiny.gguf: metadata \"tokenizer.ggml.token_type\" is an array of 40 strings" + types);
  using test::gguf_detail::le;
  const std::string floats = le<uint32_t>(6) + le<uint64_t>(1) + le(1.0f);
  EXPECT_EQ(
      load_error(test::tiny_llama_gguf().set("tokenizer.ggml.token_type", GgufValue{9, floats})),
      "tiny.gguf: metadata \"tokenizer.ggml.token_type\" is an array of 1 number" + types);
  EXPECT_EQ(load_error(test::tiny_llama_gguf().set("tokenizer.ggml.token_type", gguf_u32(1))),
            "tiny.gguf: metadata \"tokenizer.ggml.token_type\" is 1" + types);
}

// A token type of 99 or −5, none of llama.cpp's, was taken as a normal token.
TEST(TinyLlama, TokenTypesOutsideLlamaCppsAreRefused) {
  const auto with_type = [](std::size_t id, int32_t type) {
    std::vector<int32_t> types(40, 1);
    types[0] = types[1] = types[2] = 3;
    types[id] = type;
    return load_error(
        test::tiny_llama_gguf().set("tokenizer.ggml.token_type", test::gguf_i32s(types)));
  };
  const std::string known =
      "; expected 0 to 6 (llama.cpp's token types: 0 undefined, 1 normal, 2 unknown, 3 control, 4 "
      "user-defined, 5 unused, 6 byte)";
  EXPECT_EQ(with_type(5, 99),
            "tiny.gguf: metadata \"tokenizer.ggml.token_type\" gives token 5 (\"c\") the type 99" +
                known);
  EXPECT_EQ(with_type(2, -5),
            "tiny.gguf: metadata \"tokenizer.ggml.token_type\" gives token 2 (\"<|im_end|>\") the "
            "type -5" +
                known);
  EXPECT_EQ(with_type(39, 7),
            "tiny.gguf: metadata \"tokenizer.ggml.token_type\" gives token 39 (\"an\") the type 7" +
                known);
  // Unsigned, as a writer may store them: 4,294,967,295 is no type either.
  using test::gguf_detail::le;
  std::string u32s = le<uint32_t>(4) + le<uint64_t>(40);
  for (int i = 0; i < 40; ++i) u32s += le<uint32_t>(i == 0 ? 4294967295u : 1u);
  EXPECT_EQ(
      load_error(test::tiny_llama_gguf().set("tokenizer.ggml.token_type", GgufValue{9, u32s})),
      "tiny.gguf: metadata \"tokenizer.ggml.token_type\" gives token 0 (\"<|endoftext|>\") the "
      "type 4294967295" +
          known);
  // Every type llama.cpp knows is accepted.
  for (int32_t type = 0; type <= 6; ++type) EXPECT_EQ(with_type(5, type), "(no error)") << type;
}

// An end-of-text id of 1,000,000 in a vocabulary of 40 never matched a token: --chat went on past
// the answer's end and printed "<|im_end|>\n<|im_start|>user" as text.
TEST(TinyLlama, EverySpecialTokenIdMustBeInTheVocabulary) {
  const std::string range = "; expected a token id from 0 to 39 (the vocabulary holds 40 tokens)";
  EXPECT_EQ(
      load_error(test::tiny_llama_gguf().set("tokenizer.ggml.eos_token_id", gguf_u32(1000000))),
      "tiny.gguf: metadata \"tokenizer.ggml.eos_token_id\" is 1000000" + range);
  EXPECT_EQ(load_error(test::tiny_llama_gguf().set("tokenizer.ggml.eos_token_id", gguf_u32(40))),
            "tiny.gguf: metadata \"tokenizer.ggml.eos_token_id\" is 40" + range);
  EXPECT_EQ(
      load_error(test::tiny_llama_gguf().set("tokenizer.ggml.bos_token_id", test::gguf_i32(-5))),
      "tiny.gguf: metadata \"tokenizer.ggml.bos_token_id\" is -5" + range);
  EXPECT_EQ(
      load_error(test::tiny_llama_gguf().set("tokenizer.ggml.unknown_token_id", gguf_str("0"))),
      "tiny.gguf: metadata \"tokenizer.ggml.unknown_token_id\" is \"0\"" + range);
  EXPECT_EQ(load_error(test::tiny_llama_gguf().set("tokenizer.ggml.eot_token_id", gguf_f32(NAN))),
            "tiny.gguf: metadata \"tokenizer.ggml.eot_token_id\" is NaN" + range);
  // The last id is in range.
  EXPECT_EQ(load_error(test::tiny_llama_gguf().set("tokenizer.ggml.eos_token_id", gguf_u32(39))),
            "(no error)");
}

CausalLM load_tiny(const test::ScratchDir& dir, const TinyLlamaGguf& g) {
  return CausalLM::load(g.write(dir.path("tiny.gguf")));
}

// Weights that load (each finite) but overflow float32 when multiplied out: argmax over NaN
// logits chose id 0 every time, and generation printed <|endoftext|> as text.
TEST(TinyLlama, GenerationRefusesNonFiniteLogits) {
  const test::ScratchDir dir("qkv-tiny-llama");
  TinyLlamaGguf g = test::tiny_llama_gguf();
  g.tensor("output_norm.weight").values.assign(16, 3e38f);
  const CausalLM m = load_tiny(dir, g);
  int tokens = 0;
  try {
    m.generate({5, 6, 7}, {.max_tokens = 3}, [&](int32_t) { ++tokens; });
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::runtime);
    EXPECT_THAT(e.what(), ::testing::MatchesRegex(
                              "the next-token logits of the prompt came out (NaN|\\+∞|−∞); the "
                              "model computes non-finite numbers \\(its weights overflow "
                              "float32 or are corrupt\\), so there is no next token to choose"));
  }
  EXPECT_EQ(tokens, 0);
}

// The context (32 positions here) ends generation: as many tokens as fit after the prompt.
TEST(TinyLlama, GenerationStopsWhereTheContextIsFull) {
  const test::ScratchDir dir("qkv-tiny-llama");
  // No end-of-text token: nothing else can stop it early.
  const CausalLM m = load_tiny(dir, test::tiny_llama_gguf().erase("tokenizer.ggml.eos_token_id"));
  EXPECT_EQ(m.generate({5, 6, 7, 8, 9}, {.max_tokens = 40}).size(), 27u);
  EXPECT_EQ(m.generate(std::vector<int32_t>(32, 5), {.max_tokens = 40}).size(), 0u);
  EXPECT_EQ(m.generate({5, 6, 7, 8, 9}, {.max_tokens = 4}).size(), 4u);
  try {
    m.generate(std::vector<int32_t>(33, 5), {.max_tokens = 1});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    EXPECT_STREQ(e.what(),
                 "generate: the prompt is 33 tokens; the model reads at most 32 (its context "
                 "length)");
  }
}

// What the weights take in memory is known from the header alone, so that a model too large for
// its limit is refused before a weight is read: the count must be what the loaded weights hold.
int64_t matrix_bytes(const LlamaMatrix& m) {
  if (!m.quantized()) return nn::resident_bytes(m.dense);
  return static_cast<int64_t>(m.blocks.data->size()) +
         (m.bias.defined() ? tensor_bytes(m.bias) : 0);
}
int64_t held_bytes(const LlamaWeights& w) {
  int64_t bytes = matrix_bytes(w.embedding) + tensor_bytes(w.output_norm) + matrix_bytes(w.output);
  const bool tied = w.output.quantized()
                        ? w.output.blocks.data == w.embedding.blocks.data
                        : w.output.dense.weight.data<float>() == w.embedding.dense.weight.data<float>();
  if (tied) bytes -= matrix_bytes(w.output);  // the embedding, counted once
  for (const LlamaLayer& l : w.layers) {
    bytes += tensor_bytes(l.attn_norm) + tensor_bytes(l.ffn_norm);
    for (const LlamaMatrix* m : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down})
      bytes += matrix_bytes(*m);
  }
  return bytes;
}

TEST(TinyLlama, WeightBytesFromTheHeaderAreWhatTheLoadedWeightsHold) {
  TinyLlamaGguf untied = test::tiny_llama_gguf();
  untied.tensors.push_back({"output.weight", {16, 40}, std::vector<float>(640, 0.5f)});
  for (const TinyLlamaGguf& g : {test::tiny_llama_gguf(), untied}) {
    const GgufFile f = GgufFile::parse(g.bytes(), "tiny.gguf");
    const LlamaConfig c = read_llama_config(f);
    EXPECT_EQ(c.tied_output, g.tensors.size() == test::tiny_llama_gguf().tensors.size());
    for (const WeightFormat format : {WeightFormat::file, WeightFormat::float32})
      EXPECT_EQ(llama_weight_bytes(f, c, format), held_bytes(read_llama_weights(f, c, format)));
  }
}

// SmolLM2's Q4_1 file: 94 MB of blocks as the file keeps them (the norms in float32), or 8 bytes
// a parameter dequantized and packed.
TEST(SmolLM2Llama, WeightBytesFromTheHeaderAreWhatTheLoadedWeightsHold) {
  const GgufFile f = GgufFile::open(test::smollm2_gguf());
  const LlamaConfig c = read_llama_config(f);
  EXPECT_TRUE(c.tied_output);
  for (const WeightFormat format : {WeightFormat::file, WeightFormat::float32})
    EXPECT_EQ(llama_weight_bytes(f, c, format), held_bytes(read_llama_weights(f, c, format)));
  const int64_t blocks = llama_weight_bytes(f, c, WeightFormat::file);
  EXPECT_GT(blocks, 80e6);
  EXPECT_LT(blocks, static_cast<double>(std::filesystem::file_size(test::smollm2_gguf())));
}

// CausalLM::open reads the header, the tokenizer and the template: a model whose weights are
// broken still opens (tokenize works, the memory estimates are there); load_weights then names the
// fault. Nothing runs on weights not loaded.
TEST(TinyLlama, OpenReadsNoWeight) {
  const test::ScratchDir dir("qkv-tiny-llama");
  TinyLlamaGguf g = test::tiny_llama_gguf();
  g.tensor("blk.1.ffn_down.weight").values[5] = NAN;
  CausalLM m = CausalLM::open(g.write(dir.path("tiny.gguf")));
  EXPECT_EQ(m.tokenize("hello the"), (std::vector<int32_t>{37, 35}));
  EXPECT_GT(m.generate_bytes(8), m.load_bytes());
  EXPECT_GT(m.load_bytes(), m.resident_bytes());
  EXPECT_THAT([&] { m.generate({5}, {.max_tokens = 1}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("its weights are not loaded")));
  EXPECT_THAT([&] { m.load_weights(); },
              ::testing::ThrowsMessage<Error>(HasSubstr("\"blk.1.ffn_down.weight\"")));
  // A tensor the config needs that is missing, or of another shape, is found by open.
  TinyLlamaGguf missing = test::tiny_llama_gguf();
  std::erase_if(missing.tensors,
                [](const test::GgufTensor& t) { return t.name == "blk.1.attn_v.weight"; });
  EXPECT_THAT([&] { CausalLM::open(missing.write(dir.path("missing.gguf"))); },
              ::testing::ThrowsMessage<Error>(HasSubstr("no tensor \"blk.1.attn_v.weight\"")));
}

// The tiny vocabulary spells a–z, space, newline and '.': "hello, Q!" was read as "hello", " ",
// the rest dropped without a word, and the model answered another text.
TEST(TinyLlama, TokenizeRefusesACharacterTheVocabularyCannotSpell) {
  const test::ScratchDir dir("qkv-tiny-llama");
  const CausalLM m = CausalLM::open(test::tiny_llama_gguf().write(dir.path("tiny.gguf")));
  const auto error = [&](std::string_view text) {
    try {
      m.tokenize(text);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string lacks =
      " has no token in this model's vocabulary (it lacks 227 of the 256 byte tokens); expected "
      "only characters the vocabulary can spell";
  EXPECT_EQ(error("hello, Q!"), "the text's character ',' (byte 0x2c)" + lacks);
  EXPECT_EQ(error("hello Q"), "the text's character 'Q' (byte 0x51)" + lacks);
  EXPECT_EQ(error("caf\u00e9"), "the text's character '\u00e9' (bytes 0xc3 0xa9)" + lacks);
  // What it spells, and its special tokens, whose characters it need not spell.
  EXPECT_EQ(m.tokenize("hello the"), (std::vector<int32_t>{37, 35}));
  EXPECT_EQ(m.tokenize("<|im_start|>hello<|im_end|>\n"), (std::vector<int32_t>{1, 37, 2, 30}));
}

// A ChatML template over a vocabulary without <|im_start|> and <|im_end|> as control tokens framed
// the prompt with markers the tokenizer split into characters: the model read no turns.
TEST(TinyLlama, ChatPromptNeedsChatMLMarkersAsControlTokens) {
  const test::ScratchDir dir("qkv-tiny-llama");
  const auto chat_error = [&](const TinyLlamaGguf& g) {
    try {
      CausalLM::open(g.write(dir.path("tiny.gguf"))).chat_prompt("hello");
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::runtime);
      const std::string m = e.what();
      return m.substr(m.find("tiny.gguf"));
    }
    return std::string("(no error)");
  };
  const auto with_tokens = [](const std::string& start, const std::string& end) {
    std::vector<std::string> tokens = test::tiny_llama_tokens();
    tokens[1] = start;
    tokens[2] = end;
    return test::tiny_llama_gguf().set("tokenizer.ggml.tokens", test::gguf_strings(tokens));
  };
  const std::string missing =
      " but its vocabulary has no such token; expected ChatML's markers <|im_start|> and "
      "<|im_end|> as control tokens of its vocabulary";
  EXPECT_EQ(chat_error(with_tokens("<|xx_start|>", "<|xx_end|>")),
            "tiny.gguf: its chat template uses <|im_start|>" + missing);
  EXPECT_EQ(chat_error(with_tokens("<|im_start|>", "<|xx_end|>")),
            "tiny.gguf: its chat template uses <|im_end|>" + missing);
  std::vector<int32_t> normal(40, 1);
  normal[2] = 3;
  EXPECT_EQ(
      chat_error(test::tiny_llama_gguf().set("tokenizer.ggml.token_type", test::gguf_i32s(normal))),
      "tiny.gguf: its chat template uses <|im_start|> but its vocabulary has it as a normal token "
      "(id 1, type 1), which a text spells in characters; expected a control token "
      "(tokenizer.ggml.token_type 3)");
  // The true file: the markers are tokens of their own.
  const CausalLM m = CausalLM::open(test::tiny_llama_gguf().write(dir.path("true.gguf")));
  EXPECT_EQ(m.tokenize(m.chat_prompt("hello")),
            (std::vector<int32_t>{1, 23, 21, 7, 20, 30, 37, 2, 30, 1, 3, 21, 21, 11, 21, 22, 39, 22,
                                  30}));
}

// As llama.cpp: the stated end-of-text, end-of-turn and end-of-message ids end generation, and so
// does any token spelled as an end marker; a control token's text is never generated text.
TEST(TinyLlama, EndMarkersEndGenerationAndControlTokensAreNotText) {
  const test::ScratchDir dir("qkv-tiny-llama");
  // tiny_llama_tokens: 0 <|endoftext|>, 1 <|im_start|>, 2 <|im_end|> (control), 3 "a" …
  const CausalLM m =
      load_tiny(dir, test::tiny_llama_gguf().set("tokenizer.ggml.eot_token_id", gguf_u32(3)));
  EXPECT_TRUE(m.ends_generation(0));   // by its text
  EXPECT_FALSE(m.ends_generation(1));  // control, but no end
  EXPECT_TRUE(m.ends_generation(2));   // the stated eos, and by its text
  EXPECT_TRUE(m.ends_generation(3));   // the stated eot
  EXPECT_FALSE(m.ends_generation(4));
  EXPECT_EQ(m.generated_text(0), "");
  EXPECT_EQ(m.generated_text(1), "");
  EXPECT_EQ(m.token_text(1), "<|im_start|>");  // the token itself, as tokenize shows it
  EXPECT_EQ(m.generated_text(4), "b");
  // Zero weights: every logit 0, greedy picks id 0, <|endoftext|>, which ends the text at once;
  // with stop_at_eos off (benchmarks) it is generated like any other.
  const test::ScratchDir zero_dir("qkv-tiny-llama");
  const CausalLM zero = load_tiny(zero_dir, test::zero_llama_gguf(2, 16, 4, 2, 24));
  std::vector<int32_t> seen;
  EXPECT_TRUE(
      zero.generate({5, 6}, {.max_tokens = 3}, [&](int32_t id) { seen.push_back(id); }).empty());
  EXPECT_TRUE(seen.empty());
  EXPECT_EQ(zero.generate({5, 6}, {.max_tokens = 3, .stop_at_eos = false}),
            (std::vector<int32_t>{0, 0, 0}));
}

}  // namespace
}  // namespace qkv
