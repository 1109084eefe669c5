// The causal lens of an output step of an encoder–decoder transformer `qkv train` makes
// (Seq2Seq::residual, explain::read_step), checked against computations that do not go through
// it: the model's own forward (nn::DecoderBlock), the model with a head's columns of W_O zeroed,
// the float64 capture's values, and the parameters' biases. Tiny untrained models: each property
// holds for any weights.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "qkv/explain_lens.h"
#include "qkv/explain_run.h"
#include "qkv/model.h"

namespace qkv::explain {
namespace {

const Task& tiny_task() {
  static const Task task = make_task("reverse", {.min_length = 2, .max_length = 6, .symbols = 4});
  return task;
}

// 2 blocks (4 lens layers), 2 heads of 4, FFN 12.
std::unique_ptr<Seq2Seq> tiny_model(const nn::MultiHeadAttentionOptions& attention = {},
                                    uint64_t seed = 11) {
  Seq2SeqConfig config = config_for(tiny_task(), 2, 2, 8);
  config.ffn_hidden = 12;
  config.attention = attention;
  nn::Rng init(seed);
  return make_seq2seq(config, init);
}

const std::string kSource = "abcab";

// The decoder's inputs <s> a b: three positions.
std::vector<int32_t> decoder_ids(const Seq2Seq& m) {
  std::vector<int32_t> ids{Vocabulary::kBos};
  for (const int32_t id : m.vocab().encode("ab")) ids.push_back(id);
  return ids;
}

// The model's own logits, [n, vocab] float64, teacher-forced on `ids` over `source`.
Tensor forward_logits(Seq2Seq& m, const std::string& source, const std::vector<int32_t>& ids) {
  Batch b = make_batch(m.vocab(), {{source, ""}});
  b.target_in = {ids};
  b.target_length = static_cast<int64_t>(ids.size());
  b.target_lengths = {b.target_length};
  nn::Rng rng(0);
  const Tensor z = m.forward(b, false, rng).to(DType::f64);
  return z.reshape({z.dim(1), z.dim(2)});
}

nn::Parameter& parameter(Seq2Seq& m, const std::string& name) {
  std::vector<nn::Parameter*> all;
  m.collect(all);
  for (nn::Parameter* p : all)
    if (p->name == name) return *p;
  throw Error("no parameter " + name);
}

TEST(StepLens, ThePassWithoutHooksIsTheModelsForwardForEveryAttentionVariant) {
  const std::vector<nn::MultiHeadAttentionOptions> variants = {
      {},
      {.kv_heads = 1, .score = Score::general},
      {.score = Score::additive},
      {.tie_qk = true, .identity_v = true}};
  for (const auto& v : variants) {
    auto m = tiny_model(v);
    const auto r = m->residual(kSource);
    const std::vector<int32_t> ids = decoder_ids(*m);
    Tensor h = r->embed(ids);
    for (int64_t l = 0; l < r->layers(); ++l) r->layer(l, h);
    const Tensor ours = r->unembed(r->final_norm(h)).to(DType::f64);
    const Tensor theirs = forward_logits(*m, kSource, ids);
    ASSERT_EQ(ours.shape(), theirs.shape());
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < ours.numel(); ++i) {
      worst = std::max(worst, std::abs(ours.data<double>()[i] - theirs.data<double>()[i]));
      scale = std::max(scale, std::abs(theirs.data<double>()[i]));
    }
    EXPECT_LE(worst, 1e-5 * std::max(1.0, scale)) << to_string(v.score) << " tie " << v.tie_qk;
    EXPECT_EQ(r->layers(), 4);
    EXPECT_EQ(r->layer_name(3), "L1 cross");
    EXPECT_EQ(r->keys(1, 3), 5);  // the source's characters
    EXPECT_FALSE(r->causal(1));
  }
}

TEST(StepLens, ZeroAblationIsTheHeadsColumnsOfWOZeroed) {
  auto m = tiny_model();
  const Lens lens(m->residual(kSource), decoder_ids(*m));
  const Target target{.id = lens.top_token()};
  const int64_t d = 4;
  // (lens layer, head): block 0's self-attention, block 0's and block 1's cross-attention.
  for (const auto& [l, h] : std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 0}, {3, 1}}) {
    const Measure ablated = lens.ablate(l, h, Ablation::zero, target);
    auto zeroed = tiny_model();  // the same seed: the same weights
    Tensor& wo =
        parameter(*zeroed, "decoder." + std::to_string(l / 2) +
                               (l % 2 == 0 ? ".self_attention" : ".cross_attention") + ".o.weight")
            .value;
    for (int64_t r = 0; r < wo.dim(0); ++r)
      for (int64_t k = h * d; k < (h + 1) * d; ++k) wo.data<float>()[r * wo.dim(1) + k] = 0.0F;
    const Tensor z = forward_logits(*zeroed, kSource, decoder_ids(*zeroed));
    const double expected = z.data<double>()[(z.dim(0) - 1) * z.dim(1) + target.id];
    EXPECT_NEAR(ablated.logit, expected, 1e-5) << "layer " << l << " head " << h;
    // The check tells heads apart: the other head's ablation is another logit.
    EXPECT_GT(std::abs(lens.ablate(l, 1 - h, Ablation::zero, target).logit - expected), 1e-3)
        << "layer " << l << " head " << 1 - h;
  }
}

