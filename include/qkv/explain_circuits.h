// qkv/explain_circuits.h — circuits from the weights alone (Elhage et al. 2021, "A Mathematical
// Framework for Transformer Circuits"), for any model with a residual stream (qkv/residual.h). No
// sentence is run: a head's matrices say what it looks for and what it moves.
//
//   QK circuit   which tokens look for which: a query token's and a key token's vectors through
//                layer l's attention norm, then W_Q^h and W_K^{kv(h)} (kv(h) = h / (H / Hkv)),
//                RoPE applied to q and k only (the query Δ positions after the key), scaled by
//                1/√d: the attention logit the head would give that pair
//   OV circuit   what each token's value promotes: the token's vector through the attention norm,
//                W_V^{kv(h)}, W_O^h, the final norm and the unembedding: logits over the vocabulary
//   composition  how much a later head reads what an earlier head writes (§"Three Kinds of
//                Composition"): ‖M · W_OV^{h1}‖_F / (‖M‖_F ‖W_OV^{h1}‖_F) with M = W_QK^{h2} (K-),
//                W_QK^{h2}ᵀ (Q-) or W_OV^{h2} (V-composition)
//
// The direct path: the QK and OV tables read each token's own embedding as the stream (each token
// alone, as at position 0). That is exact for layer 0, whose input is the embedding; for a deeper
// layer it is an approximation — its input holds what every earlier layer wrote, which the tables
// leave out. Position enters the QK table only through RoPE on q and k; v and the stream carry
// none.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qkv/explain_readings.h"
#include "qkv/json.h"
#include "qkv/residual.h"
#include "qkv/tensor.h"

