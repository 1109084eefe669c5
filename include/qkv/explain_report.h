// qkv/explain_report.h — what the HTML report shows, whatever made it: a captured run's blocks
// (qkv/explain_run.h: BERT's self-attention; a trained encoder-decoder's three attentions; a
// Perceiver's latents) or one call of `qkv attend`, each block with its layers' per-head q, k, v
// and weights; the one self-contained page of it; and a run as JSON text.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "qkv/explain_readings.h"
#include "qkv/explain_run.h"

namespace qkv::explain {

// The page's tokens and blocks are the run's: text, special (hidden by "hide special tokens"),
// punctuation ("hide punctuation") and segment (0: sentence A, 1: sentence B) of a token.
using ReportToken = TokenInfo;
// A block as the page gets it: q [H, n, d], k [Hk, m, d] (query head h reads key head h·Hk/H),
// v [Hk, m, dv], weights [H, n, m] (any dtype), one batch entry. logits [H, n, m] undefined: the
// page computes them as scale·q·k with the first layer's causal mask, and the weights as their
// softmax (the compact form a long input needs); given: the page shows these and the weights as
// they are. The first layer's score, scale, causal and normalize describe the block. A block
// without q and k (a Perceiver's latents over up to 65,536 symbols) shows its weights only, as
// float32, in a heatmap of its own: a label a query row, one head or the heads' mean, the keys
// pooled by their largest weight where more than fit, the Report's marked keys above it.
using ReportBlock = Block;

// A table under the page's views, in the terminal's words and numbers (a Perceiver's latents:
// latent_table's rows), written into the page as HTML (every word escaped).
struct ReportTable {
  std::string title;                            // its heading: "What each latent gathers"
  std::string intro;                            // a paragraph above it
  std::vector<std::string> columns;             // a head a column of cells
  std::vector<std::string> rows;                // a label a row: "latent 3"
  std::vector<std::vector<std::string>> cells;  // [row][column], formatted as the terminal's
  // A bar a row (its length, 0 to 1) in a column of its own before column bar_at; empty: none.
  std::vector<double> bars;
  std::size_t bar_at = 0;
};

// What made the attention on a page: its "How to read this page" box says what is true of it
// (explain/report/legend.h) and the views leave out what does not apply.
enum class ReportSource {
  encoder,    // a learned encoder (BERT, MiniLM): W_Q, W_K, W_V a head, scaled dot product
  decoder,    // a decoder-only LLM (SmolLM2): the same, causal, RoPE on q and k, shared kv heads
  seq2seq,    // an encoder-decoder transformer trained by qkv train: three attentions
  rnnsearch,  // Bahdanau et al.'s additive attention: keys = values = h_j, no W_V
  given,      // Q, K, V as given (qkv attend, a worked example): no learned matrices
  perceiver,  // learned latent queries over a long input
};

struct Report {
  std::string title;  // "all-MiniLM-L6-v2"
  ReportSource source = ReportSource::given;
  // given: some run builds Q, K or V from inputs with matrices written by hand (Q = X·W_Q).
  bool hand_projections = false;
  std::vector<std::pair<std::string, std::string>> texts;  // (label, text) shown on top
  std::vector<ReportBlock> blocks;
  int64_t focus = 0;            // the query selected first, in blocks[0]
  int64_t layer = 0, head = 0;  // the head selected first
  // A weights-only block's keys whose text this is are marked above its heatmap (a Perceiver's
  // counted symbol, "#"); "" marks none.
  std::string marked_key;
  std::vector<ReportTable> tables;
  // A decoder's causal lens and circuit (Run::lens, Run::circuit) as JSON text, {"heads", "lens",
  // "circuit"} as `qkv explain --json` has them; the page draws its lens section from it. Empty:
  // none.
  std::string lens;
};

// Batch entry b of a capture of [B, H, ·, ·] tensors, as [H, ·, ·] (score, scale, mask kept).
AttentionCapture batch_entry(const AttentionCapture& capture, int64_t b);
// [1, ...] → [...]: a batch of one without its batch dimension; undefined stays undefined.
Tensor unbatch(const Tensor& t);

// A captured run as the report shows it, titled `title`: its blocks in the compact form (a
// sentence's: q, k, v and weights, the page computes the logits; a trained model's: the logits
// and weights as computed; a lookup model's phonebook among its texts), its texts, and the layer
// and head it opens on (the suggested head of `focus`; a trained model's last layer). A caller may
// change focus, layer and head after. A Perceiver's run: its input and prediction as texts, its
// latents as a weights-only block with its counted symbol marked, and what each latent gathers
// (gathers(run, 3)) as a table.
Report report_of(const std::string& title, const Run& run, int64_t focus = 0);
// A Perceiver's run with the gathers the terminal shows (`qkv explain --top`): the table's rows
// are latent_table(run, gathers)'s.
Report report_of(const std::string& title, const Run& run, const Gathers& gathers);

// ---- the HTML report (explain/report/html.h: its views and size) ----
// One self-contained page, offline: inline CSS, JavaScript and data.
std::string html_report(const Report& report);

// ---- JSON (`qkv explain --json`) ----
// Every number through qkv::number_json (NaN "NaN", ±∞ "Infinity"/"-Infinity"). A byte-level
// token holding part of a character shows as U+FFFD.
struct JsonOptions {
  int64_t focus = 0;  // a sentence's focus token
  // A sentence: ≥ 0 keeps only that layer; a trained model: the alignment's (-1: the last).
  int64_t layer = -1;
  int64_t head = 0;        // a trained model: the alignment's head
  int64_t top = 3;         // a Perceiver: positions a latent
  std::string model_path;  // a trained model's file, as the JSON shows it
  std::string html_path;   // a Perceiver: the report written beside, "" for none (null)
};
// A sentence: {text, text_b, truncated, model, scale, tokens, focus, embedding,
// embeddings_layer_norm, layers: [{q, k, v, scores, logits, weights, head_out, hidden, ov_norms,
// mixing, rollout, mixing_rollout} (with `layer`, also w_o, mixing_gain, stream_in: see
// explain/report/values_json.h)], values} and a decoder's {causal, next_tokens, induction} — per
// layer tensors [heads, tokens, ...]. A trained
// encoder-decoder: {model, architecture, task, input, output, layer, head, entropy, source, steps,
// alignment, heads}. A Perceiver: {model, length, count, uniform_share, predicted, probabilities,
// latents, html}.
std::string json_of(const Run& run, const JsonOptions& options = {});
// A decoder's lens and circuit alone, {"heads", "lens", "circuit"} as json_of has them; "" when
// the run has neither (Python's Explanation.lens reads it).
std::string lens_json(const Run& run);

}  // namespace qkv::explain
