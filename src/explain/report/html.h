// explain/report/html.h — one self-contained HTML report of a Report (explain/report/report.h):
// inline CSS and JavaScript (src/explain/report/html/report.{css,js}, compiled in), the data
// embedded as JSON with the numbers in base64, no network request of any kind, works from file://.
//
// Views, linked by one selection (block, layer, head, query token): the model grid of every
// layer × head, the heatmap of one head, the line view (every head of a layer, a colour each) and
// the step view (q, each k, q∘k, q·k, ÷√d_k, softmax, each weighted v and their sum).
//
// Size: q and k travel as float32, v as float16, the grid's thumbnails as ≤ 64 × 64 bytes; the
// page computes the weights of the layer on screen from q and k. A 256-token MiniLM report is
// about 8 MB; reports whose blocks carry their own logits (trained models, qkv attend) embed
// those and the weights as float32. A block of weights only (a Perceiver's latents) embeds them
// as float32, 5.3 bytes a weight, and a key without flags as its text: a Perceiver of 16 latents
// × 4 heads is 1.4 MB over 4,096 symbols and 22 MB over 65,536 (its own page was 5.9 and 94 MB,
// every weight a JSON number). Its heatmap draws at most 1,100 columns, pooled by their largest
// weight, whatever the length.
#pragma once

#include <string>

#include "qkv/explain.h"

namespace qkv::explain {

// The encodings the page decodes, exposed for tests: base64 (RFC 4648) of raw bytes, and
// IEEE 754 binary16 with round-to-nearest-even (overflow → ±∞).
std::string base64(const void* data, std::size_t size);
uint16_t to_half(float x);

// JSON for inside <script>: no "<" at all ("</script>" would end the element early, "<!--<script"
// would change how the parser reads it); "<" can only sit inside a JSON string, as \u003c.
std::string script_json(std::string json);

}  // namespace qkv::explain