TEST(StepLens, AttributionSumsToTheLogitWithTheBiasesNoLayerWrites) {
  auto m = tiny_model();
  // Untrained, the final norm's β and the unembedding's bias are 0: given values, they count.
  Tensor& beta = parameter(*m, "decoder.norm.bias").value;
  Tensor& bu = parameter(*m, "output.bias").value;
  for (int64_t r = 0; r < beta.numel(); ++r)
    beta.data<float>()[r] = 0.1F * static_cast<float>(r % 3) - 0.05F;
  for (int64_t v = 0; v < bu.numel(); ++v)
    bu.data<float>()[v] = 0.2F * static_cast<float>(v % 4) - 0.3F;
  const Lens lens(m->residual(kSource), decoder_ids(*m));
  const Target target{.id = 4, .versus = 6};
  const Attribution a = direct_logit_attribution(lens, target);
  const Measure clean = lens.measure(target);
  EXPECT_NEAR(a.total, clean.metric, 1e-4 * std::max(1.0, std::abs(clean.metric)));
  // The constant from the parameters: β·(W_U[t] − W_U[v]) + b_U[t] − b_U[v].
  const Tensor& wu = parameter(*m, "output.weight").value;
  double expected = double{bu.data<float>()[4]} - bu.data<float>()[6];
  for (int64_t r = 0; r < 8; ++r)
    expected += double{beta.data<float>()[r]} *
                (double{wu.data<float>()[4 * 8 + r]} - wu.data<float>()[6 * 8 + r]);
  EXPECT_NEAR(a.constant, expected, 1e-6);
  EXPECT_GT(std::abs(a.constant), 0.05);
}

TEST(StepLens, KnockingOutEveryKeyButOneLeavesThatKeysValue) {
  auto m = tiny_model();
  const auto r = m->residual(kSource);
  const std::vector<int32_t> ids = decoder_ids(*m);
  const int64_t n = 3, keys = 5, kept = 3, head = 1, d = 4;
  // Cross-attention of block 1 (lens layer 3), head 1: every query sees key 3 only.
  Tensor keep = Tensor::full({1, 2, n, keys}, 1.0, DType::b8);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < keys; ++j)
      if (j != kept) keep.data<bool>()[(head * n + i) * keys + j] = false;
  Tensor seen;
  const LayerHooks hooks{.heads =
                             [&](int64_t l, Tensor& o) {
                               if (l == 3) seen = o.clone();
                             },
                         .mask = [&](int64_t l) { return l == 3 ? keep : Tensor(); }};
  Tensor h = r->embed(ids);
  for (int64_t l = 0; l < r->layers(); ++l) r->layer(l, h, hooks);
  // The float64 capture's value of key 3 in that head.
  const Seq2SeqCapture c = m->capture(kSource);
  const Tensor v = c.cross[1].v.to(DType::f64).contiguous();  // [1, H, S, d]
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < d; ++k)
      EXPECT_NEAR(seen.data<float>()[(head * n + i) * d + k],
                  v.data<double>()[(head * keys + kept) * d + k], 1e-5)
          << "query " << i << " feature " << k;
  // A cross layer's keys are the source's: a key after the query is an edge to block.
  const std::vector<Edge> edges = parse_edges("3.1:0>4", *r, n);
  ASSERT_EQ(edges.size(), 1u);
  EXPECT_EQ(edges[0].key, 4);
  EXPECT_THROW(parse_edges("2.1:0>4", *r, n), Error);  // self-attention: 4 is past 0 … 2
}