namespace qkv::explain {

// ---- the QK circuit ----
struct QkOptions {
  // Δ = the query's position − the key's (0 … context − 1; a causal model shows no key after its
  // query). With RoPE the logit depends on Δ alone: the key sits at position 0, the query at Δ.
  int64_t offset = 0;
};

struct QkTable {
  int64_t layer = 0, head = 0, kv_head = 0;
  int64_t offset = 0;               // Δ
  double scale = 0;                 // 1/√head_dim
  std::vector<int32_t> ids;         // the tokens: rows (queries) and columns (keys)
  std::vector<std::string> tokens;  // their text (ResidualModel::token_text)
  // [T, T] float64: logits[i][j] = scale · q(ids[i], position Δ) · k(ids[j], position 0) — the
  // attention logit of query token i on key token j, before the causal mask and the softmax.
  Tensor logits;
};

// Layer `layer`'s head `head` over `ids` (1 … context tokens, repeats allowed). A qkv::Error
// (Kind::invalid_argument) for a layer, head, id or offset out of range.
QkTable qk_table(const ResidualModel& model, int64_t layer, int64_t head,
                 const std::vector<int32_t>& ids, const QkOptions& options = {});

// ---- the OV circuit ----
struct OvOptions {
  std::vector<int32_t> outputs;  // output tokens whose logits every row reports
  int64_t top = 5;               // how many of the most promoted tokens each row keeps (≥ 0)
};

struct Promoted {
  int32_t id = 0;
  std::string token;  // its text
  double logit = 0;
};

struct OvRow {
  int32_t id = 0;     // the input token
  std::string token;  // its text
  double norm = 0;  // ‖W_O^h W_V x‖: the size of what the head writes for it (before the norm)
  std::vector<Promoted> top;    // the most promoted output tokens, largest logit first
  std::vector<double> outputs;  // the logit of each of OvOptions::outputs, in order
};

// What the head writes when it attends wholly (weight 1) to one token, read through the final norm
// and the unembedding. Exact, given the direct path's input, up to the final norm: it is applied
// to the head's output alone (its own RMS), while in a run its scale comes from the whole stream.
// An RMSNorm's scale is one positive number a row, so each row's ranking of output tokens is
// exact and only its logits' size depends on that choice; a norm that centres (LayerNorm) makes
// the ranking an approximation too.
struct OvTable {
  int64_t layer = 0, head = 0, kv_head = 0;
  std::vector<int32_t> outputs;
  std::vector<std::string> output_tokens;
  std::vector<OvRow> rows;  // one per input token
};

// A qkv::Error (Kind::invalid_argument) for a layer, head or id out of range.
OvTable ov_table(const ResidualModel& model, int64_t layer, int64_t head,
                 const std::vector<int32_t>& ids, const OvOptions& options = {});

// ---- composition between heads ----
// With the model's [out, in] matrices (y = x·Wᵀ) and column vectors: W_Q^h, W_K^h, W_V^h [d,
// hidden] (head h's rows; K and V its kv head's), W_O^h [hidden, d] (head h's columns), and
//   W_QK^h = W_Q^hᵀ W_K^h   [hidden, hidden], the logit of x_q on x_k: scale · x_qᵀ W_QK x_k
//   W_OV^h = W_O^h W_V^h    [hidden, hidden], what the head writes for a value input x: W_OV x
// K-composition: h2's keys read h1's output, x_qᵀ W_QK^{h2} (W_OV^{h1} x_k), so M = W_QK^{h2};
// Q-composition: (W_OV^{h1} x_q)ᵀ W_QK^{h2} x_k, so M = W_QK^{h2}ᵀ; V-composition: M = W_OV^{h2}
// (Elhage et al. 2021's three formulas). RoPE is taken at relative offset 0, where its rotations
// cancel (R_pᵀ R_p = I); at Δ ≠ 0 a rotation sits inside W_QK and the score changes. No random
// baseline is subtracted (the paper subtracts an empirical one); for B rotated at random,
// E‖AB‖² = ‖A‖²‖B‖² / hidden, so unrelated heads score about 1/√hidden (0.042 for SmolLM2).
enum class Composition { query, key, value };

struct CompositionOptions {
  Composition kind = Composition::key;
  // Fold each layer's attention-norm gain g into its own W_Q, W_K and W_V (W · diag(g)): the
  // reader's norm sits between the writer's output and the reader's matrices, the writer's before
  // its W_V. The norm's 1/RMS is one number a row and cancels in the score. The gain is read by
  // probing the norm, which must be a diagonal scale (RMSNorm); another norm is a qkv::Error —
  // set this false to score the raw matrices.
  bool fold_norm = true;
};

// The score of head (reader_layer, reader_head) reading head (writer_layer, writer_head), writer
// in an earlier layer. Computed through head_dim × head_dim products (W_QK and W_OV have rank ≤
// head_dim): ‖P A S‖_F² = tr(PᵀP · A · SSᵀ · Aᵀ), never a hidden × hidden matrix.
double composition_score(const ResidualModel& model, int64_t reader_layer, int64_t reader_head,
                         int64_t writer_layer, int64_t writer_head,
                         const CompositionOptions& options = {});

// Every head of layers 0 … layer − 1 as the writer, (layer, head) as the reader: [layer, heads]
// float64.
Tensor composition_scores(const ResidualModel& model, int64_t layer, int64_t head,
                          const CompositionOptions& options = {});

// One reader's strongest composers.
struct Composers {
  int64_t layer = 0, head = 0;
  double induction = 0;         // the reader's score as the caller gave it (an induction score)
  std::vector<ScoredHead> top;  // (score, layer, head) of the earlier heads, largest first
  Tensor scores;                // [layer, heads] float64: every earlier head's
};

// composition_scores for each head of `readers` (head_roles(run).induction: the induction heads
// qkv detects), each with its `top` strongest earlier heads. Heads of layer 0 have none. Runs on
// the qkv thread pool.
std::vector<Composers> top_composers(const ResidualModel& model,
                                     const std::vector<ScoredHead>& readers, int64_t top = 5,
                                     const CompositionOptions& options = {});

// ---- one head's circuits, as `qkv explain --circuit L.H` shows them ----
struct CircuitRequest {
  int64_t layer = 0, head = 0;
  std::string tokens;  // comma-separated texts, each one token; empty: the run's own tokens
  int64_t offset = 0;  // the QK table's Δ
};
struct Circuit {
  QkTable qk;
  OvTable ov;  // its outputs: the tokens themselves
  // The induction heads the run found (head_roles) and their top K-composers.
  std::vector<Composers> composers;
};
// The head's QK and OV tables over the tokens, and the run's induction heads' composers. A token
// text that is not one token of the vocabulary is a qkv::Error (Kind::invalid_argument) naming it.
Circuit read_circuit(const ResidualModel& model, const Run& run, const CircuitRequest& request);
// The three as one terminal view / JSON object {qk, ov, composers}.
std::string circuit_text(const Circuit& circuit);
nlohmann::json circuit_json(const Circuit& circuit);

// ---- views: text at 80 columns, and JSON ----
// QK: the tokens as rows (queries) and columns (keys), in blocks of columns that fit 80.
std::string qk_text(const QkTable& table);
// OV: one row a input token: its norm, its top tokens, the chosen outputs' logits.
std::string ov_text(const OvTable& table);
// Each reader, its induction score, its top composers. `kind` names the scores.
std::string composers_text(const std::vector<Composers>& readers,
                           Composition kind = Composition::key);

// {layer, head, kv_head, offset, scale, tokens: [{id, text}], logits: [[…]]}
nlohmann::json qk_json(const QkTable& table);
// {layer, head, kv_head, outputs: [{id, text}], rows: [{id, text, norm, top: [{id, text, logit}],
//  outputs: [logit…]}]}
nlohmann::json ov_json(const OvTable& table);
// {kind, readers: [{layer, head, induction, top: [{layer, head, score}], scores: [[…]]}]}
nlohmann::json composers_json(const std::vector<Composers>& readers,
                              Composition kind = Composition::key);

}  // namespace qkv::explain
