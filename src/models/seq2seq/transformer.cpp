// The encoder–decoder transformer of `qkv train`: forward, backward, greedy decoding, capture.
#include "transformer.h"

#include <algorithm>
#include <cmath>

#include "core/dispatch.h"
#include "qkv/tensor.h"

namespace qkv {

namespace {

nn::BlockOptions block_options(const Seq2SeqConfig& c) {
  nn::BlockOptions o;
  o.d_model = c.d_model;
  o.heads = c.heads;
  o.ffn_hidden = c.hidden();
  o.activation = nn::Activation::relu;
  o.norm = nn::NormPosition::pre;
  o.dropout = c.dropout;
  o.attention = c.attention;
  o.attention.d_model = c.d_model;
  o.attention.heads = c.heads;
  o.attention.dropout = c.dropout;
  return o;
}

// x[n, l, :] ← scale·x[n, l, :] + pe[l, :] for a contiguous x: [N, L, D], pe: [≥ L, D].
template <class T>
void scale_add_positions(Tensor& x, const Tensor& pe, double scale) {
  const int64_t n = x.dim(0), l = x.dim(1), d = x.dim(2);
  T* px = x.data<T>();
  const T* pp = pe.data<T>();
  const T s = static_cast<T>(scale);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < l; ++j)
      for (int64_t k = 0; k < d; ++k)
        px[(i * l + j) * d + k] = px[(i * l + j) * d + k] * s + pp[j * d + k];
}

// dst[first + b, 0:L, :] = scale·src[b, :, :] for contiguous dst: [M, Ld, D], src: [B, L, D].
template <class T>
void put_rows(Tensor& dst, int64_t first, const Tensor& src, double scale) {
  const int64_t b = src.dim(0), l = src.dim(1), d = src.dim(2), ld = dst.dim(1);
  T* pd = dst.data<T>();
  const Tensor g = src.contiguous();
  const T* ps = g.data<T>();
  const T s = static_cast<T>(scale);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < l; ++j)
      for (int64_t k = 0; k < d; ++k)
        pd[((first + i) * ld + j) * d + k] = ps[(i * l + j) * d + k] * s;
}

template <class T>
void add_into(Tensor& a, const Tensor& b) {
  const Tensor g = b.contiguous();
  T* pa = a.data<T>();
  const T* pb = g.data<T>();
  const int64_t n = a.numel();
  for (int64_t i = 0; i < n; ++i) pa[i] += pb[i];
}

void add_into(Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape())
    throw Error("seq2seq: gradient of shape " + shape_str(b.shape()) + " added to " +
                shape_str(a.shape()));
  dispatch_float(a.dtype(), [&]<class T>(T) { add_into<T>(a, b); });
}

// Token ids padded to `length` with PAD.
std::vector<int32_t> padded(std::vector<int32_t> ids, int64_t length) {
  ids.resize(static_cast<std::size_t>(length), Vocabulary::kPad);
  return ids;
}

}  // namespace

TransformerSeq2Seq::TransformerSeq2Seq(const Seq2SeqConfig& config, nn::Rng& rng, DType dtype)
    : Seq2Seq(config),
      dtype_(dtype),
      embedding_("embedding", vocab_.size(), config.d_model, rng, dtype),
      encoder_norm_("encoder.norm", config.d_model, 1e-5, dtype),
      decoder_norm_("decoder.norm", config.d_model, 1e-5, dtype),
      output_("output", config.d_model, vocab_.size(), true, rng, dtype) {
  const nn::BlockOptions o = block_options(config_);
  for (int64_t i = 0; i < config_.layers; ++i)
    encoder_.push_back(
        std::make_unique<nn::EncoderBlock>("encoder." + std::to_string(i), o, rng, dtype));
  for (int64_t i = 0; i < config_.layers; ++i)
    decoder_.push_back(
        std::make_unique<nn::DecoderBlock>("decoder." + std::to_string(i), o, rng, dtype));
  positions_ = nn::sinusoidal_positions(std::max(config_.max_source, config_.max_target + 1),
                                        config_.d_model, dtype);
  // Embedding rows N(0, 1) scaled by √d would start the residual stream at ≈ √d per entry;
  // N(0, 1/d) rows (as Vaswani et al.'s shared embedding) start it at ≈ 1, the positions' size.
  const double s = 1.0 / std::sqrt(static_cast<double>(config_.d_model));
  Tensor& w = embedding_.weight.value;
  dispatch_float(dtype, [&]<class T>(T) {
    for (int64_t i = 0; i < w.numel(); ++i) w.data<T>()[i] *= static_cast<T>(s);
  });
}

