// explain/report/json.h — everything a captured run holds, as JSON (`qkv explain --json`).
#pragma once

#include <nlohmann/json.hpp>

#include "explain/call/call.h"
#include "explain/explained.h"

namespace qkv::explain {

// {text, tokens: [{index, id, text, surface, word, special}], focus, config, embedding,
//  layers: [{q, k, v, scores, logits, weights, head_out, hidden}]} — per layer tensors are
// [heads, tokens, ...] (the batch of one dropped); `layer` alone (≥ 0) keeps only that layer.
nlohmann::json to_json(const Explained& e, int64_t focus, int64_t layer = -1);

// One call of qkv::attention (`qkv attend --json`): options, shapes, labels, every input and
// result as nested arrays (core/json.h).
nlohmann::json to_json(const AttentionCall& c, const AttentionResult& r);

}  // namespace qkv::explain
