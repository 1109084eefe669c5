// CausalLM::residual: the Llama decoder as a qkv::ResidualModel, one layer at a time on the
// pieces of llama_forward (models/llama/llama.h), without a cache: every pass runs positions
// 0 … n − 1.
#include <cmath>

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

  Tensor embed(const std::vector<int32_t>& ids) const override {
    return llama_embed(*w_, *c_, ids, 0);
  }

  void layer(int64_t l, Tensor& h, const LayerHooks& hooks) const override {
    check_layer(l);
    KvCache cache;
    llama_layer(*w_, *c_, l, h, rope_table(0, h.dim(-2), c_->head_dim, c_->rope_base), cache,
                nullptr, hooks);
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

  Tensor unembed(const Tensor& normed) const override { return nn::linear(normed, w_->output); }

  std::vector<double> unembedding_row(int32_t id) const override {
    if (id < 0 || id >= c_->vocab)
      throw Error("token id " + std::to_string(id) + "; expected 0 to " +
                  std::to_string(c_->vocab - 1));
    const float* row = w_->output.weight.data<float>() + int64_t{id} * c_->hidden;
    return {row, row + c_->hidden};
  }

  const Tensor& query_matrix(int64_t l) const override { return at(l).q.weight; }
  const Tensor& key_matrix(int64_t l) const override { return at(l).k.weight; }
  const Tensor& value_matrix(int64_t l) const override { return at(l).v.weight; }
  const Tensor& output_matrix(int64_t l) const override { return at(l).o.weight; }

  Tensor attention_norm(int64_t l, const Tensor& h) const override {
    Tensor x = h.clone();
    llama_rms_norm(x, at(l).attn_norm, c_->eps);
    return x;
  }

  void position(Tensor& x, int64_t start) const override { rope(x, start, c_->rope_base); }

 private:
  std::shared_ptr<const LlamaConfig> c_;
  std::shared_ptr<const LlamaWeights> w_;
  std::shared_ptr<const GgufTokenizer> tokenizer_;

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
