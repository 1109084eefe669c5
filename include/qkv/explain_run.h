// qkv/explain_run.h — one captured run (explain::Run): what every model hands to every view of
// `qkv explain` (terminal, JSON, HTML, SVG, PNG, Python): the model's header, the tokens it read,
// its attention as blocks (self-, cross- or latent; one qkv::AttentionCapture a layer), the
// residual stream where it keeps one, and its output (next tokens, classes, a decoded text).
// capture() is the one way to make one; readings and views read nothing else.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qkv/attention.h"
#include "qkv/explain_lens.h"
#include "qkv/model.h"
#include "qkv/perceiver.h"
#include "qkv/tensor.h"

namespace qkv::explain {

struct Circuit;  // qkv/explain_circuits.h

// One token a block's queries or keys are made of.
struct TokenInfo {
  std::string text;     // as the views show it: "animal", "##ing", "[CLS]", "␣", "latent 3"
  std::string surface;  // the bytes of the input it came from ("" for [CLS]/[SEP], a latent)
  // [begin, end): those bytes in the input they came from (Run::text, or text_b for segment 1 of
  // a pair); begin = end = -1 for a token that came from no input (a latent, an output step).
  int64_t begin = -1, end = -1;
  int32_t id = 0;
  // Index of the word it belongs to (pieces share one); -1 for specials. The words of B continue
  // the count after A's, so a word index names one word of the whole sequence.
  int64_t word = -1;
  int segment = 0;           // 0: [CLS] A [SEP]; 1: B [SEP] of a pair
  bool special = false;      // [CLS], [SEP], <s>, </s>, <|im_start|>
  bool punctuation = false;  // a token of punctuation only
};

enum class BlockKind {
  self_attention,   // the tokens attend to themselves (BERT, a decoder, a seq2seq's encoder)
  cross_attention,  // output steps over a source (seq2seq; RNNsearch's additive attention)
  latent,           // learned latent queries over a long input (the Perceiver)
};

// One attention of the model, every layer of it.
struct Block {
  BlockKind kind = BlockKind::self_attention;
  std::string name;  // "self-attention", "cross-attention", "latents over the input", ...
  std::string note;  // one line under the name: what asks and what answers
  std::vector<TokenInfo> queries, keys;
  bool same_tokens = true;  // queries and keys are the same tokens (self-attention)
  bool causal = false;
  // Per query head, the key/value head it reads (h / (heads / kv_heads)); the capture's k and v
  // hold one copy a query head, so a view reads head h's k and v at h whatever this says.
  std::vector<int64_t> kv_head;
  // Names of the numbers of q and k (d of them) and of v (dv), where they mean something (a
  // worked example's features: "j", "o", "oh", ...; "1st", ...); empty: learned, unnamed.
  std::vector<std::string> key_features, value_features;
  // One per layer, a batch of one: q [1, H, n, d], k and v [1, H, m, ·], scores, logits and
  // weights [1, H, n, m], head_out [1, H, n, dv] (see AttentionCapture). The Perceiver's latent
  // block keeps only the weights.
  // A long text's decoder keeps rows instead (rows()): no scores, logits or weights; each layer's
  // q, k and row softmax (saved_max, saved_sum), from which the accessors below recompute them.
  std::vector<AttentionCapture> layers;
  // What the values carried (src/explain/run/values.cpp; a self-attention with a residual stream
  // only, BERT and decoders: else empty), one per layer, float64. With f^h(x_j) = W_O^h v^h_j the
  // vector head h writes into the stream for key j (W_O^h: the columns of W_O that take head h;
  // v^h_j the value as captured, BERT's bias b_V included; W_O's own bias b_O belongs to no head):
  // ov_norms [1, H, m]: ‖f^h(x_j)‖, so that ‖α^h_ij f^h(x_j)‖ = α^h_ij ‖f^h(x_j)‖ (Kobayashi et al.
  // 2020, "Attention is not only a weight"; readings::value_weighted).
  std::vector<Tensor> ov_norms;
  // mixing_gram [1, m, H + 1, H + 1]: per key j, the Gram matrix of the H + 1 vectors key j can add
  // to a query's new stream — f^0(x_j) … f^{H−1}(x_j), then x_j itself (the residual, index H) —
  // as the layer's norm sees them: a pre-norm decoder's as they are; post-LN BERT's centred and
  // scaled by the LayerNorm's gain γ (its 1/σ_i is common to query i's row and cancels in the
  // shares). Token j's part of query i's vector, c_ij = [i = j]·x_j + Σ_h α^h_ij f^h(x_j), has
  // ‖c_ij‖² = βᵀ G_j β with β = (α^0_ij … α^{H−1}_ij, [i = j]) (Kobayashi et al. 2021; the
  // reading readings::mixing). Empty for a run longer than kMixingMaxTokens.
  std::vector<Tensor> mixing_gram;
  // The matrices these came from, per layer as the model holds them (shared, not copied): W_O
  // [hidden, H·d] and a post-LN's gain γ [hidden] (BERT; empty for a pre-norm decoder).
  std::vector<Tensor> output_matrix, mixing_gain;
  int64_t heads() const;
  // The weight of query i on key j in layer l, head h: kept, or where the run kept rows, its row
  // recomputed (the float64 reference's; O(keys i sees · d) a call: read a long row by weight_row).
  double weight(int64_t l, int64_t h, int64_t i, int64_t j) const;
  // ---- the same for a run that kept rows (src/explain/run/row_weights.cpp) ----
  // Whether the layers keep rows (the row softmax) rather than the weights.
  bool rows() const;
  // Row i of layer l, head h over every key. The weights (i, j) of `entries`: where the run kept
  // rows, one dot product each against the fused path's row softmax (float32's precision: see
  // qkv/attention_weights.h) — for readings over every row, never for a row shown.
  std::vector<double> weight_row(int64_t l, int64_t h, int64_t i) const;
  std::vector<double> weights_at(int64_t l, int64_t h,
                                 const std::vector<std::pair<int64_t, int64_t>>& entries) const;
  // score(q_i, k_j) before the scale (kept, or q_i·k_j in float64), and whether the mask hides key
  // j from query i (logit −∞; a run that kept rows: the causal mask).
  double score(int64_t l, int64_t h, int64_t i, int64_t j) const;
  bool masked(int64_t l, int64_t h, int64_t i, int64_t j) const;
};

// The longest run whose mixing capture keeps (Block::mixing_gram, the decoder's stream): every
// f^h(x_j) costs m·H·d·hidden multiply-adds a layer (float64), the rollouts n³. Measured (load ~6):
// SmolLM2, 500 tokens 19.0 s not 15.3 s, 30 MB more; 10 tokens 2.7 s not 2.3 s. Beyond it, the
// value norms alone (a d × d Gram a head).
inline constexpr int64_t kMixingMaxTokens = 512;

// What the model is, as a view titles and describes it.
struct ModelHeader {
  std::string name;    // "all-MiniLM-L6-v2", "SmolLM2-135M-Instruct", "dates.safetensors"
  std::string family;  // bert; llama, qwen2, qwen3, gemma3; transformer, rnnsearch, perceiver
  std::string task;    // a trained model's task ("dates", "lookup", "count"); else empty
  int64_t layers = 0, heads = 0, kv_heads = 0, head_dim = 0, d_model = 0;
  double scale = 0;  // blocks[0]'s scale: 1/√head_dim, the scaled-dot default
  // A GGUF decoder's architecture in words (qkv::attention_features), and how it forms q, k and v
  // from x = RMSNorm(h) ("RoPE(RMSNorm(W_Q·x + b_Q))", "W_V·x"); empty for the other models.
  std::vector<std::string> features;
  std::string query, key, value;
  std::string argument;  // what --model names a decoder by in the hints: "smollm2", or its path
  // How a GGUF decoder's matrices were kept and multiplied for this run: "Q4_1 (210 matrices),
  // Q8_0 (1) as the file's blocks; every product in float32, the bits of --weights float32";
  // empty for the other models.
  std::string weights;
  // A trained model's metadata ("qkv.steps", "qkv.test_accuracy"), as its file holds it.
  std::map<std::string, std::string> metadata;
};

// What the model made of the input, where it makes something.
struct Output {
  Tensor embedding;  // a sentence encoder: [1, hidden], the sentence embedding
  // A decoder: the five most likely next tokens with their probabilities.
  std::vector<std::pair<std::string, double>> next_tokens;
  // A classifier (the Perceiver): the probability of each class, and the most likely.
  std::vector<double> probabilities;
  int32_t predicted = -1;
  // An encoder-decoder: the decoded text (no end token) and its steps ("2", "0", …, "</s>").
  std::string decoded;
  std::vector<std::string> steps;
  bool ended = false;  // the decoding produced its end token within the model's limit
};

struct Run {
  ModelHeader model;
  std::string text;    // the input (A of a pair)
  std::string text_b;  // B of a pair, else empty
  bool pair = false;
  bool truncated = false;         // cut to the model's limit
  std::vector<TokenInfo> tokens;  // the input's tokens (blocks[0]'s keys)
  // BERT and decoders: one self-attention block; a transformer seq2seq: cross-, encoder self- and
  // decoder self-attention; RNNsearch: its additive attention; the Perceiver: its latents.
  std::vector<Block> blocks;
  // The residual stream, where the model keeps it: the embedding layer's output and each layer's
  // output, [1, n, hidden] (BERT; a decoder up to kMixingMaxTokens tokens, its h₀ and each
  // layer's output, float32); empty otherwise. Layer l reads embeddings (l = 0) or hidden[l − 1].
  Tensor embeddings;
  std::vector<Tensor> hidden;
  Output output;
  // A decoder's induction scores [layers, heads] (float64): readings::induction_scores on a
  // random sequence repeated once, run when the run was captured.
  Tensor induction;
  // A Perceiver: the symbol its task counts.
  char counted = 0;
  // A decoder's causal lens (qkv/explain_lens.h: read_causal), when asked for (--target).
  std::optional<CausalReading> lens;
  // A decoder head's circuits from the weights (qkv/explain_circuits.h), when asked (--circuit).
  std::shared_ptr<const Circuit> circuit;

