// The trained encoder–decoder transformer's decoder as a ResidualModel (qkv/residual.h): the
// causal lens of an output step. The source is encoded once; the decoder's stream then runs one
// attention at a time — layer 2b block b's causal self-attention, layer 2b + 1 its cross-attention
// over the encoder's output followed by the block's feed-forward — with the hooks applied. Each
// step is the float32 path the model's own forward takes (pre-norm blocks, nn::linear,
// qkv::attention), in the same order, so a pass with no hook gives the model's logits.
#include <cmath>
#include <memory>
#include <numeric>

#include "nn/dense.h"
#include "transformer.h"

namespace qkv {
namespace {

nn::LinearWeights weights_of(const nn::Linear& l) {
  return nn::to(nn::LinearWeights{.weight = l.weight.value, .bias = l.bias.value}, DType::f32);
}

nn::NormWeights norm_of(const nn::LayerNorm& n) {
  return nn::to(nn::NormWeights{.weight = n.weight.value, .bias = n.bias.value, .eps = n.eps},
                DType::f32);
}

Tensor identity(int64_t d) {
  Tensor eye({d, d}, DType::f32);
  for (int64_t i = 0; i < d; ++i) eye.data<float>()[i * d + i] = 1.0F;
  return eye;
}

// One attention of a decoder block: its norm, projections, score and whether it reads the memory.
struct Attention {
  nn::NormWeights norm;
  nn::LinearWeights q, k, v, o;  // k = q when tied; v and o identities (no bias) with identity_v
  ScoreParams params;
  bool identity_v = false, cross = false;
  Tensor memory_k, memory_v;  // cross: the encoder's output through W_K and W_V, [1, S, Hkv·d]
};

struct Block {
  Attention self, cross;
  nn::NormWeights ffn_norm;
  nn::LinearWeights ffn_in, ffn_out;
  nn::Activation activation = nn::Activation::relu;
};

// [B, n, H·d] rows → a [B, H, n, d] view.
Tensor split_heads(const Tensor& rows, int64_t heads) {
  return rows.reshape({rows.dim(0), rows.dim(1), heads, rows.dim(2) / heads}).transpose(1, 2);
}

// [1, S, w] repeated B times: [B, S, w].
Tensor repeated(const Tensor& x, int64_t b) {
  if (b == 1) return x;
  Tensor out({b, x.dim(1), x.dim(2)}, DType::f32);
  for (int64_t i = 0; i < b; ++i)
    std::copy_n(x.data<float>(), x.numel(), out.data<float>() + i * x.numel());
  return out;
}

// h += y, both contiguous float32 of one size (a sublayer's output into the stream).
void add_into(Tensor& h, const Tensor& y) {
  float* ph = h.data<float>();
  const float* py = y.data<float>();
  for (int64_t i = 0; i < h.numel(); ++i) ph[i] += py[i];
}

class DecoderResidual final : public ResidualModel {
 public:
  DecoderResidual(const Seq2SeqConfig& config, const Vocabulary& vocab, std::vector<Block> blocks,
                  Tensor embedding, Tensor positions, nn::NormWeights final_norm,
                  nn::LinearWeights output)
      : config_(config),
        vocab_(vocab),
        blocks_(std::move(blocks)),
        embedding_(std::move(embedding)),
        positions_(std::move(positions)),
        final_norm_(std::move(final_norm)),
        output_(std::move(output)) {}

  int64_t layers() const override { return 2 * static_cast<int64_t>(blocks_.size()); }
  int64_t heads() const override { return config_.heads; }
  int64_t kv_heads() const override {
    return config_.attention.kv_heads > 0 ? config_.attention.kv_heads : config_.heads;
  }
  int64_t head_dim() const override { return config_.d_model / config_.heads; }
  int64_t hidden() const override { return config_.d_model; }
  int64_t vocab() const override { return vocab_.size(); }
  int64_t context() const override { return config_.max_target + 1; }
  std::string token_text(int32_t id) const override { return vocab_.token(id); }
  std::vector<int32_t> tokenize(const std::string& text) const override {
    if (text == "</s>") return {Vocabulary::kEos};
    if (text == "<s>") return {Vocabulary::kBos};
    return vocab_.encode(text);
  }
  std::string layer_name(int64_t l) const override {
    return "L" + std::to_string(l / 2) + (l % 2 == 0 ? " self" : " cross");
  }
  int64_t keys(int64_t l, int64_t n) const override {
    return l % 2 == 0 ? n : attention(l).memory_k.dim(1);
  }
  bool causal(int64_t l) const override { return l % 2 == 0; }

