// CausalLM::residual: the Llama decoder as a qkv::ResidualModel, one layer at a time on the
// pieces of llama_forward (models/llama/llama.h), without a cache: every pass runs positions
// 0 … n − 1.
#include <cmath>
#include <map>
#include <mutex>

#include "models/llama/llama.h"
#include "models/text/gguf_tokenizer.h"

namespace qkv {
namespace {

class LlamaResidual final : public ResidualModel {
 public:
  LlamaResidual(std::shared_ptr<const LlamaConfig> config,
                std::shared_ptr<const LlamaWeights> weights,
                std::shared_ptr<const GgufTokenizer> tokenizer)
      : c_(std::move(config)), w_(std::move(weights)), tokenizer_(std::move(tokenizer)) {}

  int64_t layers() const override { return c_->layers; }
  int64_t heads() const override { return c_->heads; }
  int64_t kv_heads() const override { return c_->kv_heads; }
  int64_t head_dim() const override { return c_->head_dim; }
  int64_t hidden() const override { return c_->hidden; }
  int64_t vocab() const override { return c_->vocab; }
  int64_t context() const override { return c_->context; }
  std::string token_text(int32_t id) const override { return tokenizer_->token_text(id); }
  std::vector<int32_t> tokenize(const std::string& text) const override {
    return tokenizer_->encode(text, GgufTokenizer::Unspelled::refuse);
  }
  std::vector<int32_t> tokenize_piece(const std::string& text) const override {
    return tokenizer_->encode_piece(text, GgufTokenizer::Unspelled::refuse);
  }

  Tensor embed(const std::vector<int32_t>& ids) const override {
    return llama_embed(*w_, *c_, ids, 0);
  }

  void layer(int64_t l, Tensor& h, const LayerHooks& hooks) const override {
    check_layer(l);
    KvCache cache;
    llama_layer(*w_, *c_, l, h, cache, nullptr, hooks);
  }

  Tensor final_norm(const Tensor& h) const override {
    Tensor x = h.clone();
    llama_rms_norm(x, w_->output_norm, c_->eps);
    return x;
  }

  std::vector<double> final_norm_frozen(const std::vector<double>& x,
                                        const float* at) const override {
    double squares = 0;
    for (int64_t j = 0; j < c_->hidden; ++j) squares += double{at[j]} * at[j];
    const double inv = 1.0 / std::sqrt(squares / static_cast<double>(c_->hidden) + c_->eps);
    std::vector<double> y(x.size());
    const float* g = w_->output_norm.data<float>();
    for (std::size_t j = 0; j < x.size(); ++j) y[j] = x[j] * inv * g[j];
    return y;
  }

  Tensor unembed(const Tensor& normed) const override {
    return llama_unembed(*w_, *c_, normed);
  }

  std::vector<double> unembedding_row(int32_t id) const override {
    if (id < 0 || id >= c_->vocab)
      throw Error("token id " + std::to_string(id) + "; expected 0 to " +
                  std::to_string(c_->vocab - 1));
    std::vector<float> row(static_cast<std::size_t>(c_->hidden));
    llama_matrix_row(w_->output, id, row.data());
    return {row.begin(), row.end()};
  }

  const Tensor& query_matrix(int64_t l) const override { return dense(l, 0, at(l).q); }
  const Tensor& key_matrix(int64_t l) const override { return dense(l, 1, at(l).k); }
  const Tensor& value_matrix(int64_t l) const override { return dense(l, 2, at(l).v); }
  const Tensor& output_matrix(int64_t l) const override { return dense(l, 3, at(l).o); }

  Tensor attention_norm(int64_t l, const Tensor& h) const override {
    Tensor x = h.clone();
    llama_rms_norm(x, at(l).attn_norm, c_->eps);
    return x;
  }

  void position(int64_t l, Tensor& x, int64_t start) const override {
    check_layer(l);
    rope(x, rope_table(*c_, *w_, l, start, x.dim(2)));
  }

  void finish_projection(int64_t l, Tensor& x, int64_t head, bool query) const override {
    const LlamaLayer& layer = at(l);
    const int64_t d = c_->head_dim, rows = x.numel() / d;
    float* p = x.data<float>();
    const Tensor& bias = llama_bias(query ? layer.q : layer.k);
    if (bias.defined())
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < d; ++i) p[r * d + i] += bias.data<float>()[head * d + i];
    if (c_->qk_norm) llama_rms_norm(x, query ? layer.q_norm : layer.k_norm, c_->eps);
  }

  double attention_scale(int64_t /*l*/) const override { return c_->attention_scale; }

  std::vector<double> attention_part(int64_t l, const std::vector<double>& part,
                                     const std::vector<double>& whole) const override {
    if (!c_->post_norms) return part;
    // Gemma's RMSNorm after W_O, frozen at the whole: each head's part scaled as the whole is.
    double squares = 0;
    for (const double x : whole) squares += x * x;
    const double inv = 1.0 / std::sqrt(squares / static_cast<double>(whole.size()) + c_->eps);
    const float* g = at(l).post_attn_norm.data<float>();
    std::vector<double> y(part.size());
    for (std::size_t j = 0; j < part.size(); ++j) y[j] = part[j] * inv * g[j];
    return y;
  }

 private:
  std::shared_ptr<const LlamaConfig> c_;
  std::shared_ptr<const LlamaWeights> w_;
  std::shared_ptr<const GgufTokenizer> tokenizer_;
  // W_Q, W_K, W_V, W_O of each layer as float32, dequantized when first asked for where the model
  // keeps blocks (the circuits read them whole; a decode never does).
  mutable std::mutex dense_mutex_;
  mutable std::map<std::pair<int64_t, int>, Tensor> dense_;

  const Tensor& dense(int64_t l, int which, const LlamaMatrix& m) const {
    if (!m.quantized()) return m.dense.weight;
    const std::lock_guard<std::mutex> lock(dense_mutex_);
    Tensor& t = dense_[{l, which}];
    if (!t.defined()) t = llama_dense(m);
    return t;
  }

  void check_layer(int64_t l) const {
    if (l < 0 || l >= c_->layers)
      throw Error("layer " + std::to_string(l) + "; expected 0 to " +
                  std::to_string(c_->layers - 1));
  }
  const LlamaLayer& at(int64_t l) const {
    check_layer(l);
    return w_->layers[static_cast<std::size_t>(l)];
  }
};

}  // namespace

std::shared_ptr<const ResidualModel> CausalLM::residual() const {
  require_weights("residual");
  return std::make_shared<LlamaResidual>(config_, weights_, tokenizer_);
}

}  // namespace qkv
