// A decoder's causal lens (Run::lens) as JSON: the "heads" list scripts rely on (one entry per
// layer and head: layer, head, ablation_logit_change, direct_logit_attribution, ...) and "lens"
// with the target, the attribution, the logit lens, knockout and patching.
#pragma once

#include <nlohmann/json.hpp>

#include "qkv/explain_run.h"

namespace qkv::explain {

// Adds "heads" and "lens" to j when the run has a lens; nothing otherwise. An encoder–decoder's
// document has its own "heads" (each head's alignment): `heads_in_lens` puts the lens's in "lens".
void add_lens_json(nlohmann::json& j, const Run& run, bool heads_in_lens = false);

}  // namespace qkv::explain
