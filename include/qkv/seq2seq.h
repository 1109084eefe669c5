// qkv/seq2seq.h — the encoder-decoder models qkv trains (transformer, RNNsearch): config, batches,
// capture, greedy decoding, files.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qkv/attention.h"
#include "qkv/nn.h"
#include "qkv/residual.h"
#include "qkv/tasks.h"
#include "qkv/tensor.h"

namespace qkv {

// The encoder–decoder models `qkv train` trains, character-level, one vocabulary shared by source
// and target. Two architectures (Seq2SeqConfig::architecture):
//
// transformer (Vaswani et al. 2017), pre-norm:
//   x = Embedding(src)·√d + PE          y = Embedding(tgt_in)·√d + PE      (tgt_in = BOS target)
//   memory = LayerNorm(EncoderBlockᴺ(x))
//   logits = Linear(LayerNorm(DecoderBlockᴺ(y, memory)))                    → target EOS
//
// rnnsearch (Bahdanau, Cho and Bengio 2014, "Neural machine translation by jointly learning to
// align and translate"), d = d_model:
//   h_j = [→h_j; ←h_j] = BidirectionalGRU(E_x src)_j        annotations, d/2 a direction
//   s_0 = tanh(W_s ←h_1)
//   e_ij = v_aᵀ tanh(W_a s_{i−1} + U_a h_j),  α_ij = softmax_j(e_ij),  c_i = Σ_j α_ij h_j
//   s_i = GRU([E_y y_{i−1}; c_i], s_{i−1})
//   logits_i = W_o tanh(O [s_i; E_y y_{i−1}; c_i])
// The attention is qkv::attention with the additive score: query s_{i−1}, keys = values = h_j.
//
// forward/backward follow nn.h: forward saves what backward needs; backward accumulates into the
// parameters' gradients. Greedy decoding is batched and can hand back the cross-attention
// weights of one decoder layer for every output step (the alignment of Bahdanau et al. 2014,
// Figure 3). Models are saved as safetensors with their configuration in the metadata.

enum class Seq2SeqArchitecture { transformer, rnnsearch };
std::string_view to_string(Seq2SeqArchitecture architecture);
std::optional<Seq2SeqArchitecture> parse_architecture(std::string_view name);

struct Seq2SeqConfig {
  Seq2SeqArchitecture architecture = Seq2SeqArchitecture::transformer;
  std::string task;  // the task it was made for ("reverse", "dates", ...)
  TaskOptions task_options;
  std::string characters;  // the vocabulary's characters (ids 3, 4, ...; 0–2: PAD, BOS, EOS)
  int64_t layers = 2;      // encoder blocks, and as many decoder blocks (rnnsearch: 1)
  int64_t heads = 4;       // rnnsearch: 1
  int64_t d_model = 64;    // rnnsearch: the annotations' and the decoder state's width (even)
  int64_t ffn_hidden = 0;  // 0: 4·d_model
  int64_t max_source = 32, max_target = 16;  // longest source; longest target (EOS not counted)
  double dropout = 0.0;
  // Every attention layer's variant (score, tie_qk, identity_v, kv_heads) — what `qkv experiment`
  // varies; d_model, heads and dropout are taken from the fields above. rnnsearch: additive.
  nn::MultiHeadAttentionOptions attention;

  int64_t hidden() const { return ffn_hidden > 0 ? ffn_hidden : 4 * d_model; }
  // Throws qkv::Error (usage) when a size is out of range, d_model % heads != 0, the characters
  // are not printable ASCII or kv_heads does not divide heads. Messages name qkv train's flags;
  // with `source` (a model file) they name the file and its metadata's field instead.
  void validate(const std::string& source = "") const;
};

// The config as JSON text, as a saved model's metadata holds it ("qkv.config"), and back: every
// field is checked (type, range, a known task whose characters and lengths the model covers);
// errors name `path` and the field, e.g. "m.safetensors: the metadata's qkv.config "layers" is 0;
// expected 1 to 64".
std::string config_to_metadata(const Seq2SeqConfig& config);
Seq2SeqConfig config_from_metadata(const std::string& text, const std::string& path);

// A config sized for `task` (vocabulary and lengths from it).
Seq2SeqConfig config_for(const Task& task, int64_t layers, int64_t heads, int64_t d_model);
// RNNsearch's: one layer, one head, the additive score.
Seq2SeqConfig rnnsearch_config_for(const Task& task, int64_t d_model);

// Examples as padded id batches.
struct Batch {
  int64_t size = 0, source_length = 0, target_length = 0;  // B, S, T (T = longest target + 1)
  std::vector<std::vector<int32_t>> source;                // [B][S], PAD after source_lengths
  std::vector<int64_t> source_lengths;
  std::vector<std::vector<int32_t>> target_in;   // [B][T]: BOS target, PAD after target_lengths
  std::vector<int64_t> target_lengths;           // |target| + 1
  std::vector<int32_t> target_out;               // [B·T]: target EOS, −1 (ignored) on padding
  int64_t target_tokens = 0, source_tokens = 0;  // real (unpadded) tokens
};
Batch make_batch(const Vocabulary& vocab, const std::vector<Example>& examples);

// One source through the trained model with every attention layer captured: what the report
// shows for a model `qkv train` made, as BertCapture is for BERT. Batch size 1, so each capture
// is [1, H, L, S] (see AttentionCapture, for every tensor's shape and meaning).
struct Seq2SeqCapture {
  std::string source, output;              // output: greedy decoding's text (EOS not included)
  std::vector<std::string> source_tokens;  // one per source character: the encoder's keys
  // The decoder's inputs, as training feeds them: "<s>" then every output token but the last;
  // decoder position t reads target_tokens[t] and predicts output_tokens[t].
  std::vector<std::string> target_tokens;
  std::vector<std::string> output_tokens;  // the generated tokens, "</s>" included when produced
  // The configuration the captures ran with (each capture holds its score, scale and mask).
  // rnnsearch: one cross "layer" (the additive attention, query s_{i−1}, keys = values = h_j), no
  // encoder or decoder self-attention.
  Seq2SeqArchitecture architecture = Seq2SeqArchitecture::transformer;
  int64_t layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  bool tie_qk = false, identity_v = false;
  // One per layer. encoder: self-attention over the source (padding-free, so nothing masked).
  // decoder_self: causal self-attention over target_tokens (logits −∞ above the diagonal).
  // cross: the decoder's queries over the encoder's output (its weights are greedy_decode's
  // alignment for that layer).
  std::vector<AttentionCapture> encoder, decoder_self, cross;
};

// A model of either architecture; make_seq2seq builds the one its config names.
class Seq2Seq : public nn::Module {
 public:
  // logits: [B, T, V]. Saves what backward needs.
  virtual Tensor forward(const Batch& batch, bool training, nn::Rng& rng) = 0;
  // dlogits: [B, T, V] (∂loss/∂logits); accumulates every parameter's gradient.
  virtual void backward(const Tensor& dlogits) = 0;

