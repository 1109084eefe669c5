// qkv/explain_views.h — a captured run (qkv/explain_run.h) in the terminal and as images: the
// tokens, where the focus token looks in every layer and head, one head zoomed in, a decoder's
// heads, an encoder-decoder's alignment, a Perceiver's latents; SVG and PNG heatmaps written by
// qkv itself (no browser). Each view reads the run and its readings (qkv/explain_readings.h) only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qkv/explain_readings.h"
#include "qkv/explain_run.h"
#include "qkv/tensor.h"

namespace qkv::explain {

// ---- in the terminal: a sentence (BERT, a decoder) ----
// Drawn for an 80-column terminal: the tokens, where the focus token looks in every layer and
// head, and one head zoomed in (weights heatmap plus the focus token's query, scores, softmax and
// output, number by number).

struct Style {
  bool color = false;  // ANSI colours (heatmap backgrounds, highlights); off for pipes
  int top = 3;         // keys shown per head in the overview; positions per latent (Perceiver)
};

// The text, its tokens with their indices, and what the focus token's attention computes.
std::string render_tokens(const Run& run, int64_t focus, const Style& style);
// Per layer and head, the focus token's top keys with weight bars; then the heads whose top key
// is another word, grouped by that word.
std::string render_overview(const Run& run, int64_t focus, const Style& style);
// A decoder's own story (run.causal()): the causal mask and the grouped heads, its attention sinks
// and previous-token heads (mean weight over the text's later tokens above one half), its
// induction heads, and the five most likely next tokens.
std::string render_decoder(const Run& run, const Style& style);
// A decoder's causal lens (run.lens; empty without one): which heads carried the target — by
// ablation and by direct logit attribution, where each looked — the logit lens, and the knockout
// and patching asked for.
std::string render_lens(const Run& run, const Style& style);
// One head: the weights matrix as a heatmap, then the focus token step by step.
std::string render_head(const Run& run, int64_t layer, int64_t head, int64_t focus,
                        const Style& style);
// ---- in the terminal: what the values carried (terminal/values.cpp) ----
// One head's focus row weighted by its values (α_ij·‖W_O^h v_j‖ beside α_ij: Kobayashi et al.
// 2020), then where the focus token's new vector came from in that layer (the residual-and-norm
// mixing, Kobayashi et al. 2021) and through the layers so far (attention rollout, Abnar &
// Zuidema 2020). "" for a run without value norms.
std::string render_head_values(const Run& run, int64_t layer, int64_t head, int64_t focus,
                               const Style& style);
// The attention sinks (head_roles) with their values: weight on token 0, token 0's ‖W_O^h v‖
// against the other tokens' mean, and token 0's value-weighted share. "" without sinks or norms.
std::string render_sinks(const Run& run, const Style& style);

// ---- in the terminal: an encoder-decoder `qkv train` made ----
// weights: [outputs.size(), source characters] (float64), each row the attention of one output
// step over the source. `outputs` labels the rows ("2", "0", …, "</s>"). Two columns a source
// character; a space in the source shows as "␣". Shades without colour, a ramp with it.
std::string render_alignment(const std::string& source, const std::vector<std::string>& outputs,
                             const Tensor& weights, const Style& style);

// RNNsearch (family rnnsearch): which vectors are its query (s_{i−1}), keys and values (both h_j),
// the sharpest output step worked number by number, and the mapping onto a transformer's W_Q, W_K,
// W_V.
std::string render_rnnsearch(const Run& run);

// The whole terminal view of a trained encoder-decoder: the model, input and output, the
// alignment of decoder layer `layer` and head `head` (given: named by --head; else the sharpest),
// the phonebook of a lookup model, and RNNsearch's worked step or the heads' entropies.
struct Seq2SeqView {
  int64_t layer = 0;
  std::optional<int64_t> head;  // none: the sharpest
  Style style;
};
std::string render_seq2seq(const Run& run, const Seq2SeqView& view);

// A lookup model's phonebook (qkv/explain_readings.h) as lines for the terminal and the report
// (each ≤ 78 columns): the binding, the match, the value, and the SQL the lookup stands for in the
// terms of the model's own attention (additive for RNNsearch).
std::vector<std::string> phonebook_lines(const Phonebook& book);

// ---- in the terminal: a Perceiver ----
// What each latent gathers, formatted once for the terminal's table and the page's alike, so that
// the two show the same numbers to the same digits.
struct LatentRow {
  std::string label;                  // "latent 3"
  double bar = 0;                     // its weight on the counted symbol ÷ the largest latent's
  std::string counted;                // the heads' mean weight on the counted symbol, "0.031"
  std::string times_uniform;          // that ÷ the uniform look's, "10.7×"; "—" without a count
  std::vector<std::string> per_head;  // each head's weight on it, "0.02"
  std::string spread;                 // exp(entropy) of the heads' mean weights, "1,021"
  std::vector<std::string> top;       // the positions it weighs most, "#@27"
};

struct LatentTable {
  std::string probability;     // of the prediction, "0.999"
  std::string uniform_share;   // what a uniform look puts on the counted symbol, "0.0029"
  std::string uniform_weight;  // what it puts on one position (1 / length), "0.00098"
  std::vector<LatentRow> rows;
};
LatentTable latent_table(const Run& run, const Gathers& gathers);

// The input, the prediction and latent_table's rows.
std::string render_perceiver(const Run& run, const Gathers& gathers);

// ---- SVG images ----
// One <rect> a weight: past a million (the grid of 72 heads at 118 tokens) each refuses with a
// FieldError (field svg) that suggests {png}, or {layer} and {head} for one heatmap.
// The weights of `layer`, `head` of blocks[0]: queries down, keys across, token labels on both
// sides.
std::string svg_heatmap(const Run& run, int64_t layer, int64_t head);
// Every layer (rows) × head (columns) as small heatmaps.
std::string svg_model_grid(const Run& run);

// ---- PNG images (drawn by qkv itself: explain/image/) ----
// The PNG file of the weights of `layer`, `head`; throws qkv::Error for a layer or head the
// capture does not have.
std::string png_heatmap(const Run& run, int64_t layer, int64_t head);
// The PNG file of every layer (rows) × head (columns) as thumbnails.
std::string png_model_grid(const Run& run);

}  // namespace qkv::explain
