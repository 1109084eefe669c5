// models/seq2seq/seq2seq.h — the encoder–decoder transformer `qkv train` trains (Vaswani et al.
// 2017), pre-norm, character-level, one vocabulary shared by source and target:
//
//   x = Embedding(src)·√d + PE          y = Embedding(tgt_in)·√d + PE      (tgt_in = BOS target)
//   memory = LayerNorm(EncoderBlockᴺ(x))
//   logits = Linear(LayerNorm(DecoderBlockᴺ(y, memory)))                    → target EOS
//
// forward/backward follow nn.h: forward saves what backward needs; backward accumulates into the
// parameters' gradients. Greedy decoding is batched and can hand back the cross-attention
// weights of one decoder layer for every output step (the alignment of Bahdanau et al. 2014,
// Figure 3). Models are saved as safetensors with their configuration in the metadata.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/seq2seq/tasks.h"
#include "qkv/nn.h"

namespace qkv {

struct Seq2SeqConfig {
  std::string task;  // the task it was made for ("reverse", "dates", ...)
  TaskOptions task_options;
  std::string characters;  // the vocabulary's characters (ids 3, 4, ...; 0–2: PAD, BOS, EOS)
  int64_t layers = 2;      // encoder blocks, and as many decoder blocks
  int64_t heads = 4;
  int64_t d_model = 64;
  int64_t ffn_hidden = 0;                    // 0: 4·d_model
  int64_t max_source = 32, max_target = 16;  // longest source; longest target (EOS not counted)
  double dropout = 0.0;
  // Every attention layer's variant (score, tie_qk, identity_v, kv_heads) — what `qkv experiment`
  // varies; d_model, heads and dropout are taken from the fields above.
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
// is [1, H, L, S] (see AttentionCapture, qkv/attention.h, for every tensor's shape and meaning).
struct Seq2SeqCapture {
  std::string source, output;              // output: greedy decoding's text (EOS not included)
  std::vector<std::string> source_tokens;  // one per source character: the encoder's keys
  // The decoder's inputs, as training feeds them: "<s>" then every output token but the last;
  // decoder position t reads target_tokens[t] and predicts output_tokens[t].
  std::vector<std::string> target_tokens;
  std::vector<std::string> output_tokens;  // the generated tokens, "</s>" included when produced
  // The configuration the captures ran with (each capture holds its score, scale and mask).
  int64_t layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  bool tie_qk = false, identity_v = false;
  // One per layer. encoder: self-attention over the source (padding-free, so nothing masked).
  // decoder_self: causal self-attention over target_tokens (logits −∞ above the diagonal).
  // cross: the decoder's queries over the encoder's output (its weights are greedy_decode's
  // alignment for that layer).
  std::vector<AttentionCapture> encoder, decoder_self, cross;
};

class Seq2Seq : public nn::Module {
 public:
  Seq2Seq(const Seq2SeqConfig& config, nn::Rng& rng, DType dtype = DType::f32);

  // logits: [B, T, V]. Saves what backward needs.
  Tensor forward(const Batch& batch, bool training, nn::Rng& rng);
  // dlogits: [B, T, V] (∂loss/∂logits); accumulates every parameter's gradient.
  void backward(const Tensor& dlogits);

  struct Decoded {
    std::vector<std::string> outputs;
    std::vector<std::vector<int32_t>> ids;  // the generated ids, EOS included when produced
    // With alignment_layer ≥ 0: per example, [H, steps, S] (float64) — the cross-attention
    // weights of that decoder layer's heads at each output step (EOS included) over the source.
    std::vector<Tensor> alignment;
  };
  // Greedy decoding, batched; at most config.max_target + 1 steps. alignment_layer: a decoder
  // layer (0-based; −1 for none; ≥ layers: the last).
  Decoded greedy_decode(const std::vector<std::string>& sources, int alignment_layer = -1,
                        int64_t batch_size = 256);

  // Greedy-decodes `source`, then runs one teacher-forced pass of the encoder and the decoder
  // over the source and BOS + the output with capture on. Errors as greedy_decode's.
  Seq2SeqCapture capture(const std::string& source);

  // The parameters and the config (in the metadata, with `extra` entries) to `path`, atomically.
  void save(const std::string& path, const std::map<std::string, std::string>& extra = {});
  // A model saved by save(); errors name the file. `metadata` receives the file's metadata.
  static std::unique_ptr<Seq2Seq> load(const std::string& path,
                                       std::map<std::string, std::string>* metadata = nullptr);

  void collect(std::vector<nn::Parameter*>& out) override;
  const Seq2SeqConfig& config() const { return config_; }
  const Vocabulary& vocab() const { return vocab_; }

 private:
  Tensor encode(const Batch& batch, bool training, nn::Rng& rng);
  Tensor decode(const Batch& batch, const Tensor& memory, bool training, nn::Rng& rng,
                int need_weights_layer = -1);

  Seq2SeqConfig config_;
  Vocabulary vocab_;
  DType dtype_;
  nn::Embedding embedding_;
  std::vector<std::unique_ptr<nn::EncoderBlock>> encoder_;
  std::vector<std::unique_ptr<nn::DecoderBlock>> decoder_;
  nn::LayerNorm encoder_norm_, decoder_norm_;
  nn::Linear output_;
  Tensor positions_;  // [max(max_source, max_target + 1), d_model]
  // Saved by forward for backward.
  int64_t batch_ = 0, source_length_ = 0, target_length_ = 0, embed_length_ = 0;
};

}  // namespace qkv
