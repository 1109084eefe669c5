// A decoder's causal lens (Run::lens) as JSON: the "heads" list scripts rely on (one entry per
// layer and head: layer, head, ablation_logit_change, direct_logit_attribution, ...) and "lens"
// with the target, the attribution, the logit lens, knockout and patching.
#pragma once

#include <nlohmann/json.hpp>

#include "qkv/explain_run.h"

namespace qkv::explain {

// Adds "heads" and "lens" to j when the run has a lens; nothing otherwise.
void add_lens_json(nlohmann::json& j, const Run& run);

}  // namespace qkv::explain
