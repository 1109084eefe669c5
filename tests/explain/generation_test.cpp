// Generation, explained (qkv/explain_generation.h) on SmolLM2-135M, checked by computations the
// explanation does not make: the tokens are plain generate's; each token's attribution sums to
// its logit in the ordinary forward pass (CausalLM::logits, the fused path) over the same prefix;
// where a head looked is the softmax of its last query against every key, recomputed here in
// float64 from the stream entering its layer (the kv head taken as h · kv_heads / heads); the
// cache's size is SmolLM2's config written out (30 layers, 3 kv heads, 64 floats). Each checker is
// shown to reject a perturbed result.
#include <gtest/gtest.h>

#include <cmath>

#include "models/model_files.h"
#include "qkv/causal_lm.h"
#include "qkv/explain_generation.h"
#include "qkv/explain_lens.h"

namespace qkv::explain {
namespace {

const CausalLM& smollm2() {
  static const CausalLM model = CausalLM::load(test::smollm2_gguf());
  return model;
}

// The France prompt, four tokens on: computed once for every test.
struct France {
  std::vector<int32_t> prompt;
  ExplainedGeneration g;
};
const France& france() {
  static const France f = [] {
    France x{.prompt = smollm2().tokenize("The capital of France is")};
    x.g = explain_generation(smollm2(), x.prompt,
                             {.generate = {.max_tokens = 4}, .top_heads = 3, .top_keys = 3});
    return x;
  }();
  return f;
}

std::vector<int32_t> prefix_of(const ExplainedGeneration& g, const GenerationStep& s) {
  return {g.ids.begin(), g.ids.begin() + s.positions};
}

// The step's logit and its attribution's parts against the forward pass's logit of its token.
::testing::AssertionResult attribution_matches(const GenerationStep& s, double forward) {
  const double tolerance = 1e-3 * std::abs(forward) + 1e-3;
  if (std::abs(s.logit - forward) > tolerance)
    return ::testing::AssertionFailure() << "logit " << s.logit << ", forward " << forward;
  if (std::abs(s.total - forward) > tolerance)
    return ::testing::AssertionFailure() << "parts sum to " << s.total << ", forward " << forward;
  if (std::abs(s.embedding + s.attention + s.mlp - s.total) > 1e-9 * std::abs(s.total) + 1e-9)
    return ::testing::AssertionFailure() << "embedding + attention + MLPs ≠ total";
  return ::testing::AssertionSuccess();
}

// The cache of a step from SmolLM2-135M's config, written out: K and V, float32, of 64 floats,
// in 30 layers × 3 kv heads.
::testing::AssertionResult cache_matches(const GenerationStep& s, int64_t prompt) {
  const int64_t positions = prompt + s.step, queries = s.step == 0 ? prompt : 1;
  const int64_t bytes = 30 * 3 * positions * 64 * 2 * 4;
  if (s.positions != positions || s.queries != queries || s.cache_bytes != bytes)
    return ::testing::AssertionFailure()
           << "step " << s.step << ": " << s.positions << " positions, " << s.queries
           << " queries, " << s.cache_bytes << " bytes; expected " << positions << ", " << queries
           << ", " << bytes;
  return ::testing::AssertionSuccess();
}

// Head h of layer l: its last query's softmax over the keys of `prefix`, in float64 from the
// stream entering the layer: q and k through the attention norm, W_Q's and W_K's rows, RoPE.
std::vector<double> last_query_weights(const std::vector<int32_t>& prefix, int64_t l, int64_t h) {
  const Lens lens(smollm2().residual(), prefix);
  const ResidualModel& m = lens.model();
  const int64_t n = lens.size(), d = m.head_dim(), hidden = m.hidden();
  const int64_t kv = h * m.kv_heads() / m.heads();
  const Tensor x = m.attention_norm(l, lens.stream(l));
  const Tensor &wq = m.query_matrix(l), &wk = m.key_matrix(l);
  Tensor q({1, 1, 1, d}), k({1, 1, n, d});
  for (int64_t i = 0; i < d; ++i) {
    double s = 0;
    for (int64_t c = 0; c < hidden; ++c)
      s += double{x.at<float>(n - 1, c)} * wq.at<float>(h * d + i, c);
    q.at<float>(0, 0, 0, i) = static_cast<float>(s);
    for (int64_t j = 0; j < n; ++j) {
      double t = 0;
      for (int64_t c = 0; c < hidden; ++c)
        t += double{x.at<float>(j, c)} * wk.at<float>(kv * d + i, c);
      k.at<float>(0, 0, j, i) = static_cast<float>(t);
    }
  }
  m.position(l, q, n - 1);
  m.position(l, k, 0);
  std::vector<double> logits(static_cast<std::size_t>(n));
  double top = -1e300, sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    double s = 0;
    for (int64_t i = 0; i < d; ++i) s += double{q.at<float>(0, 0, 0, i)} * k.at<float>(0, 0, j, i);
    logits[static_cast<std::size_t>(j)] = s / std::sqrt(static_cast<double>(d));
    top = std::max(top, logits[static_cast<std::size_t>(j)]);
  }
  for (double& z : logits) sum += (z = std::exp(z - top));
  for (double& z : logits) z /= sum;
  return logits;
}

::testing::AssertionResult looked_matches(const CarryingHead& head,
                                          const std::vector<double>& weights) {
  double largest = 0;
  for (const double w : weights) largest = std::max(largest, w);
  for (const KeyWeight& k : head.looked)
    if (std::abs(k.weight - weights[static_cast<std::size_t>(k.position)]) > 1e-4)
      return ::testing::AssertionFailure()
             << "position " << k.position << ": " << k.weight << ", recomputed "
             << weights[static_cast<std::size_t>(k.position)];
  if (head.looked.empty() || std::abs(head.looked.front().weight - largest) > 1e-4)
    return ::testing::AssertionFailure() << "the first key is not the largest weight " << largest;
  return ::testing::AssertionSuccess();
}

TEST(GenerationExplained, TokensArePlainGenerations) {
  const France& f = france();
  const std::vector<int32_t> plain = smollm2().generate(f.prompt, {.max_tokens = 4});
  ASSERT_EQ(f.g.steps.size(), plain.size());
  for (std::size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(f.g.steps[i].id, plain[i]) << i;
  EXPECT_EQ(f.g.steps.front().text, " Paris");
  EXPECT_EQ(f.g.ids.size(), f.prompt.size() + plain.size());
}

TEST(GenerationExplained, AttributionSumsToTheForwardLogit) {
  const France& f = france();
  for (const GenerationStep& s : f.g.steps) {
    const Tensor logits = smollm2().logits(prefix_of(f.g, s));  // the fused path
    const int64_t vocab = logits.dim(1), last = logits.dim(0) - 1;
    const double forward = logits.data<float>()[last * vocab + s.id];
    EXPECT_TRUE(attribution_matches(s, forward)) << "step " << s.step;
    GenerationStep off = s;
    off.total += 0.01 * std::abs(forward) + 0.01;
    EXPECT_FALSE(attribution_matches(off, forward));
    off = s;
    off.mlp += 0.01;
    EXPECT_FALSE(attribution_matches(off, forward));
  }
}

TEST(GenerationExplained, CarryingHeadsAreTheLargestAttributions) {
  const France& f = france();
  const GenerationStep& s = f.g.steps[1];
  const Lens lens(smollm2().residual(), prefix_of(f.g, s));
  const Attribution a = direct_logit_attribution(lens, {.id = s.id});
  std::vector<double> sorted = a.heads;
  std::sort(sorted.rbegin(), sorted.rend());
  ASSERT_EQ(s.heads.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_DOUBLE_EQ(s.heads[i].attribution, sorted[i]);
    EXPECT_EQ(a.heads[static_cast<std::size_t>(s.heads[i].layer * 9 + s.heads[i].head)],
              s.heads[i].attribution);
    EXPECT_EQ(s.heads[i].kv_head, s.heads[i].head / 3);  // 9 query heads, 3 kv heads
  }
}

TEST(GenerationExplained, WhereHeadsLookedIsTheirLastQuerysSoftmax) {
  const France& f = france();
  for (const GenerationStep* s : {&f.g.steps[0], &f.g.steps[2]}) {
    for (const CarryingHead& head : s->heads) {
      const std::vector<double> w = last_query_weights(prefix_of(f.g, *s), head.layer, head.head);
      EXPECT_TRUE(looked_matches(head, w)) << "L" << head.layer << "h" << head.head;
      ASSERT_EQ(head.looked.size(), 3u);
      EXPECT_GE(head.looked[0].weight, head.looked[1].weight);
      CarryingHead off = head;
      off.looked[1].weight += 2e-3;
      EXPECT_FALSE(looked_matches(off, w));
      // The largest weight put on the wrong key.
      off = head;
      off.looked.front().position = (head.looked.front().position + 1) % s->positions;
      EXPECT_FALSE(looked_matches(off, w));
    }
  }
}

TEST(GenerationExplained, KvCacheIsWhatTheConfigImplies) {
  const France& f = france();
  const LlamaConfig& c = smollm2().config();
  ASSERT_EQ(c.layers, 30);
  ASSERT_EQ(c.kv_heads, 3);
  ASSERT_EQ(c.heads, 9);
  ASSERT_EQ(c.head_dim, 64);
  EXPECT_EQ(f.g.cache.bytes_per_position(), 46080);
  EXPECT_EQ(f.g.cache.group(), 3);
  for (const GenerationStep& s : f.g.steps) {
    EXPECT_TRUE(cache_matches(s, static_cast<int64_t>(f.prompt.size())));
    GenerationStep off = s;
    off.cache_bytes += 4;
    EXPECT_FALSE(cache_matches(off, static_cast<int64_t>(f.prompt.size())));
    off = s;
    off.queries = s.step == 0 ? 1 : s.positions;  // Q recomputed over the prefix: not a cache
    EXPECT_FALSE(cache_matches(off, static_cast<int64_t>(f.prompt.size())));
  }
}

TEST(GenerationExplained, JsonHasTheDocumentedKeys) {
  const France& f = france();
  const nlohmann::json j = nlohmann::json::parse(generation_json(f.g).dump());
  for (const char* key : {"layers", "heads", "kv_heads", "head_dim", "group", "bytes_per_position"})
    EXPECT_TRUE(j.at("cache").contains(key)) << key;
  EXPECT_EQ(j["cache"]["sharing"][1]["heads"], nlohmann::json({3, 4, 5}));
  EXPECT_EQ(j["prompt_tokens"], f.prompt.size());
  EXPECT_EQ(j["tokens"].size(), f.g.ids.size());
  const nlohmann::json& step = j["steps"][0];
  for (const char* key : {"step", "id", "text", "positions", "queries", "cache_bytes", "logit",
                          "log_prob", "attribution", "heads"})
    EXPECT_TRUE(step.contains(key)) << key;
  EXPECT_EQ(step["text"], " Paris");
  EXPECT_EQ(step["heads"][0]["looked"].size(), 3u);
  for (const char* key : {"embedding", "attention", "mlp", "total"})
    EXPECT_TRUE(step["attribution"].contains(key)) << key;
}

TEST(GenerationExplained, TextFitsEightyColumns) {
  const France& f = france();
  std::string text = generation_header_text(f.g);
  for (const GenerationStep& s : f.g.steps) text += generation_step_text(f.g, s);
  text += generation_footer_text(f.g);
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    std::size_t columns = 0;  // UTF-8 code points: every character here is one column wide
    for (const unsigned char c : line) columns += (c & 0xC0) != 0x80;
    EXPECT_LE(columns, 80u) << line;
    start = end == std::string::npos ? text.size() : end + 1;
  }
  EXPECT_NE(text.find("#1 \" Paris\""), std::string::npos) << text;
  EXPECT_NE(text.find("kv1 ← h3 h4 h5"), std::string::npos) << text;
}

TEST(GenerationExplained, BadRequestsAreUsageErrors) {
  try {
    explain_generation(smollm2(), {1, 2}, {.top_heads = 0});
    FAIL() << "top_heads 0 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
  }
}

}  // namespace
}  // namespace qkv::explain
