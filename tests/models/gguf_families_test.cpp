// The GGUF decoder families against transformers (tests/golden/make_gguf_family_goldens.py): a tiny
// random model of each — llama as Llama 3 (llama3 RoPE factors, GQA) and as Llama 2
// (SentencePiece, tied), qwen2 (q/k/v biases), qwen3 (q/k norms, head_dim ≠ hidden/heads, MQA),
// gemma3 (sliding and global layers, post norms, GeGLU, scaled embeddings) — whose tensors are
// spread over every quantization type qkv reads. The goldens are transformers' float64 forward on
// the file's own dequantized weights: the logits of 12 ids, every layer's attention weights, and
// 8 greedy tokens after a 5-id prompt.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "models/model_files.h"
#include "qkv/causal_lm.h"
#include "qkv/npy.h"

namespace qkv {
namespace {

const std::string kDir = test::golden_dir("gguf_families");

nlohmann::json family(const std::string& name) {
  for (const nlohmann::json& f : test::read_golden_json("goldens.json", "gguf_families"))
    if (f["name"] == name) return f;
  throw std::runtime_error("no family " + name + " in goldens.json");
}

// The worst difference of any row of `got` [n, m] from `want`'s, relative to that row's largest
// |value| (docs/CONVENTIONS.md: a model's float32 forward against a float64 golden).
double worst_relative(const Tensor& got, const Tensor& want) {
  const int64_t m = want.dim(-1), n = want.numel() / m;
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    double scale = 0, diff = 0;
    for (int64_t j = 0; j < m; ++j) {
      scale = std::max(scale, std::abs(want.value(i * m + j)));
      diff = std::max(diff, std::abs(got.value(i * m + j) - want.value(i * m + j)));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

std::vector<int32_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

class GgufFamily : public testing::TestWithParam<std::string> {};

TEST_P(GgufFamily, LogitsAttentionAndGreedyTokensMatchTransformers) {
  const nlohmann::json f = family(GetParam());
  const std::string stem = kDir + "/" + f["file"].get<std::string>();
  const CausalLM model = CausalLM::load(stem);
  EXPECT_EQ(model.config().architecture, f["arch"]);
  const std::vector<int32_t> ids = ids_of(f["ids"]);

  std::vector<AttentionCapture> layers;
  const Tensor logits = model.capture(ids, layers);
  const std::string base = stem.substr(0, stem.size() - 5);  // less ".gguf"
  const Tensor want = read_npy(base + ".logits.npy");
  const double logit_error = worst_relative(logits, want);
  EXPECT_LT(logit_error, 1e-4) << GetParam();

  const Tensor attentions = read_npy(base + ".attentions.npy");  // [layers, heads, n, n]
  ASSERT_EQ(static_cast<int64_t>(layers.size()), attentions.dim(0));
  double weight_error = 0;
  const int64_t per_layer = attentions.numel() / attentions.dim(0);
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const Tensor& w = layers[l].weights;  // [1, heads, n, n]
    ASSERT_EQ(w.numel(), per_layer);
    for (int64_t i = 0; i < per_layer; ++i)
      weight_error = std::max(weight_error, std::abs(w.value(i) - attentions.value(
                                                                      static_cast<int64_t>(l) * per_layer + i)));
  }
  EXPECT_LT(weight_error, 1e-5) << GetParam();

  // The float32 product: transformers' arithmetic (int8's is another: GgufFamily.Int8Decode...).
  const std::vector<int32_t> generated =
      model.generate(ids_of(f["prompt"]), {.max_tokens = 8,
                                           .stop_at_eos = false,
                                           .product = DecodeProduct::float32});
  EXPECT_EQ(generated, ids_of(f["generated"])) << GetParam();
  std::printf("  %s: logits %.2e (relative), weights %.2e\n", GetParam().c_str(), logit_error,
              weight_error);
}

// The file's blocks (the default) and the weights dequantized at load give the same bits wherever
// a pass runs in float32: every logit of a captured pass and every greedy token of a float32
// decode. int8's decode differs from it by x's rounding alone: its next-token logits stay within
// 5% of the logits' range of the float32 ones (measured 1.0–2.6% on these tiny random models, whose
// rows are a few blocks of 32 each).
TEST_P(GgufFamily, BlocksAndFloat32GiveTheSameBitsAndInt8DecodeStaysClose) {
  const nlohmann::json f = family(GetParam());
  const std::string path = kDir + "/" + f["file"].get<std::string>();
  CausalLM blocks = CausalLM::open(path), dense = CausalLM::open(path);
  dense.set_weight_format(WeightFormat::float32);
  blocks.load_weights();
  dense.load_weights();
  EXPECT_LT(blocks.resident_bytes(), dense.resident_bytes()) << GetParam();
  const std::vector<int32_t> ids = ids_of(f["ids"]);
  const Tensor a = blocks.logits(ids), b = dense.logits(ids);
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i)
    ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]) << GetParam() << " logit " << i;
  const GenerateOptions exact{.max_tokens = 8, .stop_at_eos = false,
                              .product = DecodeProduct::float32};
  EXPECT_EQ(blocks.generate(ids_of(f["prompt"]), exact), dense.generate(ids_of(f["prompt"]), exact));
  // Decode steps (a single row each: int8 where the matrices are blocks) after the prompt, on the
  // same tokens.
  const std::vector<int32_t> steps = {ids.front(), ids.back(), 3};
  const Tensor exact_steps = blocks.step_logits(ids, steps, DecodeProduct::float32);
  const Tensor int8_steps = blocks.step_logits(ids, steps, DecodeProduct::int8);
  const Tensor dense_steps = dense.step_logits(ids, steps, DecodeProduct::int8);  // no blocks
  double range = 0, worst = 0;
  for (int64_t i = 0; i < exact_steps.numel(); ++i) {
    const double x = exact_steps.data<float>()[i];
    range = std::max(range, std::abs(x));
    worst = std::max(worst, std::abs(int8_steps.data<float>()[i] - x));
    ASSERT_EQ(dense_steps.data<float>()[i], x) << GetParam() << ": float32 weights, any product";
  }
  // The prompt's pass (the first row) is float32 whatever the product.
  for (int64_t v = 0; v < exact_steps.dim(1); ++v)
    ASSERT_EQ(int8_steps.at<float>(0, v), exact_steps.at<float>(0, v)) << GetParam();
  EXPECT_LT(worst, 0.05 * range) << GetParam();
  EXPECT_GT(worst, 0) << GetParam() << ": int8 ran";
  std::printf("  %s: int8 decode's logits within %.2e of float32's (range %.2f)\n",
              GetParam().c_str(), worst, range);
}

