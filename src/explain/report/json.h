// explain/report/json.h — everything a captured run holds, as JSON (`qkv explain --json`).
#pragma once

#include <nlohmann/json.hpp>

#include "explain/explained.h"

namespace qkv::explain {

// A tensor as nested arrays (C order); non-finite numbers as the strings "-inf", "inf", "nan".
nlohmann::json tensor_json(const Tensor& t);

// {text, tokens: [{index, id, text, surface, word, special}], focus, config, embedding,
//  layers: [{q, k, v, scores, logits, weights, head_out, hidden}]} — per layer tensors are
// [heads, tokens, ...] (the batch of one dropped); `layer` alone (≥ 0) keeps only that layer.
nlohmann::json to_json(const Explained& e, int64_t focus, int64_t layer = -1);

}  // namespace qkv::explain
