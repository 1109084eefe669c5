// explain/terminal/alignment.h — a trained seq2seq model's cross-attention as a terminal heatmap:
// source characters across, output characters down, as in Bahdanau et al. 2014, Figure 3.
#pragma once

#include <string>
#include <vector>

#include "explain/terminal/terminal.h"
#include "qkv/tensor.h"

namespace qkv::explain {

// weights: [outputs.size(), source characters] (float64), each row the attention of one output
// step over the source. `outputs` labels the rows ("2", "0", …, "</s>"). Two columns a source
// character; a space in the source shows as "␣". Shades without colour, a ramp with it.
std::string render_alignment(const std::string& source, const std::vector<std::string>& outputs,
                             const Tensor& weights, const Style& style);

}  // namespace qkv::explain