INSTANTIATE_TEST_SUITE_P(Families, GgufFamily,
                         testing::Values("llama3", "llama2", "qwen2", "qwen3", "gemma3"));

// The comparison catches a model that is slightly off: the golden with one logit moved by 1e-3 of
// its row's scale fails it.
TEST(GgufFamilies, TheCheckerRejectsAPerturbedLogit) {
  const nlohmann::json f = family("qwen2");
  const std::string stem = kDir + "/" + f["file"].get<std::string>();
  const CausalLM model = CausalLM::load(stem);
  const Tensor logits = model.logits(ids_of(f["ids"]));
  Tensor want = read_npy(stem.substr(0, stem.size() - 5) + ".logits.npy").clone();
  EXPECT_LT(worst_relative(logits, want), 1e-4);
  const int64_t m = want.dim(1);
  double scale = 0;
  for (int64_t j = 0; j < m; ++j) scale = std::max(scale, std::abs(want.value(3 * m + j)));
  want.data<double>()[3 * m + 7] += 1e-3 * scale;
  EXPECT_GT(worst_relative(logits, want), 5e-4);
}

// Gemma 3's all-F32 twin holds the same dequantized weights as the quantized file: the same
// goldens, through another reading of every tensor.
TEST(GgufFamilies, GemmaF32TwinMatchesTheSameGoldens) {
  const nlohmann::json f = family("gemma3");
  const CausalLM model = CausalLM::load(kDir + "/tiny-gemma3-f32.gguf");
  const Tensor want = read_npy(kDir + "/tiny-gemma3.logits.npy");
  EXPECT_LT(worst_relative(model.logits(ids_of(f["ids"])), want), 1e-4);
}

// What each architecture changes is what the config says — the features the explain views name.
TEST(GgufFamilies, ConfigsSayWhatEachArchitectureChanges) {
  const CausalLM llama3 = CausalLM::open(kDir + "/tiny-llama3.gguf");
  EXPECT_TRUE(llama3.config().rope_factors);
  EXPECT_EQ(llama3.config().rope_pairing, RopePairing::adjacent);
  const CausalLM qwen2 = CausalLM::open(kDir + "/tiny-qwen2.gguf");
  EXPECT_TRUE(qwen2.config().qkv_bias);
  EXPECT_EQ(qwen2.config().rope_pairing, RopePairing::halves);
  const CausalLM qwen3 = CausalLM::open(kDir + "/tiny-qwen3.gguf");
  EXPECT_TRUE(qwen3.config().qk_norm);
  EXPECT_EQ(qwen3.config().head_dim, 32);
  EXPECT_EQ(qwen3.config().hidden, 64);
  const CausalLM gemma3 = CausalLM::open(kDir + "/tiny-gemma3.gguf");
  const LlamaConfig& g = gemma3.config();
  EXPECT_EQ(g.sliding_window, 4);
  EXPECT_EQ(g.sliding, (std::vector<bool>{true, true, false}));
  EXPECT_DOUBLE_EQ(g.embedding_scale, 8.0);
  EXPECT_TRUE(g.post_norms && g.gelu && g.qk_norm);
  const std::vector<std::string> features = attention_features(g);
  const auto says = [&](const std::string& words) {
    return std::any_of(features.begin(), features.end(), [&](const std::string& s) {
      return s.find(words) != std::string::npos;
    });
  };
  EXPECT_TRUE(says("sliding window of 4 positions on 2 of 3 layers")) << features.front();
  EXPECT_TRUE(says("multi-query attention"));
  EXPECT_TRUE(says("RMSNorm on each head's q and k"));
}

}  // namespace
}  // namespace qkv

namespace qkv {
namespace {

// Each file's tokenizer against transformers' tokenizer built from the same file (the ids in
// goldens.json): 34 of 35 texts equal. The one exception is transformers' known departure from
// SentencePiece on a text that starts with spaces: SentencePiece and llama.cpp put the dummy
// prefix "▁" before it as before any text (tests/golden/spm's goldens, from SentencePiece itself,
// check that rule); transformers' GGUF converter leaves it out there.
TEST(GgufFamilies, TokenizersMatchTransformersButForTheLeadingSpacePrefix) {
  int compared = 0;
  for (const nlohmann::json& f : test::read_golden_json("goldens.json", "gguf_families")) {
    const CausalLM model = CausalLM::open(kDir + "/" + f["file"].get<std::string>());
    for (const auto& [text, ids] : f["samples"].items()) {
      std::vector<int32_t> want = ids.get<std::vector<int32_t>>();
      if (f["name"] == "llama2" && text.starts_with("  "))
        want.insert(want.begin() + 1, 425);  // the prefix "▁", id 425 of that vocabulary
      EXPECT_EQ(model.tokenize(text), want) << f["name"] << " " << text;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 35);
}

}  // namespace
}  // namespace qkv
