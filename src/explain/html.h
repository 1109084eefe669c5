// explain/html.h — one self-contained HTML report of a captured run (issue 6, first cut): inline
// CSS and JavaScript, the data embedded as JSON, no network request, works from file://.
// Views, linked by one selection (layer, head, query token): the model grid of every layer × head,
// the heatmap of one head, the line view (lines weighted by attention) and the step view (q, each
// k, q·k, ÷√d_k, softmax, each weighted v and their sum).
#pragma once

#include <string>

#include "explain/explained.h"

namespace qkv::explain {

std::string html_report(const Explained& e, int64_t focus);

}  // namespace qkv::explain