TEST(StepLens, ReadStepMeasuresTheWrittenTokenAndPatchesFromAnotherSource) {
  auto m = tiny_model();
  const Seq2Seq::Decoded decoded = m->greedy_decode({kSource});
  std::vector<std::string> outputs;
  for (const int32_t id : decoded.ids[0]) outputs.push_back(m->vocab().token(id));
  ASSERT_GE(outputs.size(), 2u);
  const CausalReading r = read_step(*m, kSource, outputs, 1, {.corrupt = "cbacb"});
  EXPECT_EQ(r.step, 1);
  EXPECT_EQ(r.target_text, outputs[1]);  // the token it wrote at step 2
  EXPECT_EQ(r.tokens, (std::vector<std::string>{"<s>", outputs[0]}));
  EXPECT_EQ(r.layer_names,
            (std::vector<std::string>{"L0 self", "L0 cross", "L1 self", "L1 cross"}));
  EXPECT_EQ(r.heads.size(), 8u);
  // The clean logit is the model's own at that position.
  std::vector<int32_t> ids{Vocabulary::kBos, decoded.ids[0][0]};
  const Tensor z = forward_logits(*m, kSource, ids);
  EXPECT_NEAR(r.clean.logit, z.data<double>()[1 * z.dim(1) + r.target.id], 1e-5);
  // Both runs read the same decoder tokens: before the first cross-attention nothing differs, so
  // patching there restores nothing; the corrupted source does move the metric.
  ASSERT_TRUE(r.patching.has_value());
  const Patching& p = *r.patching;
  EXPECT_GT(std::abs(p.clean.metric - p.corrupted.metric), 1e-4);
  for (int64_t h = 0; h < 2; ++h) EXPECT_EQ(p.heads.at<double>(0, h), 0.0) << "head " << h;
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t j = 0; j < 2; ++j) EXPECT_NEAR(p.stream.at<double>(l, j), 0.0, 1e-5);  // batched
  double cross = 0;
  for (int64_t h = 0; h < 2; ++h) cross += std::abs(p.heads.at<double>(1, h));
  EXPECT_GT(cross, 1e-4);  // a cross-attention head carries the source
  EXPECT_THROW(read_step(*m, kSource, outputs, static_cast<int64_t>(outputs.size()), {}), Error);
}

// What the values carried in a trained model's three attentions: ‖W_O^h v_j‖ per head and key,
// recomputed here from the capture's v and the W_O parameter, vector by vector.
TEST(TrainedValues, EachBlocksNormsAreWOTimesEachValue) {
  auto m = tiny_model({.kv_heads = 1});
  const explain::Run run = capture(*m, kSource, "tiny");
  ASSERT_EQ(run.blocks.size(), 3u);
  const std::vector<std::string> names = {"decoder.1.cross_attention.o.weight",
                                          "encoder.1.attention.o.weight",
                                          "decoder.1.self_attention.o.weight"};
  for (std::size_t b = 0; b < 3; ++b) {
    const Block& block = run.blocks[b];
    ASSERT_EQ(block.ov_norms.size(), 2u) << block.name;
    const Tensor& wo = parameter(*m, names[b]).value;                // [8, 8]
    const Tensor v = block.layers[1].v.to(DType::f64).contiguous();  // [1, 1, m, 4]: one kv head
    ASSERT_EQ(v.dim(1), 1) << block.name;
    const int64_t keys = v.dim(2);
    double worst = 0;
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t j = 0; j < keys; ++j) {
        double sq = 0;
        for (int64_t r = 0; r < 8; ++r) {
          double y = 0;
          for (int64_t k = 0; k < 4; ++k)
            y += double{wo.data<float>()[r * 8 + h * 4 + k]} * v.data<double>()[j * 4 + k];
          sq += y * y;
        }
        worst = std::max(worst, std::abs(block.ov_norms[1].at<double>(0, h, j) - std::sqrt(sq)));
      }
    EXPECT_LE(worst, 1e-9) << block.name;
    // The check sees a swapped head: head 0's norms are not head 1's.
    EXPECT_GT(
        std::abs(block.ov_norms[1].at<double>(0, 0, 0) - block.ov_norms[1].at<double>(0, 1, 0)),
        1e-6)
        << block.name;
  }
}

TEST(StepLens, RnnSearchHasNoResidualStream) {
  Seq2SeqConfig config = rnnsearch_config_for(tiny_task(), 8);
  nn::Rng init(3);
  auto m = make_seq2seq(config, init);
  try {
    m->residual(kSource);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("keeps no residual stream"), std::string::npos);
  }
}

}  // namespace
}  // namespace qkv::explain
