// SmolLM2-135M-Instruct (models/llama/llama.h) against Hugging Face transformers running the same
// GGUF file's dequantized weights with its own Llama (tests/golden/make_smollm2_goldens.py): the
// logits of every position at each position's top-10 ids and 10 more, and every head's attention
// weights in three layers. Also: a KV cache run token by token gives the full run's logits, and
// RoPE is a rotation (norms kept, relative positions only).
#include "models/llama/llama.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/gguf.h"
#include "models/model_files.h"
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

TEST(SmolLM2, RopeRotatesPairsAndScoresDependOnRelativePosition) {
  Tensor q = Tensor::from({1, 1, 1, 4}, {1.0f, 2.0f, -3.0f, 0.5f});
  Tensor k = Tensor::from({1, 1, 1, 4}, {0.5f, -1.0f, 2.0f, 1.0f});
  const auto dot = [](const Tensor& a, const Tensor& b) {
    double s = 0;
    for (int64_t i = 0; i < 4; ++i) s += double{a.data<float>()[i]} * b.data<float>()[i];
    return s;
  };
  Tensor q7 = q.clone(), k3 = k.clone(), q12 = q.clone(), k8 = k.clone();
  rope(q7, 7, 10000), rope(k3, 3, 10000), rope(q12, 12, 10000), rope(k8, 8, 10000);
  EXPECT_NEAR(dot(q7, k3), dot(q12, k8), 1e-5);  // both 4 apart
  EXPECT_NEAR(dot(q7, q7), dot(q, q), 1e-5);     // a rotation keeps the norm
  // Position 1, pair 0 turns by 1 radian: (1, 2) → (cos 1 − 2 sin 1, sin 1 + 2 cos 1).
  Tensor p = q.clone();
  rope(p, 1, 10000);
  EXPECT_NEAR(p.data<float>()[0], std::cos(1.0) - 2 * std::sin(1.0), 1e-6);
  EXPECT_NEAR(p.data<float>()[1], std::sin(1.0) + 2 * std::cos(1.0), 1e-6);
}

}  // namespace
}  // namespace qkv
