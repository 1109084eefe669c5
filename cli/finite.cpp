#include "finite.h"

#include <cmath>

#include "text.h"

namespace qkv::cli {
namespace {

constexpr const char* kWhy =
    "; the model computes non-finite numbers (its weights overflow float32 or are corrupt), so "
    "there is no result to show";

std::string spelled(double x) { return std::isnan(x) ? "NaN" : x > 0 ? "+∞" : "−∞"; }

// The flat index of the first non-finite element, or -1.
int64_t first_non_finite(const Tensor& t) {
  if (!t.defined()) return -1;  // not kept by this model (a decoder has no sentence embedding)
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.value(i))) return i;
  return -1;
}

}  // namespace

void require_finite_embeddings(const Tensor& embeddings, const std::vector<std::string>& texts) {
  const int64_t bad = first_non_finite(embeddings);
  if (bad < 0) return;
  const int64_t row = bad / embeddings.dim(1);
  const std::string text = row < static_cast<int64_t>(texts.size())
                               ? texts[static_cast<std::size_t>(row)]
                               : std::string();
  throw Error("the embedding of text " + std::to_string(row + 1) + " (\"" + clip(text, 30) +
                  "\") came out " + spelled(embeddings.value(bad)) + kWhy,
              Error::Kind::runtime);
}

void require_finite_capture(const explain::Run& e) {
  require_finite(e.embeddings, "the embedding layer's output");
  const std::vector<AttentionCapture>& layers = e.blocks.front().layers;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const AttentionCapture& c = layers[l];
    const Tensor hidden = l < e.hidden.size() ? e.hidden[l] : Tensor();
    const std::string layer = "layer " + std::to_string(l) + "'s ";
    for (const auto& [t, name] :
         {std::pair{&c.q, "queries"}, std::pair{&c.k, "keys"}, std::pair{&c.v, "values"},
          std::pair{&c.scores, "scores"}, std::pair{&c.weights, "attention weights"},
          std::pair{&c.head_out, "head outputs"}, std::pair{&hidden, "output"}})
      require_finite(*t, layer + name);
  }
  require_finite(e.output.embedding, "the sentence embedding");
  // A decoder's next-token probabilities: the output norm and matrix come after every capture.
  for (const auto& [token, p] : e.output.next_tokens)
    require_finite(p, "the next-token probabilities");
}

void require_finite(double x, const std::string& what) {
  if (!std::isfinite(x)) throw Error(what + " came out " + spelled(x) + kWhy, Error::Kind::runtime);
}

void require_finite(const Tensor& t, const std::string& what) {
  if (!t.defined()) return;
  const int64_t bad = first_non_finite(t);
  if (bad >= 0) require_finite(t.value(bad), what);
}

}  // namespace qkv::cli
