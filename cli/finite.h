// The model commands' last line of defence: a result that came out NaN or ∞ (weights too large
// for float32, a model the load-time checks could not fault) is a runtime error, exit 1, that
// names what went wrong; it is never printed as if it were a number ("nan", "0.0000").
#pragma once

#include <string>
#include <vector>

#include "qkv/explain.h"
#include "qkv/tensor.h"

namespace qkv::cli {

// embeddings: [N, d], one row per text of `texts`.
void require_finite_embeddings(const Tensor& embeddings, const std::vector<std::string>& texts);
// Every captured query, key, value, score, weight, head output and hidden state of an explained
// run, its sentence embedding, and a decoder's next-token probabilities.
void require_finite_capture(const explain::Run& e);
// A number about to be shown; `what` names it ("cos(a, b)").
void require_finite(double x, const std::string& what);
// A tensor about to be shown; `what` names it ("the cross-attention weights").
void require_finite(const Tensor& t, const std::string& what);

}  // namespace qkv::cli