void TransformerSeq2Seq::collect(std::vector<nn::Parameter*>& out) {
  embedding_.collect(out);
  for (auto& b : encoder_) b->collect(out);
  encoder_norm_.collect(out);
  for (auto& b : decoder_) b->collect(out);
  decoder_norm_.collect(out);
  output_.collect(out);
}

Tensor TransformerSeq2Seq::encode(const Batch& batch, bool training, nn::Rng& rng) {
  if (batch.source_length > config_.max_source)
    throw Error("a source of " + std::to_string(batch.source_length) +
                " characters is longer than the model's limit of " +
                std::to_string(config_.max_source));
  Tensor h = embedding_.forward(batch.source);
  const double scale = std::sqrt(static_cast<double>(config_.d_model));
  dispatch_float(dtype_, [&]<class T>(T) { scale_add_positions<T>(h, positions_, scale); });
  for (auto& block : encoder_) h = block->forward(h, batch.source_lengths, training, rng);
  return encoder_norm_.forward(h);
}

Tensor TransformerSeq2Seq::decode(const Batch& batch, const Tensor& memory, bool training,
                                  nn::Rng& rng, int need_weights_layer) {
  if (batch.target_length > config_.max_target + 1)
    throw Error("a target of " + std::to_string(batch.target_length - 1) +
                " characters is longer than the model's limit of " +
                std::to_string(config_.max_target));
  Tensor y = embedding_.forward(batch.target_in);
  const double scale = std::sqrt(static_cast<double>(config_.d_model));
  dispatch_float(dtype_, [&]<class T>(T) { scale_add_positions<T>(y, positions_, scale); });
  for (std::size_t i = 0; i < decoder_.size(); ++i)
    y = decoder_[i]->forward(y, memory, batch.target_lengths, batch.source_lengths, training, rng,
                             static_cast<int>(i) == need_weights_layer);
  return output_.forward(decoder_norm_.forward(y));
}

// The embedding is shared by source and target, and nn::Embedding saves the ids of one forward,
// so training embeds both in one call: rows 0..B−1 the sources, rows B..2B−1 the targets, each
// padded to max(S, T); backward scatters both gradients into that one [2B, L, D] gradient.
Tensor TransformerSeq2Seq::forward(const Batch& batch, bool training, nn::Rng& rng) {
  if (batch.size == 0) throw Error("seq2seq forward: the batch is empty");
  if (batch.source_length > config_.max_source || batch.target_length > config_.max_target + 1)
    throw Error("seq2seq forward: a batch of sources ≤ " + std::to_string(batch.source_length) +
                " and targets ≤ " + std::to_string(batch.target_length - 1) +
                " exceeds the model's limits (" + std::to_string(config_.max_source) + ", " +
                std::to_string(config_.max_target) + ")");
  batch_ = batch.size;
  source_length_ = batch.source_length;
  target_length_ = batch.target_length;
  embed_length_ = std::max(source_length_, target_length_);
  std::vector<std::vector<int32_t>> ids;
  ids.reserve(static_cast<std::size_t>(2 * batch_));
  for (const auto& s : batch.source) ids.push_back(padded(s, embed_length_));
  for (const auto& t : batch.target_in) ids.push_back(padded(t, embed_length_));
  const Tensor e = embedding_.forward(ids);
  Tensor x = e.narrow(0, 0, batch_).narrow(1, 0, source_length_).clone();
  Tensor y = e.narrow(0, batch_, batch_).narrow(1, 0, target_length_).clone();
  const double scale = std::sqrt(static_cast<double>(config_.d_model));
  dispatch_float(dtype_, [&]<class T>(T) {
    scale_add_positions<T>(x, positions_, scale);
    scale_add_positions<T>(y, positions_, scale);
  });
  for (auto& block : encoder_) x = block->forward(x, batch.source_lengths, training, rng);
  const Tensor memory = encoder_norm_.forward(x);
  for (auto& block : decoder_)
    y = block->forward(y, memory, batch.target_lengths, batch.source_lengths, training, rng);
  return output_.forward(decoder_norm_.forward(y));
}

