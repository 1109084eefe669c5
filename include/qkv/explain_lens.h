// qkv/explain_lens.h — the causal lens: whether a head matters for the answer, and which heads
// wrote it. A clean run of a model with a residual stream (qkv/residual.h) is kept layer by layer;
// each intervention reruns only the layers from the first it touches, and is measured on one
// target token at the last position:
//
//   head ablation       head h of layer l's output o_h (its slice of W_O's input) set to zero at
//                       every position, or to its mean over the prompt's positions
//   attention knockout  edges i → j of chosen heads blocked: −∞ before the softmax (a keep-mask)
//   activation patching a clean and a corrupted prompt of equal token length: one head's output
//                       (or the stream entering a layer) at one position copied from the clean run
//                       into the corrupted run; the share of the metric's gap it restores,
//                       (patched − corrupted) / (clean − corrupted)
//   direct logit        each head's W_O^h·o_h at the last position, and each layer's attention and
//   attribution         MLP output, through the final norm at the clean run's scale, dotted with
//                       the target's unembedding row (less the alternative's): the parts sum to
//                       the clean metric, the embedding's part included
//   logit lens          the stream after each layer through the final norm and the unembedding
//
// The metric is the target's logit, or the target's logit less the alternative's (`versus`).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qkv/residual.h"
#include "qkv/tensor.h"

namespace qkv {
class Seq2Seq;  // qkv/seq2seq.h
}

namespace qkv::explain {

// The token an intervention is measured on, and the alternative it is compared with.
struct Target {
  int32_t id = -1;
  int32_t versus = -1;  // −1: none
};

// A target's standing in one pass's last-position logits.
struct Measure {
  double logit = 0;         // the target's
  double log_prob = 0;      // its log-probability (log-softmax over the vocabulary)
  double versus_logit = 0;  // the alternative's (0 when none)
  double metric = 0;        // logit − versus_logit, or logit when there is no alternative
};

enum class Ablation { zero, mean };
// One head's output rows [n, d] (contiguous) ablated in place: zero, or each set to their mean.
void ablate_rows(float* rows, int64_t n, int64_t d, Ablation how);

// One edge of one head: query position i may no longer attend to key position j.
struct Edge {
  int64_t layer = 0, head = 0, query = 0, key = 0;
};

// Called as long work goes: (done, total) units.
using OnProgress = std::function<void(int64_t done, int64_t total)>;

// A clean run kept for interventions: the stream entering each layer and each layer's heads'
// outputs, [n, hidden] and [1, H, n, head_dim] float32.
class Lens {
 public:
  // Runs `ids` (1 … model.context() tokens) once through `model`.
  Lens(std::shared_ptr<const ResidualModel> model, std::vector<int32_t> ids);

  const ResidualModel& model() const { return *model_; }
  const std::vector<int32_t>& ids() const { return ids_; }
  int64_t size() const { return static_cast<int64_t>(ids_.size()); }
  // The stream entering layer l (l = layers(): after the last layer, before the final norm).
  const Tensor& stream(int64_t layer) const;
  // The stream after layer l's attention, before its MLP.
  const Tensor& attended(int64_t layer) const;
  const Tensor& heads(int64_t layer) const;  // layer l's heads' outputs o
  // The last position's logits [vocab] float32, and the most likely token there.
  const Tensor& logits() const { return logits_; }
  int32_t top_token() const;
  Measure measure(const Target& target) const;  // of the clean run
  Measure measure(const Tensor& last_logits, const Target& target) const;

  // Layers first … of the clean stream entering `first`, with hooks: the last position's logits
  // [vocab].
  Tensor rerun(int64_t first, const LayerHooks& hooks) const;
  // The same for `copies` copies side by side ([copies, n, hidden]; hooks see them all), each
  // first changed by prepare(copy, stream [n, hidden]) when given: [copies, vocab].
  Tensor rerun(int64_t first, int64_t copies, const LayerHooks& hooks,
               const std::function<void(int64_t copy, Tensor& stream)>& prepare = {}) const;
  // How many copies one batched rerun takes: about 2,048 positions' worth.
  int64_t copies_per_rerun() const;
  // One head ablated (zero or mean) / the edges blocked: the target measured.
  Measure ablate(int64_t layer, int64_t head, Ablation how, const Target& target) const;
  Measure knockout(const std::vector<Edge>& edges, const Target& target) const;

