// qkv/explain.h — attention made visible: a model run or one call of qkv::attention, captured
// (qkv::AttentionCapture) and shown in the terminal, as SVG and PNG images, as one self-contained
// HTML report, and as JSON. `qkv explain` and `qkv attend` are built on it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qkv/attention.h"
#include "qkv/model.h"
#include "qkv/tensor.h"
#include "qkv/terminal.h"

namespace qkv::explain {

// ---- a text through the sentence encoder, captured ----
// one text through the model with everything captured, and the questions
// a reader asks of it: which token to focus on, which keys each head's query picks, whether a
// head looks at another word (not the token itself, [CLS], [SEP] or punctuation). A sentence pair
// runs as BERT reads it, [CLS] A [SEP] B [SEP], each token knowing its segment, so a reader can
// split attention into A→A, A→B, B→A and B→B.

struct TokenInfo {
  std::string text;     // as in the vocabulary: "animal", "##ing", "[CLS]"
  std::string surface;  // the bytes of the original text it came from ("" for [CLS]/[SEP])
  int32_t id = 0;
  // Index of the word it belongs to (pieces share one); -1 for specials. The words of B continue
  // the count after A's, so a word index names one word of the whole sequence.
  int64_t word = -1;
  int segment = 0;           // 0: [CLS] A [SEP]; 1: B [SEP] of a pair
  bool special = false;      // [CLS], [SEP], ...
  bool punctuation = false;  // a token of punctuation only
};

struct Explained {
  std::string model = "all-MiniLM-L6-v2";  // its name, as the views title it
  std::string text;                        // A
  std::string text_b;                      // B of a pair, else empty
  bool pair = false;
  std::vector<TokenInfo> tokens;
  bool truncated = false;
  int64_t layers = 0, heads = 0, head_dim = 0;
  double scale = 0;  // 1/√head_dim, the scaled-dot default
  BertCapture capture;
  Tensor embedding;  // [1, hidden], the sentence embedding (encoders)
  // A decoder (CausalLM): causal attention; query head h shares key/value head h / (heads /
  // kv_heads), whose k and v the capture repeats for each of its query heads; and the model's
  // prediction of the next token, the five most likely with their probabilities.
  bool causal = false;
  int64_t kv_heads = 0;
  std::vector<std::pair<std::string, double>> next_tokens;
  // [layers, heads] (float64): each head's induction score, measured on a random sequence of
  // tokens repeated once: the mean weight a token of the repeat puts on the token that followed
  // its earlier occurrence (Olsson et al. 2022, "In-context Learning and Induction Heads").
  Tensor induction;
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  // weights of query token i over the keys in layer l, head h
  double weight(int64_t l, int64_t h, int64_t i, int64_t j) const;
};

// Tokenizes and runs `text` with capture on (attention in float64 through the reference path).
Explained run(const SentenceModel& model, std::string_view text);
// The pair [CLS] text [SEP] text_b [SEP] (token types 0 then 1), cut to the model's max_length
// as BertTokenizer's 'longest_first' does; surfaces point into the token's own text.
Explained run(const SentenceModel& model, std::string_view text, std::string_view text_b);
// A decoder LLM on `text` (no BOS: as the model was trained), every layer captured.
Explained run(const CausalLM& model, std::string_view text);

// What run() of `tokens` tokens needs at its peak (qkv/memory.h): the model's capture_bytes, and
// with `json` what to_json(e).dump() holds beside it — every q, k, v, score, logit, weight, head
// output and hidden state as a JSON number, in the tree and in its text (measured: 48 to 66 bytes
// a number; 80 counted). SmolLM2's --json on 400 tokens is 157 million numbers: 12 GB.
int64_t run_bytes(const SentenceModel& model, int64_t tokens, bool json);
int64_t run_bytes(const CausalLM& model, int64_t tokens, bool json);

// The default focus: the first pronoun ("it", "he", "she", "they", ...; of A, then of B), else the
// last word.
int64_t default_focus(const Explained& e);
// A token by its text ("it", "##ing"; case-insensitive, the first match; "it:2" the second), or by
// its 0-based index ("7"). Empty when nothing matches.
std::optional<int64_t> find_token(const Explained& e, std::string_view spec);

// Whether key j is another word for query i: not a piece of i's word, not special, not punctuation,
// and not a decoder's first token (its attention sink).
bool is_other_word(const Explained& e, int64_t i, int64_t j);

// What one head's query at the focus token picks.
struct HeadPick {
  int64_t layer = 0, head = 0;
  std::vector<int64_t> top;  // key indices, largest weight first
  bool other_word = false;   // the top key is another word
};
std::vector<HeadPick> picks(const Explained& e, int64_t focus, int top_k);
// The head to look at first: of those whose top key is another word, the deepest (later layers
// carry more of the sentence's meaning), the strongest within its layer; else the first.
HeadPick suggested_head(const Explained& e, int64_t focus, const std::vector<HeadPick>& all);

// ---- in the terminal ----
// a captured model run, drawn for an 80-column terminal: the tokens,
// where the focus token looks in every layer and head, and one head zoomed in (weights heatmap plus
// the focus token's query, scores, softmax and output, number by number).

struct Style {
  bool color = false;  // ANSI colours (heatmap backgrounds, highlights); off for pipes
  int top = 3;         // keys shown per head in the overview
};

// The text, its tokens with their indices, and what the focus token's attention computes.
std::string render_tokens(const Explained& e, int64_t focus, const Style& style);
// Per layer and head, the focus token's top keys with weight bars; then the heads whose top key
// is another word, grouped by that word.
std::string render_overview(const Explained& e, int64_t focus, const Style& style);
// A decoder's own story (e.causal): the causal mask and the grouped heads, its attention sinks and
// previous-token heads (mean weight over the text's later tokens above one half), and the five
// most likely next tokens.
std::string render_decoder(const Explained& e, const Style& style);
// One head: the weights matrix as a heatmap, then the focus token step by step.
std::string render_head(const Explained& e, int64_t layer, int64_t head, int64_t focus,
                        const Style& style);

// ---- a trained model's alignment in the terminal ----
// a trained seq2seq model's cross-attention as a terminal heatmap:
// source characters across, output characters down, as in Bahdanau et al. 2014, Figure 3.

// weights: [outputs.size(), source characters] (float64), each row the attention of one output
// step over the source. `outputs` labels the rows ("2", "0", …, "</s>"). Two columns a source
// character; a space in the source shows as "␣". Shades without colour, a ramp with it.
std::string render_alignment(const std::string& source, const std::vector<std::string>& outputs,
                             const Tensor& weights, const Style& style);

// RNNsearch (a capture with architecture rnnsearch): which vectors are its query (s_{i−1}), keys
// and values (both h_j), the sharpest output step worked number by number, and the mapping onto a
// transformer's W_Q, W_K, W_V.
std::string render_rnnsearch(const Seq2SeqCapture& c);

// ---- text for terminals: qkv/terminal.h (core), named here as before ----
using qkv::bar;
using qkv::clip;
using qkv::display_width;
using qkv::fixed;
using qkv::grouped;
using qkv::heatmap_cell;
using qkv::pad_left;
using qkv::pad_right;
using qkv::printable;
using qkv::render;
using qkv::short_number;
using qkv::split_commas;
using qkv::Table;
using qkv::wrap;

// ---- SVG images ----
// images of a captured run, written by qkv itself (no browser): one head's
// weights as a labelled heatmap, or the model grid of every layer × head.

// The weights of `layer`, `head`: queries down, keys across, token labels on both sides.
std::string svg_heatmap(const Explained& e, int64_t layer, int64_t head);
// Every layer (rows) × head (columns) as small heatmaps.
std::string svg_model_grid(const Explained& e);

// ---- PNG images (drawn by qkv itself: explain/image/) ----
// The PNG file of the weights of `layer`, `head`; throws qkv::Error for a layer or head the
// capture does not have.
std::string png_heatmap(const Explained& e, int64_t layer, int64_t head);
// The PNG file of every layer (rows) × head (columns) as thumbnails.
std::string png_model_grid(const Explained& e);

// ---- the HTML report's data ----
// what the HTML report shows, whatever model made it: token lists and
// blocks of attention (BERT's self-attention; a trained encoder-decoder's encoder self-, decoder
// self- and cross-attention; one call of `qkv attend`), each block with its layers' per-head q, k,
// v and weights. html.h turns a Report into one self-contained page.

struct ReportToken {
  std::string text;
  bool special = false;      // [CLS], [SEP], <s>, </s>: hidden by "hide special tokens"
  bool punctuation = false;  // hidden by "hide punctuation"
  int segment = 0;           // 0: sentence A, 1: sentence B (pairs)
};

struct ReportBlock {
  std::string name;  // "self-attention", "cross-attention", ...
  std::string note;  // one line under the name: what asks and what answers
  std::vector<ReportToken> queries, keys;
  bool same_tokens = true;  // queries and keys are the same tokens (self-attention)
  // Names of the numbers of q and k (d of them) and of v (dv), where they mean something (a
  // worked example's features: "j", "o", "oh", ...; "1st", ...); empty: learned, unnamed.
  std::vector<std::string> key_features, value_features;
  // One per layer, one batch entry each: q [H, n, d], k [Hk, m, d] (query head h reads key head
  // h·Hk/H), v [Hk, m, dv], weights [H, n, m] (any dtype). logits [H, n, m] undefined: the page
  // computes them as scale·q·k with the first layer's causal mask, and the weights as their
  // softmax (the compact form a long input needs); given: the page shows these and the weights as
  // they are. The first layer's score, scale, causal and normalize describe the block.
  std::vector<AttentionCapture> layers;
};

// What made the attention on a page: its "How to read this page" box says what is true of it
// (explain/report/legend.h) and the views leave out what does not apply.
enum class ReportSource {
  encoder,    // a learned encoder (BERT, MiniLM): W_Q, W_K, W_V a head, scaled dot product
  decoder,    // a decoder-only LLM (SmolLM2): the same, causal, RoPE on q and k, shared kv heads
  seq2seq,    // an encoder-decoder transformer trained by qkv train: three attentions
  rnnsearch,  // Bahdanau et al.'s additive attention: keys = values = h_j, no W_V
  given,      // Q, K, V as given (qkv attend, a worked example): no learned matrices
  perceiver,  // learned latent queries over a long input (its own page: perceiver_report.h)
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
};

// Batch entry b of a capture of [B, H, ·, ·] tensors, as [H, ·, ·] (score, scale, mask kept).
AttentionCapture batch_entry(const AttentionCapture& capture, int64_t b);
// [1, ...] → [...]: a batch of one without its batch dimension; undefined stays undefined.
Tensor unbatch(const Tensor& t);

// A BERT run with everything captured (explain::run): one self-attention block, every layer.
Report report_of(const Explained& e, int64_t focus, const std::string& title);

// A trained encoder-decoder on one source (Seq2Seq::capture): three blocks — the encoder's
// self-attention, the decoder's causal self-attention, and the cross-attention from the
// decoder's positions to the source — each with the logits and weights as computed.
Report report_of(const Seq2SeqCapture& c, const std::string& title);

// ---- the HTML report (explain/report/html.h: its views and size) ----
// One self-contained page, offline: inline CSS, JavaScript and data.
std::string html_report(const Report& report);

// ---- JSON ----

struct AttentionCall;  // below
// everything a captured run holds, as JSON (`qkv explain --json`).

// {text, tokens: [{index, id, text, surface, word, special}], focus, config, embedding,
//  layers: [{q, k, v, scores, logits, weights, head_out, hidden}]} — per layer tensors are
// [heads, tokens, ...] (the batch of one dropped); `layer` alone (≥ 0) keeps only that layer.
nlohmann::json to_json(const Explained& e, int64_t focus, int64_t layer = -1);

// One call of qkv::attention (`qkv attend --json`): options, shapes, labels, every input and
// result as nested arrays (core/json.h).
nlohmann::json to_json(const AttentionCall& c, const AttentionResult& r);

// ---- one call of qkv::attention ----
// One attention computation as `qkv attend` shows it: inputs, options,
// labels, and optionally the projections that made Q, K and V — from the user's .npy files or from
// a worked example.

// "Q = X · W_Q": shown as a step before the scores when an example builds Q, K or V this way.
struct Projection {
  std::string result_name;  // "Q", "K" or "V"
  std::string input_name;   // "X"
  std::string weight_name;  // "W_Q"
  Tensor input, weight;     // [rows, d_in], [d_in, d_out]
};

struct AttentionCall {
  std::string caption;
  Tensor q, k, v;
  AttentionOptions options;
  std::vector<std::string> query_labels, key_labels, value_columns;
  std::vector<std::string> input_columns;  // names of the features of the projections' inputs
  std::vector<Projection> projections;
};

// The case's scale: the option if set, else the score's default for its head dim.
double effective_scale(const AttentionCall& c);

// Runs the case on the reference path with every intermediate kept (scores, logits, weights,
// logsumexp), for the step-by-step view and --json.
AttentionResult run_case(const AttentionCall& c);

// ---- one call, step by step ----
// How `qkv attend` shows a result: every step for a small single-head case,
// a summary otherwise, and everything as JSON.

struct StepOptions {
  int digits = 2;                      // decimals of printed numbers
  int top = 3;                         // keys listed per query in a summary
  bool same_inputs_as_before = false;  // a later run of an example: do not repeat Q, K, V
};

// True when the case is small enough to print every step: one batch and head, ≤ 16 queries/keys.
bool fits_step_by_step(const AttentionCall& c);

// Scores, scaling, mask, softmax, output and each output row as a weighted sum of value rows.
std::string explain_steps(const AttentionCall& c, const AttentionResult& r, const StepOptions& o);
// How many (batch, head) pairs and query rows a summary shows.
inline constexpr int64_t kSummaryPairs = 2, kSummaryRows = 8;
// Shapes, options, and the top keys of the first queries of the first heads: first[h] is the
// reference run (run_case) of first_rows(c, h, rows) for the first pairs h.
std::string summarize(const AttentionCall& c, const std::vector<AttentionResult>& first,
                      const StepOptions& o);

// ---- one call: what it computes and its memory ----
// What `qkv attend` computes, and how much memory it takes: the L×S matrices
// (weights, scores, logits) exist only where an output needs them all (--weights, --json, --html)
// or the case is small enough to explain step by step; the text summary of a large case runs the
// reference on the few query rows it shows. So the fused path stays O(L·D) end to end, and anything
// that needs the L×S matrices says how much memory before it starts and refuses past a limit.

// B·Hq·L·S: the attention weights of the case (INT64_MAX where that overflows).
int64_t weight_count(const AttentionCall& c);

// (batch, head) pairs, B·Hq.
int64_t head_pairs(const AttentionCall& c);

// Bytes the float64 reference takes beyond the inputs when it keeps every weight, score and logit
// (run_case: qkv::attention_bytes of its options), and with --json the JSON of them too.
int64_t reference_bytes(const AttentionCall& c, bool json);

// The first `rows` query rows of flat (batch, head) pair `pair`, as a problem of its own: q
// [rows, Dq], k and v [S, D] of the pair's kv head, and every mask of the whole problem — the
// user's, causal with the whole problem's alignment, key lengths — as one float mask [rows, S]
// (−∞ where hidden). Its reference run gives exactly those rows of the whole run.
AttentionCall first_rows(const AttentionCall& c, int64_t pair, int64_t rows);

// ---- one call in the HTML report ----
// `qkv attend --html`: one call of attention (or every run of a worked
// example) as the HTML report's blocks — one block per run and batch entry, its heads side by side.

Report report_of(const std::string& title, const std::vector<std::string>& story,
                 const std::vector<AttentionCall>& cases,
                 const std::vector<AttentionResult>& results);

}  // namespace qkv::explain
