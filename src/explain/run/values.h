// explain/run/values.h — what the values carried, computed where a family's capture has its W_O
// (Block::ov_norms, Block::mixing_gram; qkv/explain_run.h says what they are).
#pragma once

#include <cstdint>
#include <vector>

#include "qkv/causal_lm.h"
#include "qkv/explain_run.h"
#include "qkv/seq2seq.h"
#include "qkv/sentence_model.h"

namespace qkv::explain {

// w_o [hidden, H·d] (y = W_O·concat_h o_h: columns h·d … h·d + d − 1 take head h), v [1, H, m, d]
// (any float dtype) → [1, H, m] float64: ‖W_O^h v^h_j‖, through each head's d × d Gram
// W_O^hᵀ W_O^h (H·d²·hidden + m·H·d² multiply-adds, whatever the length): for a run longer than
// kMixingMaxTokens, whose vectors written_values does not form.
Tensor ov_norms(const Tensor& w_o, const Tensor& v);
// The same w_o and v, the stream the layer reads [1, m, hidden] (its residual), and a post-LN's
// gain γ [hidden] (undefined: a pre-norm layer, the vectors as they are): every f^h(x_j) formed
// (m·H·d·hidden multiply-adds), its norm, and per key j the Gram of f^0(x_j) … f^{H−1}(x_j), x_j,
// each first centred and multiplied by γ where γ is given.
struct WrittenValues {
  Tensor norms;  // [1, H, m]: ‖f^h(x_j)‖ (Block::ov_norms)
  Tensor gram;   // [1, m, H + 1, H + 1] (Block::mixing_gram)
};
WrittenValues written_values(const Tensor& w_o, const Tensor& v, const Tensor& stream,
                             const Tensor& gain);

// A decoder's run (capture(CausalLM)): within kMixingMaxTokens tokens its stream (Run::embeddings,
// Run::hidden) rebuilt and its block's ov_norms and mixing_gram (written_values); beyond, the
// norms alone (ov_norms).
void add_values(const CausalLM& model, const std::vector<int32_t>& ids, Run& run);
// BERT's run (capture(SentenceModel)), its stream already kept: the same.
void add_values(const SentenceModel& model, Run& run);
// A trained encoder–decoder transformer's run (capture(Seq2Seq)): each block's ov_norms (its
// stream is not kept, so no mixing); W_O is the identity where the model has none (identity_v).
// RNNsearch: nothing.
void add_values(Seq2Seq& model, Run& run);

}  // namespace qkv::explain