  struct Decoded {
    std::vector<std::string> outputs;
    std::vector<std::vector<int32_t>> ids;  // the generated ids, EOS included when produced
    // With alignment_layer ≥ 0: per example, [H, steps, S] (float64) — the cross-attention
    // weights of that decoder layer's heads at each output step (EOS included) over the source.
    std::vector<Tensor> alignment;
  };
  // Greedy decoding, batch_size sources a batch; at most config.max_target + 1 steps.
  // alignment_layer: a decoder layer (0-based; −1 for none; ≥ layers: the last).
  Decoded greedy_decode(const std::vector<std::string>& sources, int alignment_layer = -1,
                        int64_t batch_size = 256);

  // Greedy-decodes `source`, then runs one teacher-forced pass of the encoder and the decoder
  // over the source and BOS + the output with capture on. Errors as greedy_decode's.
  virtual Seq2SeqCapture capture(const std::string& source) = 0;

  // The decoder over `source`'s encoding as a model with a residual stream (qkv/residual.h): what
  // the causal lens intervenes on at an output step, its attentions as layers (2b: block b's
  // self-attention, 2b + 1: its cross-attention and feed-forward), float32. The source is checked
  // as greedy_decode checks it. RNNsearch keeps no residual stream: a qkv::Error saying so.
  virtual std::shared_ptr<const ResidualModel> residual(const std::string& source);

  // The parameters and the config (in the metadata, with `extra` entries) to `path`, atomically.
  void save(const std::string& path, const std::map<std::string, std::string>& extra = {});
  // A model saved by save(); errors name the file. `metadata` receives the file's metadata.
  static std::unique_ptr<Seq2Seq> load(const std::string& path,
                                       std::map<std::string, std::string>* metadata = nullptr);

  const Seq2SeqConfig& config() const { return config_; }
  const Vocabulary& vocab() const { return vocab_; }

 protected:
  explicit Seq2Seq(const Seq2SeqConfig& config);  // validates it
  // greedy_decode of one batch (its sources, no targets yet), appended to `result`.
  virtual void decode_batch(Batch batch, int alignment_layer, Decoded& result) = 0;
  // What both captures begin with: greedy-decodes `source` into c's texts and tokens, and returns
  // the decoder's inputs as training feeds them (BOS, then every output but the last, which is
  // never an input), so that position t predicts output t.
  std::vector<int32_t> begin_capture(const std::string& source, Seq2SeqCapture& c);

  Seq2SeqConfig config_;
  Vocabulary vocab_;
};

// What the work on a model of `config` needs at its peak, in bytes: the whole process
// (qkv/memory.h), float32 parameters. train(): the parameters, their gradients and AdamW's two
// moments, and the activations forward and backward of a batch of `batch_size` examples at the
// config's longest source and target (and of the evaluation's decoding). Known before the model
// is made, so a command can refuse a size it cannot hold before allocating any of it.
int64_t seq2seq_train_bytes(const Seq2SeqConfig& config, int64_t batch_size);
// Seq2Seq::capture (and greedy_decode) of one source at the config's longest lengths: every
// attention layer's scores, logits and weights kept.
int64_t seq2seq_capture_bytes(const Seq2SeqConfig& config);

// A fresh model of config.architecture, initialized from `rng`.
std::unique_ptr<Seq2Seq> make_seq2seq(const Seq2SeqConfig& config, nn::Rng& rng,
                                      DType dtype = DType::f32);

}  // namespace qkv