  Tensor embed(const std::vector<int32_t>& ids) const override;
  void layer(int64_t l, Tensor& h, const LayerHooks& hooks) const override;
  Tensor final_norm(const Tensor& h) const override {
    Tensor y = h.contiguous().clone();
    nn::layer_norm(y, final_norm_);
    return y;
  }
  std::vector<double> final_norm_frozen(const std::vector<double>& x,
                                        const float* at) const override;
  Tensor unembed(const Tensor& normed) const override { return nn::linear(normed, output_); }
  std::vector<double> unembedding_row(int32_t id) const override {
    const float* w = output_.weight.data<float>() + int64_t{id} * hidden();
    return {w, w + hidden()};
  }
  double logit_bias(int32_t id) const override {
    const std::vector<double> u = unembedding_row(id);
    double s = output_.bias.defined() ? double{output_.bias.data<float>()[id]} : 0.0;
    for (int64_t r = 0; r < hidden(); ++r)
      s += double{final_norm_.bias.data<float>()[r]} * u[static_cast<std::size_t>(r)];
    return s;
  }
  const Tensor& query_matrix(int64_t l) const override { return attention(l).q.weight; }
  const Tensor& key_matrix(int64_t l) const override { return attention(l).k.weight; }
  const Tensor& value_matrix(int64_t l) const override { return attention(l).v.weight; }
  const Tensor& output_matrix(int64_t l) const override { return attention(l).o.weight; }
  Tensor attention_norm(int64_t l, const Tensor& h) const override {
    Tensor y = h.contiguous().clone();
    nn::layer_norm(y, attention(l).norm);
    return y;
  }
  void position(int64_t /*l*/, Tensor& /*x*/, int64_t /*start*/) const override {}  // added to the embedding

 private:
  const Attention& attention(int64_t l) const {
    if (l < 0 || l >= layers())
      throw Error("layer " + std::to_string(l) + "; expected 0 to " + std::to_string(layers() - 1),
                  Error::Kind::invalid_argument);
    const Block& b = blocks_[static_cast<std::size_t>(l / 2)];
    return l % 2 == 0 ? b.self : b.cross;
  }
  // h [B, n, hidden] += the attention's output, its heads hooked and its keys masked.
  void attend(int64_t l, Tensor& h, const LayerHooks& hooks) const;
  void feed_forward(const Block& b, Tensor& h) const;