// Forward was logits = W·LN(dec(y, memory)), memory = LN(enc(x)), x and y scaled embeddings
// plus positions, so: back through the output and the decoder (collecting ∂memory from every
// cross-attention), then the encoder, then ∂embedding rows = √d·(∂x, ∂y).
void TransformerSeq2Seq::backward(const Tensor& dlogits) {
  if (batch_ == 0) throw Error("Seq2Seq::backward called before forward");
  Tensor dy = decoder_norm_.backward(output_.backward(dlogits));
  Tensor dmemory(Shape{batch_, source_length_, config_.d_model}, dtype_);
  for (auto it = decoder_.rbegin(); it != decoder_.rend(); ++it) {
    nn::DecoderBlock::Grads g = (*it)->backward(dy);
    dy = std::move(g.dx);
    add_into(dmemory, g.dmemory);
  }
  Tensor dx = encoder_norm_.backward(dmemory);
  for (auto it = encoder_.rbegin(); it != encoder_.rend(); ++it) dx = (*it)->backward(dx);
  Tensor de(Shape{2 * batch_, embed_length_, config_.d_model}, dtype_);
  const double scale = std::sqrt(static_cast<double>(config_.d_model));
  dispatch_float(dtype_, [&]<class T>(T) {
    put_rows<T>(de, 0, dx, scale);
    put_rows<T>(de, batch_, dy, scale);
  });
  embedding_.backward(de);
}