  bool causal() const { return !blocks.empty() && blocks.front().causal; }
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  // blocks[0]'s weight of query token i over key j in layer l, head h.
  double weight(int64_t l, int64_t h, int64_t i, int64_t j) const;
};

// ---- capture: every model makes its run here ----
// What a model reads: a sentence (a pair's first), a trained model's source, a Perceiver's input.
struct Input {
  std::string text;
  std::optional<std::string> text_b;  // a sentence encoder's second sentence: the pair
  // false: a decoder's text of more than kRowsAbove tokens keeps rows, not every weight (see
  // "a long text" below) — for views that read a few rows (the terminal's); --json, the report
  // and the images read every weight.
  bool every_weight = true;
};
// The one entry point: any model the registry opens (a decoder with its weights loaded), on its
// input, through the family's capture below. A trained model's metadata numbers the views show
// (qkv.steps, ...) are checked: one not a number in range is a qkv::Error naming the file.
Run capture(const Model& model, const Input& input);
// Every number of a run checked finite before a view shows it (qkv/finite.h): the embedding
// layer's output; each block's layers' q, k, v, scores, weights, head outputs and each layer's
// output; the sentence embedding, next-token and class probabilities. The first that is not is a
// qkv::Error (Kind::runtime): "layer 5's output came out +∞; ...", a block other than a sentence's
// self-attention named after it ("layer 0's attention weights (cross-attention)").
void require_finite(const Run& run);
// The input a run takes when none is given: a sentence with a pronoun, a held-out example.
inline constexpr const char* kDefaultSentence =
    "The animal didn't cross the street because it was too tired";
Input default_input(const Model& model);
// A trained seq2seq model's source, checked: a qkv::Error ("\"march\": ..." for a character
// outside its vocabulary, "has 99 characters; the model reads at most 40") for one it cannot read.
void check_source(const Seq2Seq& model, const std::string& source);

// What capture(model, input) needs at its peak (qkv/memory.h), and with `json` what json_of
// holds beside it, with `html` what a Perceiver's page holds (see the family's run_bytes below);
// `what` says it: "explaining 12 tokens (every layer's scores, logits and weights kept)".
struct RunCost {
  int64_t bytes = 0;
  std::string what;
};
RunCost run_cost(const Model& model, const Input& input, bool json, bool html);

// Tokenizes and runs `text` with capture on (attention in float64 through the reference path);
// with `text_b`, the pair [CLS] text [SEP] text_b [SEP] (token types 0 then 1), cut to the model's
// max_length as BertTokenizer's 'longest_first' does.
Run capture(const SentenceModel& model, std::string_view text,
            std::optional<std::string_view> text_b = std::nullopt);
// A decoder LLM on `text` (BOS first where its file says add_bos), every layer captured, its next
// tokens and its heads' induction scores. With `rows`, as rows (see below).
Run capture(const CausalLM& model, std::string_view text, bool rows = false);
// A model `qkv train` saved, greedy-decoding `source` with every attention captured. `name`
// titles it ("dates.safetensors"); `metadata` is its file's.
Run capture(Seq2Seq& model, const std::string& source, const std::string& name,
            const std::map<std::string, std::string>& metadata = {});
// A Perceiver on `input` (config.length symbols of the task's alphabet), its latents' weights kept.
Run capture(Perceiver& model, const PerceiverTask& task, const std::string& input,
            const std::string& name = "perceiver");

// What capture() of `tokens` tokens needs at its peak (qkv/memory.h): the model's capture_bytes,
// and with `json` what json_of(run) holds beside it — every q, k, v, score, logit, weight, head
// output and hidden state as a JSON number, in the tree and in its text (measured: 48 to 66 bytes
// a number; 80 counted). SmolLM2's --json on 400 tokens is 157 million numbers: 12 GB.
int64_t run_bytes(const SentenceModel& model, int64_t tokens, bool json);
int64_t run_bytes(const CausalLM& model, int64_t tokens, bool json);
// capture() of a Perceiver: the cross-attention's weights of every head, latent and position
// kept, with the reference path's working set (perceiver_explain_bytes), and with `html` what
// the page of them holds (every weight as float32 in base64, beside the run).
int64_t run_bytes(const PerceiverConfig& config, bool html);

// ---- a long text: exact weights from rows (src/explain/run/row_weights.cpp) ----
// A decoder's capture on more than kRowsAbove tokens where every weight is not asked for
// (Input::every_weight false) runs the fused path (CausalLM::capture_rows): per layer q, k, v, the
// heads' outputs and each row's softmax, O(n·d), where every weight would be n² a head (30 layers
// × 9 heads × 4,096² float32 is 18 GB). Block::weight and weight_row recompute a row as the float64
// reference's; weights_at, the single weights the readings over every row take, comes from the
// fused path's row softmax (qkv/attention_weights.h). The rest of the run is as capture() makes it.
inline constexpr int64_t kRowsAbove = 512;
bool keeps_rows(const Model& model, const Input& input);
// What capture() of `tokens` tokens as rows needs at its peak: CausalLM::capture_rows_bytes.
int64_t run_rows_bytes(const CausalLM& model, int64_t tokens);

}  // namespace qkv::explain