  Seq2SeqConfig config_;
  Vocabulary vocab_;
  std::vector<Block> blocks_;
  Tensor embedding_, positions_;  // float32 [vocab, d], [≥ max_target + 1, d]
  nn::NormWeights final_norm_;
  nn::LinearWeights output_;
};

Tensor DecoderResidual::embed(const std::vector<int32_t>& ids) const {
  const auto n = static_cast<int64_t>(ids.size());
  if (n == 0 || n > context())
    throw Error(
        std::to_string(n) + " decoder positions; expected 1 to " + std::to_string(context()),
        Error::Kind::invalid_argument);
  const int64_t d = hidden();
  const auto scale = static_cast<float>(std::sqrt(static_cast<double>(d)));
  Tensor h({n, d}, DType::f32);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = ids[static_cast<std::size_t>(i)];
    if (id < 0 || id >= vocab())
      throw Error(
          "token id " + std::to_string(id) + "; expected 0 to " + std::to_string(vocab() - 1),
          Error::Kind::invalid_argument);
    const float* e = embedding_.data<float>() + int64_t{id} * d;
    const float* p = positions_.data<float>() + i * d;
    float* out = h.data<float>() + i * d;
    for (int64_t k = 0; k < d; ++k) out[k] = e[k] * scale + p[k];  // as scale_add_positions
  }
  return h;
}

void DecoderResidual::attend(int64_t l, Tensor& h, const LayerHooks& hooks) const {
  const Attention& a = attention(l);
  const int64_t b = h.dim(0), heads = config_.heads, kv = kv_heads();
  Tensor x = h.clone();
  nn::layer_norm(x, a.norm);
  const Tensor q = split_heads(nn::linear(x, a.q), heads);
  Tensor k, v;
  if (a.cross) {
    k = split_heads(repeated(a.memory_k, b), kv);
    v = split_heads(repeated(a.memory_v, b), kv);
  } else {
    k = split_heads(nn::linear(x, a.k), kv);
    v = split_heads(a.identity_v ? x : nn::linear(x, a.v), kv);
  }
  AttentionOptions options{.score = config_.attention.score,
                           .causal = a.cross ? Causal::none : Causal::top_left,
                           .params = a.params};
  if (hooks.mask) options.mask = hooks.mask(l);
  Tensor o = qkv::attention(q, k, v, options).out.contiguous();
  if (hooks.heads) hooks.heads(l, o);
  const Tensor merged = nn::merge_heads(o);
  add_into(h, a.identity_v ? merged : nn::linear(merged, a.o));
}

void DecoderResidual::feed_forward(const Block& b, Tensor& h) const {
  Tensor x = h.clone();
  nn::layer_norm(x, b.ffn_norm);
  Tensor z = nn::linear(x, b.ffn_in);
  if (b.activation == nn::Activation::gelu) {
    nn::gelu(z);
  } else {
    float* p = z.data<float>();
    for (int64_t i = 0; i < z.numel(); ++i) p[i] = p[i] > 0.0F ? p[i] : 0.0F;
  }
  add_into(h, nn::linear(z, b.ffn_out));
}

void DecoderResidual::layer(int64_t l, Tensor& h, const LayerHooks& hooks) const {
  attention(l);  // checks l
  const bool batched = h.rank() == 3;
  Tensor s = batched ? h : h.reshape({1, h.dim(0), h.dim(1)});  // a view of h
  attend(l, s, hooks);
  if (hooks.attended) hooks.attended(l, h);
  if (l % 2 == 1) feed_forward(blocks_[static_cast<std::size_t>(l / 2)], s);
  if (hooks.layer_out) hooks.layer_out(l, h);
}

std::vector<double> DecoderResidual::final_norm_frozen(const std::vector<double>& x,
                                                       const float* at) const {
  // LayerNorm at a frozen scale: (x − mean x)·γ/σ(at), σ(at)² = var(at) + ε. The centring is
  // linear, so the parts' images sum to the whole's less β, which logit_bias carries.
  const int64_t d = hidden();
  double mean_at = 0, var_at = 0, mean_x = 0;
  for (int64_t r = 0; r < d; ++r) mean_at += at[r] / static_cast<double>(d);
  for (int64_t r = 0; r < d; ++r) var_at += (at[r] - mean_at) * (at[r] - mean_at) / d;
  for (int64_t r = 0; r < d; ++r) mean_x += x[static_cast<std::size_t>(r)] / d;
  const double inv = 1.0 / std::sqrt(var_at + final_norm_.eps);
  std::vector<double> y(static_cast<std::size_t>(d));
  for (int64_t r = 0; r < d; ++r)
    y[static_cast<std::size_t>(r)] =
        (x[static_cast<std::size_t>(r)] - mean_x) * final_norm_.weight.data<float>()[r] * inv;
  return y;
}

}  // namespace

std::shared_ptr<const ResidualModel> TransformerSeq2Seq::residual(const std::string& source) {
  Batch batch = make_batch(vocab_, {{source, ""}});
  nn::Rng rng(0);  // no dropout at inference
  const Tensor memory = encode(batch, false, rng).to(DType::f32);
  std::vector<Block> blocks;
  for (const auto& d : decoder_) {
    Block b;
    const auto attention_of = [&](const nn::MultiHeadAttention& m, const nn::LayerNorm& norm,
                                  bool cross) {
      Attention a{.norm = norm_of(norm),
                  .q = weights_of(*m.q),
                  .identity_v = m.options().identity_v,
                  .cross = cross};
      a.k = m.k ? weights_of(*m.k) : a.q;
      a.v = m.v ? weights_of(*m.v) : nn::LinearWeights{.weight = identity(config_.d_model)};
      a.o = m.o ? weights_of(*m.o) : nn::LinearWeights{.weight = identity(config_.d_model)};
      const auto f32 = [](const Tensor& t) { return t.to(DType::f32); };
      if (m.options().score == Score::general) a.params.w = f32(m.extra[0].value);
      if (m.options().score == Score::additive)
        a.params = {
            .w_q = f32(m.extra[0].value), .w_k = f32(m.extra[1].value), .v = f32(m.extra[2].value)};
      if (cross) {
        a.memory_k = nn::linear(memory, a.k);
        a.memory_v = a.identity_v ? memory : nn::linear(memory, a.v);
      }
      return a;
    };
    b.self = attention_of(d->self_attention, d->norm1, false);
    b.cross = attention_of(d->cross_attention, d->norm2, true);
    b.ffn_norm = norm_of(d->norm3);
    b.ffn_in = weights_of(d->ffn.in);
    b.ffn_out = weights_of(d->ffn.out);
    b.activation = d->ffn.activation;
    blocks.push_back(std::move(b));
  }
  return std::make_shared<DecoderResidual>(
      config_, vocab_, std::move(blocks), embedding_.weight.value.to(DType::f32),
      positions_.to(DType::f32), norm_of(decoder_norm_), weights_of(output_));
}

}  // namespace qkv
