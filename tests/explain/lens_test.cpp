// The causal lens (qkv/explain_lens.h) on SmolLM2-135M: its identities, checked by computations
// the lens does not make — direct logit attribution's parts sum to the logits the ordinary
// forward pass gives; an ablation with nothing changed is the clean run; a knocked-out edge
// changes the run where the attention's own mask would.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <cmath>

#include "models/model_files.h"
#include "qkv/causal_lm.h"
#include "qkv/explain_lens.h"

namespace qkv::explain {
namespace {

const CausalLM& smollm2() {
  static const CausalLM model = CausalLM::load(test::smollm2_gguf());
  return model;
}

struct Prompt {
  std::vector<int32_t> ids;
  Target target;
};

Prompt france() {
  const CausalLM& m = smollm2();
  const std::vector<int32_t> paris = m.tokenize(" Paris"), rome = m.tokenize(" Rome");
  EXPECT_EQ(paris.size(), 1u);
  EXPECT_EQ(rome.size(), 1u);
  return {m.tokenize("The capital of France is"), {.id = paris[0], .versus = rome[0]}};
}

TEST(Lens, CleanRunIsTheForwardPass) {
  const Prompt p = france();
  const Lens lens(smollm2().residual(), p.ids);
  const Tensor logits = smollm2().logits(p.ids);  // the fused path, through llama_forward
  const int64_t vocab = logits.dim(1), last = logits.dim(0) - 1;
  double worst = 0;
  for (int64_t v = 0; v < vocab; ++v)
    worst = std::max(worst, std::abs(double{lens.logits().data<float>()[v]} -
                                     logits.data<float>()[last * vocab + v]));
  EXPECT_LT(worst, 1e-3);
  EXPECT_EQ(smollm2().token_text(lens.top_token()), " Paris");
}

TEST(Lens, AttributionSumsToTheMetric) {
  const Prompt p = france();
  const Lens lens(smollm2().residual(), p.ids);
  const Attribution a = direct_logit_attribution(lens, p.target);
  const Measure clean = lens.measure(p.target);
  EXPECT_NEAR(a.total, clean.metric, 1e-3 * std::abs(clean.metric) + 1e-3);
  for (std::size_t l = 0; l < a.attention.size(); ++l) {
    double heads = 0;
    for (int64_t h = 0; h < lens.model().heads(); ++h)
      heads += a.heads[l * static_cast<std::size_t>(lens.model().heads()) + h];
    EXPECT_NEAR(heads, a.attention[l], 1e-4 + 1e-4 * std::abs(a.attention[l])) << "layer " << l;
  }
}

TEST(Lens, AnAblationChangesTheRunAndAnEmptyKnockoutDoesNot) {
  const Prompt p = france();
  const Lens lens(smollm2().residual(), p.ids);
  const Measure clean = lens.measure(p.target);
  EXPECT_EQ(lens.knockout({}, p.target).logit, clean.logit);
  const auto t0 = std::chrono::steady_clock::now();
  const Measure zero = lens.ablate(0, 0, Ablation::zero, p.target);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(zero.logit, clean.logit);
  std::printf("one ablation from layer 0: %.3f s\n", seconds);
  // Every head's ablation runs batched, heads side by side: the same numbers as one at a time.
  const std::vector<HeadEffect> effects = head_effects(lens, p.target);
  ASSERT_EQ(static_cast<int64_t>(effects.size()), lens.model().layers() * lens.model().heads());
  // Every head zero-ablated as transformers did it (lens.json's every_head), to 1e-3 of the
  // clean logit (docs/CONVENTIONS.md §1.5).
  const nlohmann::json golden = test::read_golden_json("lens.json", "smollm2")["pairs"][0]
                                                      ["every_head"]["zero_ablation_metric_change"];
  ASSERT_EQ(golden.size(), effects.size());
  double worst = 0;
  for (std::size_t i = 0; i < effects.size(); ++i)
    worst = std::max(worst, std::abs(effects[i].ablation_metric_change - golden[i].get<double>()));
  EXPECT_LT(worst, 1e-3 * std::abs(clean.logit));
  std::printf("head_effects vs transformers, every head: max |Δ metric| %.2e\n", worst);
  for (const auto& [l, h] : {std::pair<int64_t, int64_t>{0, 0}, {23, 4}, {29, 8}}) {
    const HeadEffect& e = effects[static_cast<std::size_t>(l * lens.model().heads() + h)];
    EXPECT_EQ(e.layer, l);
    EXPECT_EQ(e.head, h);
    EXPECT_NEAR(e.ablation_logit_change,
                lens.ablate(l, h, Ablation::zero, p.target).logit - clean.logit, 1e-3);
    EXPECT_NEAR(e.mean_ablation_metric_change,
                lens.ablate(l, h, Ablation::mean, p.target).metric - clean.metric, 1e-3);
  }
}

// The last token's every edge but to itself blocked in every head of every layer: its stream then
// depends on itself alone, and RoPE's rotation cancels in q·k at one position — so its logits are
// those of the one-token prompt. An independent run (the fused forward pass) checks the knockout.
TEST(Lens, TheLastTokenCutOffIsTheOneTokenPrompt) {
  const Prompt p = france();
  const Lens lens(smollm2().residual(), p.ids);
  const int64_t last = lens.size() - 1;
  const std::vector<Edge> edges = parse_edges("*.*:" + std::to_string(last) + ">*",
                                              lens.model().layers(), lens.model().heads(),
                                              lens.size());
  EXPECT_EQ(static_cast<int64_t>(edges.size()), lens.model().layers() * lens.model().heads() * (last + 1));
  std::vector<Edge> others;
  for (const Edge& e : edges)
    if (e.key != last) others.push_back(e);
  const Measure cut = lens.knockout(others, p.target);
  const Tensor alone = smollm2().logits({p.ids.back()});
  const Lens single(smollm2().residual(), {p.ids.back()});
  const Measure expected = single.measure(alone.reshape({alone.numel()}), p.target);
  EXPECT_NEAR(cut.logit, expected.logit, 2e-3 * std::abs(expected.logit));
  EXPECT_NEAR(cut.metric, expected.metric, 2e-3 * std::abs(expected.logit));
  // And the checker tells it from the uncut run.
  EXPECT_GT(std::abs(lens.measure(p.target).logit - expected.logit), 0.1);
}

// Patching the stream entering layer 0 at the one position where the prompts differ makes the
// corrupted run the clean one: all of the gap restored; at a position where they agree, none.
TEST(Lens, PatchingTheDifferingTokenRestoresEverything) {
  const Prompt p = france();
  const Lens clean(smollm2().residual(), p.ids);
  const Lens corrupted(smollm2().residual(), smollm2().tokenize("The capital of Italy is"));
  ASSERT_EQ(clean.size(), corrupted.size());
  const Patching patched = patch(clean, corrupted, p.target);
  const int64_t n = clean.size();
  EXPECT_NEAR(patched.stream.at<double>(0, 3), 1.0, 1e-4);  // "France" for "Italy"
  EXPECT_NEAR(patched.stream.at<double>(0, 0), 0.0, 1e-6);  // "The" for "The"
  // Patching every head's output of layer 0 at every position, one head at a time: the share a
  // head restores at all positions is its heads entry; the positions before "France" restore
  // nothing in any head (their outputs are the same in both runs).
  for (int64_t h = 0; h < clean.model().heads(); ++h)
    for (int64_t i = 0; i < 3; ++i) EXPECT_NEAR(patched.positions.at<double>(0, h, i), 0.0, 1e-6);
  EXPECT_NEAR(patched.clean.metric, clean.measure(p.target).metric, 0);
  EXPECT_EQ(patched.positions.dim(2), n);
  // patch()'s every head, as transformers patched them (tests/golden/smollm2/lens.json's
  // every_head, made by make_smollm2_lens_goldens.py): a share of the whole gap, to 1e-3 of it.
  const nlohmann::json golden =
      test::read_golden_json("lens.json", "smollm2")["pairs"][0]["every_head"]["patching"];
  ASSERT_EQ(static_cast<int64_t>(golden.size()), patched.heads.numel());
  double worst = 0;
  for (int64_t i = 0; i < patched.heads.numel(); ++i)
    worst = std::max(worst, std::abs(patched.heads.data<double>()[i] - golden[i].get<double>()));
  EXPECT_LT(worst, 1e-3);
  std::printf("patch() vs transformers, every head: max |Δ share| %.2e\n", worst);
}

// Mean ablation over a one-token prompt replaces the head's output by itself: the clean run.
TEST(Lens, MeanAblationOfOneTokenChangesNothing) {
  const Prompt p = france();
  const Lens single(smollm2().residual(), {p.ids.front()});
  const Measure clean = single.measure(p.target);
  EXPECT_NEAR(single.ablate(5, 2, Ablation::mean, p.target).logit, clean.logit, 1e-5);
  EXPECT_GT(std::abs(single.ablate(5, 2, Ablation::zero, p.target).logit - clean.logit), 1e-4);
}

// The logit lens's last row is the model's own output: the top token first, the same logit.
TEST(Lens, TheLastLensRowIsTheOutput) {
  const Prompt p = france();
  const Lens lens(smollm2().residual(), p.ids);
  const std::vector<LensRow> rows = logit_lens(lens, p.target);
  ASSERT_EQ(static_cast<int64_t>(rows.size()), lens.model().layers());
  EXPECT_EQ(rows.back().top.front().first, lens.top_token());
  EXPECT_EQ(rows.back().target_rank, 0);
  EXPECT_NEAR(rows.back().target_logit, lens.measure(p.target).logit, 1e-5);
  EXPECT_GT(rows.front().target_rank, 100);  // layer 0 does not know Paris yet
}

TEST(Lens, EdgesAreParsedAndBadOnesNamed) {
  const std::vector<Edge> e = parse_edges("3.2:4>1,1.*:2>2", 30, 9, 5);
  ASSERT_EQ(e.size(), 10u);
  EXPECT_EQ(e[0].layer, 3);
  EXPECT_EQ(e[0].head, 2);
  EXPECT_EQ(e[0].query, 4);
  EXPECT_EQ(e[0].key, 1);
  EXPECT_EQ(e[9].head, 8);
  const auto message = [](const std::string& spec) {
    try {
      parse_edges(spec, 30, 9, 5);
    } catch (const Error& err) {
      return std::string(err.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("3.9:4>1"), "--knockout item \"3.9:4>1\": head \"9\"; expected 0 to 8 or *");
  EXPECT_EQ(message("3:4>1"),
            "--knockout item \"3:4>1\"; expected LAYER.HEAD:QUERY>KEY, e.g. 14.3:9>4 or 14.*:*>0");
  EXPECT_NE(message("1.1:1>3").find("blocks no edge"), std::string::npos);
}

TEST(Lens, ATargetOfTwoTokensIsRefusedByName) {
  const Prompt p = france();
  try {
    read_causal(smollm2().residual(), p.ids, {.target = " Parisian capital"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--target \" Parisian capital\" is"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("expected one token"), std::string::npos);
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
  }
}

}  // namespace
}  // namespace qkv::explain
