// A captured run checked finite before any view shows it (qkv/explain_run.h).
#include "qkv/finite.h"

#include <utility>

#include "qkv/explain_run.h"

namespace qkv::explain {

void require_finite(const Run& run) {
  qkv::require_finite(run.embeddings, "the embedding layer's output");
  for (std::size_t b = 0; b < run.blocks.size(); ++b) {
    const std::vector<AttentionCapture>& layers = run.blocks[b].layers;
    // A sentence's one self-attention goes unnamed, as the command has always said it.
    const bool named = b > 0 || run.blocks[b].kind != BlockKind::self_attention;
    const std::string block = named ? " (" + run.blocks[b].name + ")" : "";
    for (std::size_t l = 0; l < layers.size(); ++l) {
      const AttentionCapture& c = layers[l];
      const Tensor hidden = b == 0 && l < run.hidden.size() ? run.hidden[l] : Tensor();
      const std::string layer = "layer " + std::to_string(l) + "'s ";
      for (const auto& [t, name] :
           {std::pair{&c.q, "queries"}, std::pair{&c.k, "keys"}, std::pair{&c.v, "values"},
            std::pair{&c.scores, "scores"}, std::pair{&c.weights, "attention weights"},
            std::pair{&c.head_out, "head outputs"}, std::pair{&hidden, "output"}})
        qkv::require_finite(*t, layer + name + block);
    }
  }
  qkv::require_finite(run.output.embedding, "the sentence embedding");
  // A decoder's next-token probabilities: the output norm and matrix come after every capture.
  for (const auto& [token, p] : run.output.next_tokens)
    qkv::require_finite(p, "the next-token probabilities");
  for (std::size_t i = 0; i < run.output.probabilities.size(); ++i)
    qkv::require_finite(run.output.probabilities[i],
                        "the probability of class " + std::to_string(i));
}

}  // namespace qkv::explain