 private:
  std::shared_ptr<const ResidualModel> model_;
  std::vector<int32_t> ids_;
  std::vector<Tensor> streams_, attended_, heads_;
  Tensor logits_;
};

// Every head's ablation effect and direct logit attribution.
struct HeadEffect {
  int64_t layer = 0, head = 0;
  double ablation_logit_change = 0;       // zero-ablated − clean: the target's logit
  double ablation_log_prob_change = 0;    // and its log-probability
  double ablation_metric_change = 0;      // and the metric (= logit change without versus)
  double mean_ablation_logit_change = 0;  // the same, mean-ablated
  double mean_ablation_log_prob_change = 0;
  double mean_ablation_metric_change = 0;
  double direct_logit_attribution = 0;  // the head's part of the clean metric
};

// Direct logit attribution of the clean run's last position: parts that sum to the metric.
struct Attribution {
  double embedding = 0;       // h₀'s part
  std::vector<double> heads;  // [layers · heads], layer-major
  // Per layer: its attention's (Σ of its heads, and W_O's bias where there is one) and MLP's.
  std::vector<double> attention, mlp;
  double constant = 0;  // what no layer writes: ResidualModel::logit_bias (a LayerNorm's β, b_U)
  double total = 0;     // Σ of every part: the clean metric, up to rounding
};
Attribution direct_logit_attribution(const Lens& lens, const Target& target);

// Every head zero- and mean-ablated (2 · layers · heads reruns), with its direct logit
// attribution; layer-major.
std::vector<HeadEffect> head_effects(const Lens& lens, const Target& target,
                                     const OnProgress& progress = {});

// The logit lens: the stream after each layer l (l = 0 … layers − 1) through the final norm (its
// own scale) and the unembedding.
struct LensRow {
  int64_t layer = 0;
  std::vector<std::pair<int32_t, double>> top;  // the most likely tokens and probabilities
  int64_t target_rank = 0;                      // 0: the most likely
  double target_logit = 0, target_log_prob = 0;
};
std::vector<LensRow> logit_lens(const Lens& lens, const Target& target, int64_t top = 5);

// Activation patching from a clean run into a corrupted one of the same token length.
struct Patching {
  Measure clean, corrupted;
  Tensor heads;      // [layers, heads] float64: the head's output at every position patched
  Tensor positions;  // [layers, heads, n] float64: at one position
  Tensor stream;     // [layers, n] float64: the stream entering layer l at position p
};
// A qkv::Error when the lengths differ or the clean and corrupted metrics are equal (nothing to
// restore). Reruns layers · heads · (n + 1) + layers · n passes from their layer on.
Patching patch(const Lens& clean, const Lens& corrupted, const Target& target,
               const OnProgress& progress = {});

// ---- the lens of one run, as the views show it ----
// What `qkv explain --target` asks: texts, each one token of the model's vocabulary.
struct LensRequest {
  std::string target;    // empty: the model's most likely next token
  std::string versus;    // empty: none
  std::string corrupt;   // a corrupted prompt of the same token length: patching; empty: none
  std::string knockout;  // edges to block, parse_edges' spelling; empty: none
};

// "L.H:Q>K" items, comma-separated: query position Q of head H in layer L no longer sees key K;
// `*` for every head, query or key ("14.*:9>4", "3.2:*>0"); a key after its query is skipped
// (the causal mask blocks it already). Out-of-range numbers are a qkv::Error naming the item.
// Layers as `model` numbers them, with their keys (ResidualModel::keys, ::causal); n queries.
std::vector<Edge> parse_edges(const std::string& spec, const ResidualModel& model, int64_t n);
// The same for a decoder of `layers` layers of `heads` causal self-attention heads.
std::vector<Edge> parse_edges(const std::string& spec, int64_t layers, int64_t heads, int64_t n);

struct CausalReading {
  std::vector<std::string> layer_names;  // ResidualModel::layer_name, one a layer
  std::vector<std::string> tokens;       // the positions read, as the vocabulary spells them
  int64_t step = -1;  // an encoder–decoder's output step (0-based; read_step); else −1
  // Where the captured run (explain::Run) keeps each lens layer's weights, {block, layer}: a
  // decoder's layer l is block 0's layer l; read_step's even layers are capture(Seq2Seq)'s decoder
  // self-attention (block 2), its odd ones the cross-attention (block 0), layer l / 2 of each.
  std::vector<std::pair<int64_t, int64_t>> captured_at;
  Target target;
  std::string target_text, versus_text;  // as the vocabulary spells them
  bool target_given = false;             // false: the most likely next token
  Measure clean;
  std::vector<HeadEffect> heads;  // every head, layer-major
  Attribution attribution;
  std::vector<LensRow> logit_lens;
  std::vector<std::string> lens_text;  // the logit lens's top tokens' texts, row by row
  std::string corrupt;                 // the corrupted prompt, when patched
  std::optional<Patching> patching;
  std::string knockout;  // the spec, when edges were blocked
  std::vector<Edge> edges;
  std::optional<Measure> knocked;
};
// The lens of `ids` (a decoder's prompt) as the request asks: the target resolved (a text that is
// not one token is a qkv::Error saying what it is), every head ablated, the attribution, the logit
// lens, and patching and knockout when asked. `progress` counts the reruns. With
// `corrupted_model`, the corrupted run is that model on the same ids (an encoder–decoder's decoder
// over the corrupted source), and request.corrupt only names it.
CausalReading read_causal(std::shared_ptr<const ResidualModel> model,
                          const std::vector<int32_t>& ids, const LensRequest& request,
                          const OnProgress& progress = {},
                          std::shared_ptr<const ResidualModel> corrupted_model = nullptr);

// The lens of output step `step` (0-based) of an encoder–decoder transformer `qkv train` made, on
// `source`: its decoder (Seq2Seq::residual) read teacher-forced on <s> and the outputs before the
// step (`outputs`: the greedy decoding's tokens, Run::output.steps), measured where it writes step
// `step` — by default the token it wrote there. request.corrupt is another source: the corrupted
// run reads the same decoder tokens over its encoding. A qkv::Error for a step out of range.
CausalReading read_step(Seq2Seq& model, const std::string& source,
                        const std::vector<std::string>& outputs, int64_t step,
                        const LensRequest& request, const OnProgress& progress = {});

}  // namespace qkv::explain
