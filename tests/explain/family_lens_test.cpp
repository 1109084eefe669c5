// The causal lens on the GGUF families (tests/golden/gguf_families): what each architecture adds —
// qwen2's biases, qwen3's and gemma3's q/k norms, gemma3's post-attention norm and scaled
// embeddings — must leave the lens exact. Checked against the model's own forward pass: the lens's
// clean logits are the model's; direct logit attribution's parts sum to the clean logit and each
// layer's heads to its attention part (gemma3's norm after W_O frozen at the whole); the QK circuit
// of layer 0 is the captured attention logit of the same two tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "qkv/causal_lm.h"
#include "qkv/explain_circuits.h"
#include "qkv/explain_lens.h"

namespace qkv::explain {
namespace {

std::string tiny(const std::string& family) {
  return std::string(QKV_SOURCE_DIR) + "/tests/golden/gguf_families/tiny-" + family + ".gguf";
}

class FamilyLens : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyLens, CleanRunAttributionAndCircuitAreExact) {
  const CausalLM model = CausalLM::load(tiny(GetParam()));
  const std::vector<int32_t> ids = {5, 17, 42, 9, 77, 3, 11};
  const Lens lens(model.residual(), ids);
  const ResidualModel& m = lens.model();

  // The lens's clean pass is the model's forward.
  const Tensor logits = model.logits(ids);
  const int64_t vocab = m.vocab(), last = static_cast<int64_t>(ids.size()) - 1;
  double worst = 0, scale = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    const double want = logits.value(last * vocab + v);
    worst = std::max(worst, std::abs(lens.logits().value(v) - want));
    scale = std::max(scale, std::abs(want));
  }
  EXPECT_LT(worst, 1e-5 * scale);

  // Direct logit attribution: the parts sum to the target's logit; a layer's heads to its
  // attention part.
  const Target target{.id = 7, .versus = 8};
  const Attribution a = direct_logit_attribution(lens, target);
  const Measure clean = lens.measure(target);
  EXPECT_NEAR(a.total, clean.metric, 1e-4 * std::max(1.0, std::abs(clean.metric)));
  for (int64_t l = 0; l < m.layers(); ++l) {
    double heads = 0;
    for (int64_t h = 0; h < m.heads(); ++h) heads += a.heads[static_cast<std::size_t>(l * m.heads() + h)];
    EXPECT_NEAR(heads, a.attention[static_cast<std::size_t>(l)], 1e-4) << "layer " << l;
  }

  // Layer 0's QK circuit at offset 1 is the attention logit of token 42 (position 1) on token 17
  // (position 0), as the model computed it.
  std::vector<AttentionCapture> layers;
  model.capture({17, 42}, layers);
  for (int64_t h = 0; h < m.heads(); ++h) {
    const QkTable t = qk_table(m, 0, h, {17, 42}, {.offset = 1});
    const double want = layers[0].logits.value((h * 2 + 1) * 2 + 0);
    EXPECT_NEAR(t.logits.value(1 * 2 + 0), want, 1e-4 * std::max(1.0, std::abs(want)))
        << GetParam() << " head " << h;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyLens,
                         ::testing::Values("llama3", "llama2", "qwen2", "qwen3", "gemma3"));

}  // namespace
}  // namespace qkv::explain
