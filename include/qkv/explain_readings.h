// qkv/explain_readings.h — what a reader asks of a captured run (qkv/explain_run.h), as functions
// of the run alone (src/explain/readings/): the heads of a decoder that sink, look one token back
// or induct; an encoder-decoder's alignment and how sharp each head's is; the lookup task's
// phonebook read off the attention; what each of a Perceiver's latents gathers. Every view shows
// these numbers; none computes them again.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "qkv/explain_run.h"

namespace qkv::explain {

// ---- a decoder's heads ----
// A head and its score: (score, layer, head), sorted by score, largest first.
using ScoredHead = std::tuple<double, int64_t, int64_t>;

struct HeadRoles {
  // Per head, the mean over queries i ≥ 1 of its weight on token 0 (a sink) and on token i − 1
  // (previous token); the heads whose mean is above one half.
  std::vector<ScoredHead> sinks, previous;
  // The heads whose induction score (Run::induction) is above 0.3.
  std::vector<ScoredHead> induction;
};
HeadRoles head_roles(const Run& run);

// The induction score of every head [layers, heads] (float64), from `repeat`: the capture of a
// sequence x₁…x_T x₁…x_T (2T tokens, [1, H, 2T, 2T] weights a layer). In the repeat, token x_i
// (position T + i − 1) may look for x_{i+1} after its first occurrence (position i); the score is
// the mean of that weight over i = 1 … T − 1 (Olsson et al. 2022, "In-context Learning and
// Induction Heads").
Tensor induction_scores(const std::vector<AttentionCapture>& repeat, int64_t t);

// ---- what the values carried (a run whose block keeps ov_norms: BERT, a decoder) ----
// Layer l's value-weighted attention [H, n, m] float64: ‖α^h_ij f^h(x_j)‖ = α^h_ij·‖f^h(x_j)‖,
// f^h(x_j) = W_O^h v^h_j what head h writes into the stream for key j (Kobayashi et al. 2020,
// "Attention is not only a weight"; Block::ov_norms). A qkv::Error for a run without the norms.
Tensor value_weighted(const Run& run, int64_t layer);
// Layer l's residual-and-norm mixing (Kobayashi et al. 2021, "Incorporating Residual and
// Normalization Layers into Analysis of Masked Language Models") [n, m] float64: how much of
// token i's new vector came from token j. A decoder's (pre-norm) new vector is
// x_i + Σ_j Σ_h α^h_ij f^h(x_j); BERT's (post-LN) is LN(x_i + Σ_j Σ_h α^h_ij f^h(x_j) + b_O), the
// LayerNorm's scale 1/σ_i that of the whole sum, fixed, its centring and gain applied to each
// part, and b_O and the LayerNorm's bias β given to no token. Token j's part is
// c_ij = [i = j]·x_i + Σ_h α^h_ij f^h(x_j) (the residual belongs to i); the entry is its norm's
// share of the row, ‖c_ij‖ / Σ_k ‖c_ik‖, so a row sums to 1. Exact, from Block::mixing_gram in
// n·m·(H + 1)² operations; a qkv::Error for a run without the Grams (one longer than
// kMixingMaxTokens tokens) that says so.
Tensor mixing(const Run& run, int64_t layer);
bool has_mixing(const Run& run);
// Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers"), every
// layer [n, n] float64: Ã_l = ½·mean_h A_l + ½·I with its rows renormalised, R_0 = Ã_0 and
// R_l = Ã_l·R_{l−1}. Row i of R_l: which input tokens token i's vector after layer l came from.
// n³ a layer: a qkv::Error beyond kMixingMaxTokens tokens.
std::vector<Tensor> attention_rollout(const Run& run);
// The same product over the layers' mixing matrices (no identity added: the mixing counts the
// residual already; the product GlobEnc, Modarressi et al. 2022, takes).
std::vector<Tensor> mixing_rollout(const Run& run);

// An attention sink (head_roles' sinks) explained with its values: what it looks at and what it
// moves. A head that puts 0.9 of its weight on token 0 whose value there is tiny moves little.
struct SinkValues {
  int64_t layer = 0, head = 0;
  double weight = 0;       // mean over queries i ≥ 1 of α_i0 (head_roles' score)
  double first_norm = 0;   // ‖f^h(x_0)‖
  double others_norm = 0;  // mean over keys j ≥ 1 of ‖f^h(x_j)‖
  // Mean over queries i ≥ 1 of token 0's value-weighted share, α_i0‖f_0‖ / Σ_j α_ij‖f_j‖.
  double value_share = 0;
  // Mean over queries i ≥ 1 of Σ_j α_ij‖f^h(x_j)‖: the most the head writes into a query's stream
  // (the triangle inequality's bound on ‖Σ_j α_ij f^h(x_j)‖); beside others_norm, how much less
  // than a look at a typical token it moves.
  double moved = 0;
};
// Every sink head of head_roles, in its order; empty for a run without ov_norms. The means over
// queries take every query i ≥ 1 up to kSinkRows of them, else kSinkRows spread evenly.
inline constexpr int64_t kSinkRows = 128;
std::vector<SinkValues> sink_values(const Run& run);

// ---- an encoder-decoder's alignment ----
// The cross-attention weights of decoder layer `layer` [H, steps, S] (float64): each output step's
// attention over the source (Bahdanau et al. 2014, Figure 3). Throws for a run without them.
Tensor alignment(const Run& run, int64_t layer);
// Each head's mean entropy over the output steps (nats) of an alignment [H, steps, S]; the
// lowest is the sharpest alignment.
std::vector<double> head_entropy(const Tensor& alignment);
int64_t sharpest_head(const std::vector<double>& entropy);

// ---- the lookup task's phonebook ----
// A source of the lookup task, "? b a3 b7 c1": the query key, then entries of a key and its number.
struct PhonebookEntry {
  char key = 0, number = 0;
  int64_t at = 0;  // the key's position in the source; its number is at + 1
};

struct Phonebook {
  char query = 0;
  std::vector<PhonebookEntry> entries;
  std::optional<std::size_t> asked;  // the entry whose key is the query
  bool additive = false;             // RNNsearch: no self-attention binds; the GRUs do
  // The binding (transformers): the encoder head whose numbers look hardest at the key just before
  // them, and each entry's number's weight on its key there.
  int64_t bind_layer = 0, bind_head = 0;
  std::vector<double> bind;
  // The match: the cross-attention head whose first output step puts the most weight on one
  // entry (its key and number); per entry, that weight, and the logit of the number.
  int64_t match_layer = 0, match_head = 0;
  Score score = Score::scaled_dot;  // of the match's layer
  std::vector<double> weight, logit;
  // The value read back: Σ weight·‖v‖ over the entry's two positions, ÷ the same over the source.
  double asked_share = 0;
  std::string answer;  // the model's output
};

// "? b a3 b7 c1" → its query and entries, positions filled; empty for anything else.
std::optional<Phonebook> parse_phonebook(const std::string& source);
// The phonebook of a lookup model's run (its source, encoder self- and cross-attention); empty
// when the source is not a phonebook or the run lacks those blocks.
std::optional<Phonebook> phonebook(const Run& run);

// ---- what each of a Perceiver's latents gathers ----
struct LatentGather {
  std::vector<double> counted_share;  // per head: Σ of its weights on the counted symbol
  double counted_mean = 0;            // the heads' mean of counted_share
  // counted_mean ÷ the uniform look's share (Gathers::uniform_share): how many times what
  // attending evenly would gather; none when the input lacks the counted symbol.
  std::optional<double> times_uniform;
  double effective_positions = 0;  // exp(entropy) of the heads' mean weights: how spread
  std::vector<std::pair<int64_t, double>> top;  // positions by the heads' mean weight
};

struct Gathers {
  int64_t count = 0;  // of the counted symbol in the input
  int64_t heads = 0, latents = 0, length = 0;
  // What a uniform look (1/length a position) puts on the counted symbol: count / length.
  double uniform_share = 0;
  std::vector<LatentGather> gathered;  // one a latent
};
// The latent block of a Perceiver's run (Run::counted the symbol), `top` positions a latent.
Gathers gathers(const Run& run, int64_t top);

}  // namespace qkv::explain
