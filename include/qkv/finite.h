// qkv/finite.h — the last line of defence of a model's results: a number that came out NaN or ∞
// (weights too large for float32, a model the load-time checks could not fault) is a qkv::Error
// (Kind::runtime) that names what went wrong, never shown as if it were a number ("nan"):
//   "layer 5's output came out +∞; the model computes non-finite numbers (its weights overflow
//    float32 or are corrupt), so there is no result to show"
// (A captured run, every tensor of it: explain::require_finite in qkv/explain_run.h.)
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "qkv/tensor.h"

namespace qkv {

// A number about to be shown; `what` names it ("cos(a, b)").
void require_finite(double x, const std::string& what);
// A tensor about to be shown; `what` names it ("the cross-attention weights"). Undefined: nothing
// to check (a decoder keeps no sentence embedding).
void require_finite(const Tensor& t, const std::string& what);
// embeddings [N, d], a row a text: "the embedding of LABEL came out NaN; ...", where `label(i)`
// names text i (the command's "text 2 (\"one\")", Python's "sentences[1]").
void require_finite_rows(const Tensor& embeddings,
                         const std::function<std::string(int64_t)>& label);

}  // namespace qkv
