// explain/report/legend.h — the "How to read this page" box of every HTML page qkv writes (the
// report of html.h, whatever made it): what attention does, then what is true of the model
// on this page and nothing that is not (no W_V on RNNsearch, no learned matrix in a worked
// example, RoPE on a decoder, latents on a Perceiver), how positions are counted, and how to use
// the views the page shows.
#pragma once

#include <string>

#include "qkv/explain.h"

namespace qkv::explain {

struct LegendOptions {
  ReportSource source = ReportSource::given;
  bool hand_projections = false;  // given: an example builds Q, K or V as X·W with a W by hand
  bool features = false;          // the step view names the numbers of q, k and v
  bool grid = true;               // the report shows the model grid (more than one layer or head)
};

// The box as HTML: <details class="legend" id="legend" data-source="..."> ... </details>.
std::string legend_html(const LegendOptions& options);

// "encoder", "decoder", "seq2seq", "rnnsearch", "given", "perceiver": the page's name of a source.
const char* source_name(ReportSource source);

}  // namespace qkv::explain
