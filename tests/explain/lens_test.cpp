// The causal lens (qkv/explain_lens.h) on SmolLM2-135M: its identities, checked by computations
// the lens does not make — direct logit attribution's parts sum to the logits the ordinary
// forward pass gives; an ablation with nothing changed is the clean run; a knocked-out edge
// changes the run where the attention's own mask would.
#include <gtest/gtest.h>

#include <chrono>
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
}

}  // namespace
}  // namespace qkv::explain