void TransformerSeq2Seq::decode_batch(Batch batch, int alignment_layer, Decoded& result) {
  const int n_layers = static_cast<int>(decoder_.size());
  const int layer = alignment_layer < 0 ? -1 : std::min(alignment_layer, n_layers - 1);
  nn::Rng rng(0);  // no dropout at inference; the stream is never drawn from
  const int64_t max_steps = config_.max_target + 1;
  const Tensor memory = encode(batch, false, rng);
  const int64_t b = batch.size;
  std::vector<std::vector<int32_t>> out(static_cast<std::size_t>(b), {Vocabulary::kBos});
  std::vector<int64_t> produced(static_cast<std::size_t>(b), 0);
  std::vector<std::vector<int32_t>> generated(static_cast<std::size_t>(b));
  std::vector<bool> done(static_cast<std::size_t>(b), false);
  for (int64_t step = 0; step < max_steps; ++step) {
    batch.target_in = out;
    batch.target_length = step + 1;
    batch.target_lengths.assign(static_cast<std::size_t>(b), step + 1);
    const Tensor logits = decode(batch, memory, false, rng).to(DType::f64);
    const int64_t v = logits.dim(2);
    bool all_done = true;
    for (int64_t i = 0; i < b; ++i) {
      const double* row = logits.data<double>() + (i * (step + 1) + step) * v;
      const int32_t id = static_cast<int32_t>(std::max_element(row, row + v) - row);
      auto& o = out[static_cast<std::size_t>(i)];
      if (done[static_cast<std::size_t>(i)]) {
        o.push_back(Vocabulary::kPad);
        continue;
      }
      o.push_back(id);
      generated[static_cast<std::size_t>(i)].push_back(id);
      ++produced[static_cast<std::size_t>(i)];
      if (id == Vocabulary::kEos) done[static_cast<std::size_t>(i)] = true;
      all_done = all_done && done[static_cast<std::size_t>(i)];
    }
    if (all_done) break;
  }
  if (layer >= 0) {
    // Causal self-attention makes position t of a full pass equal to step t of the loop, so
    // one pass over BOS + the outputs gives every step's cross-attention.
    // The last output is never an input: BOS + outputs[0 .. steps − 2] predict every step.
    for (auto& o : out) o.pop_back();
    batch.target_in = out;
    batch.target_length = static_cast<int64_t>(out[0].size());
    batch.target_lengths.assign(static_cast<std::size_t>(b), batch.target_length);
    decode(batch, memory, false, rng, layer);
    const Tensor w =
        decoder_[static_cast<std::size_t>(layer)]->cross_attention.weights().to(DType::f64);
    const int64_t h = w.dim(1), l = w.dim(2), s = w.dim(3);
    for (int64_t i = 0; i < b; ++i) {
      const int64_t steps = produced[static_cast<std::size_t>(i)];
      const int64_t len = batch.source_lengths[static_cast<std::size_t>(i)];
      Tensor a(Shape{h, steps, len}, DType::f64);
      for (int64_t k = 0; k < h; ++k)
        for (int64_t t = 0; t < steps; ++t)
          for (int64_t j = 0; j < len; ++j)
            a.data<double>()[(k * steps + t) * len + j] =
                w.data<double>()[((i * h + k) * l + t) * s + j];
      result.alignment.push_back(a);
    }
  }
  for (int64_t i = 0; i < b; ++i) {
    std::vector<int32_t> ids = std::move(generated[static_cast<std::size_t>(i)]);
    result.outputs.push_back(vocab_.decode(ids));
    result.ids.push_back(std::move(ids));
  }
}

Seq2SeqCapture TransformerSeq2Seq::capture(const std::string& source) {
  Seq2SeqCapture c;
  // As greedy_decode's alignment pass feeds the decoder.
  const std::vector<int32_t> target_in = begin_capture(source, c);

  const nn::MultiHeadAttentionOptions& a = decoder_[0]->cross_attention.options();
  c.layers = config_.layers;
  c.heads = config_.heads;
  c.kv_heads = a.kv_heads;
  c.head_dim = config_.d_model / config_.heads;
  c.tie_qk = a.tie_qk;
  c.identity_v = a.identity_v;

  const auto n = static_cast<std::size_t>(config_.layers);
  c.encoder.resize(n), c.decoder_self.resize(n), c.cross.resize(n);
  std::vector<nn::MultiHeadAttention*> attached;
  for (std::size_t i = 0; i < n; ++i) {
    encoder_[i]->attention.capture = &c.encoder[i];
    decoder_[i]->self_attention.capture = &c.decoder_self[i];
    decoder_[i]->cross_attention.capture = &c.cross[i];
    attached.insert(attached.end(), {&encoder_[i]->attention, &decoder_[i]->self_attention,
                                     &decoder_[i]->cross_attention});
  }
  // Detached on every way out (an error included), so later forwards keep nothing.
  struct Detach {
    std::vector<nn::MultiHeadAttention*>& layers;
    ~Detach() {
      for (nn::MultiHeadAttention* l : layers) l->capture = nullptr;
    }
  } detach{attached};

  Batch batch = make_batch(vocab_, {{source, ""}});
  batch.target_in = {target_in};
  batch.target_length = static_cast<int64_t>(target_in.size());
  batch.target_lengths = {batch.target_length};
  nn::Rng rng(0);  // no dropout at inference; the stream is never drawn from
  decode(batch, encode(batch, false, rng), false, rng);
  return c;
}

}  // namespace qkv
