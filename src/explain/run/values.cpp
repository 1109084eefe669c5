// What the values carried: each head's value vectors as W_O writes them into the stream, their
// norms (Kobayashi et al. 2020, "Attention is not only a weight") and the Grams the mixing of
// Kobayashi et al. 2021 ("Incorporating Residual and Normalization Layers into Analysis of Masked
// Language Models") reads, per key, in float64.
#include "explain/run/values.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "models/bert/bert.h"
#include "qkv/threads.h"

namespace qkv::explain {
namespace {

void check_shapes(const Tensor& w_o, const Tensor& v, const char* what) {
  if (w_o.rank() != 2 || v.rank() != 4 || w_o.dim(1) != v.dim(1) * v.dim(3))
    throw Error(std::string(what) + ": W_O " + shape_str(w_o.shape()) + " and v " +
                shape_str(v.shape()) + "; expected [hidden, H·d] and [1, H, m, d]");
}

}  // namespace

Tensor ov_norms(const Tensor& w_o, const Tensor& v) {
  check_shapes(w_o, v, "ov_norms");
  const Tensor W = w_o.to(DType::f64), V = v.to(DType::f64);
  const int64_t hidden = W.dim(0), heads = V.dim(1), m = V.dim(2), d = V.dim(3);
  const double* w = W.data<double>();
  Tensor out({1, heads, m}, DType::f64);
  parallel_for(heads, default_num_threads(), [&](int64_t h, int) {
    // G = W_O^hᵀ W_O^h [d, d], row by row of W_O (the inner loop runs along b: it vectorizes).
    std::vector<double> gram(static_cast<std::size_t>(d * d), 0.0);
    for (int64_t r = 0; r < hidden; ++r) {
      const double* row = w + r * heads * d + h * d;
      for (int64_t a = 0; a < d; ++a)
        for (int64_t b = 0; b < d; ++b)
          gram[static_cast<std::size_t>(a * d + b)] += row[a] * row[b];
    }
    for (int64_t j = 0; j < m; ++j) {
      const double* x = V.data<double>() + (h * m + j) * d;
      double s = 0;  // xᵀ G x = ‖W_O^h x‖²
      for (int64_t a = 0; a < d; ++a) {
        double t = 0;
        for (int64_t b = 0; b < d; ++b) t += gram[static_cast<std::size_t>(a * d + b)] * x[b];
        s += x[a] * t;
      }
      out.data<double>()[h * m + j] = std::sqrt(std::max(s, 0.0));
    }
  });
  return out;
}

WrittenValues written_values(const Tensor& w_o, const Tensor& v, const Tensor& stream,
                             const Tensor& gain) {
  check_shapes(w_o, v, "written_values");
  const int64_t hidden = w_o.dim(0), heads = v.dim(1), m = v.dim(2), d = v.dim(3);
  if (stream.numel() != m * hidden || (gain.defined() && gain.numel() != hidden))
    throw Error("written_values: stream " + shape_str(stream.shape()) + ", gain " +
                (gain.defined() ? shape_str(gain.shape()) : std::string("none")) +
                "; expected [1, " + std::to_string(m) + ", " + std::to_string(hidden) + "] and [" +
                std::to_string(hidden) + "]");
  const Tensor W = w_o.to(DType::f64), V = v.to(DType::f64), X = stream.to(DType::f64);
  const Tensor G = gain.defined() ? gain.to(DType::f64) : Tensor();
  // W_O^h transposed, [H, d, hidden]: f^h(x_j) = Σ_k v^h_j[k]·(row k of it), a sum of rows.
  std::vector<double> wt(static_cast<std::size_t>(heads * d * hidden));
  for (int64_t r = 0; r < hidden; ++r)
    for (int64_t c = 0; c < heads * d; ++c)
      wt[static_cast<std::size_t>(c * hidden + r)] = W.data<double>()[r * heads * d + c];
  const int64_t k = heads + 1;
  WrittenValues out{.norms = Tensor({1, heads, m}, DType::f64),
                    .gram = Tensor({1, m, k, k}, DType::f64)};
  parallel_for(m, default_num_threads(), [&](int64_t j, int) {
    std::vector<double> e(static_cast<std::size_t>(k * hidden), 0.0);  // the H + 1 vectors of j
    for (int64_t h = 0; h < heads; ++h) {
      double* f = e.data() + h * hidden;
      for (int64_t c = 0; c < d; ++c) {
        const double x = V.data<double>()[(h * m + j) * d + c];
        const double* row = wt.data() + (h * d + c) * hidden;
        for (int64_t r = 0; r < hidden; ++r) f[r] += x * row[r];
      }
    }
    for (int64_t h = 0; h < heads; ++h) {  // ‖f^h(x_j)‖, before any norm's centring
      const double* f = e.data() + h * hidden;
      out.norms.data<double>()[h * m + j] = std::sqrt(std::inner_product(f, f + hidden, f, 0.0));
    }
    std::copy_n(X.data<double>() + j * hidden, hidden, e.data() + heads * hidden);
    if (G.defined())  // LayerNorm's linear part at a fixed scale: γ ⊙ (y − mean y), times 1/σ
      for (int64_t a = 0; a < k; ++a) {
        double* y = e.data() + a * hidden;
        double mean = 0;
        for (int64_t r = 0; r < hidden; ++r) mean += y[r];
        mean /= static_cast<double>(hidden);
        for (int64_t r = 0; r < hidden; ++r) y[r] = (y[r] - mean) * G.data<double>()[r];
      }
    double* g = out.gram.data<double>() + j * k * k;
    for (int64_t a = 0; a < k; ++a)
      for (int64_t b = a; b < k; ++b) {
        double s = 0;
        for (int64_t r = 0; r < hidden; ++r)
          s += e[static_cast<std::size_t>(a * hidden + r)] *
               e[static_cast<std::size_t>(b * hidden + r)];
        g[a * k + b] = g[b * k + a] = s;
      }
  });
  return out;
}

void add_values(const CausalLM& model, const std::vector<int32_t>& ids, Run& run) {
  Block& block = run.blocks.front();
  const std::shared_ptr<const ResidualModel> r = model.residual();
  const auto n = static_cast<int64_t>(ids.size());
  for (std::size_t l = 0; l < block.layers.size(); ++l)
    block.output_matrix.push_back(r->output_matrix(static_cast<int64_t>(l)));
  if (n > kMixingMaxTokens) {  // the norms alone, through each head's d × d Gram
    for (std::size_t l = 0; l < block.layers.size(); ++l)
      block.ov_norms.push_back(ov_norms(block.output_matrix[l], block.layers[l].v));
    return;
  }
  // The stream, rebuilt layer by layer with each head's output replaced by the captured one: the
  // captured run's stream, bit for bit (the same operations on the same numbers).
  Tensor h = r->embed(ids);
  run.embeddings = h.clone().reshape({1, n, r->hidden()});
  run.hidden.clear();
  const LayerHooks hooks{.heads = [&](int64_t l, Tensor& o) {
    const Tensor kept = block.layers[static_cast<std::size_t>(l)].head_out.to(DType::f32);
    std::copy_n(kept.data<float>(), kept.numel(), o.data<float>());
  }};
  for (int64_t l = 0; l < r->layers(); ++l) {
    const Tensor& in = l == 0 ? run.embeddings : run.hidden.back();
    WrittenValues w = written_values(block.output_matrix[static_cast<std::size_t>(l)],
                                     block.layers[static_cast<std::size_t>(l)].v, in, Tensor());
    block.ov_norms.push_back(std::move(w.norms));
    block.mixing_gram.push_back(std::move(w.gram));
    r->layer(l, h, hooks);
    run.hidden.push_back(h.clone().reshape({1, n, r->hidden()}));
  }
}

void add_values(const SentenceModel& model, Run& run) {
  Block& block = run.blocks.front();
  const BertWeights& w = model.weights();
  for (std::size_t l = 0; l < block.layers.size(); ++l) {
    const BertLayer& layer = w.layers[l];
    const Tensor& v = block.layers[l].v;
    block.output_matrix.push_back(layer.attention_out.weight);
    block.mixing_gain.push_back(layer.attention_norm.weight);
    if (run.size() > kMixingMaxTokens) {
      block.ov_norms.push_back(ov_norms(layer.attention_out.weight, v));
      continue;
    }
    const Tensor& in = l == 0 ? run.embeddings : run.hidden[l - 1];
    WrittenValues w =
        written_values(layer.attention_out.weight, v, in, layer.attention_norm.weight);
    block.ov_norms.push_back(std::move(w.norms));
    block.mixing_gram.push_back(std::move(w.gram));
  }
}

void add_values(Seq2Seq& model, Run& run) {
  if (model.config().architecture != Seq2SeqArchitecture::transformer) return;
  std::vector<nn::Parameter*> parameters;
  model.collect(parameters);
  const auto w_o = [&](const std::string& name) {
    for (const nn::Parameter* p : parameters)
      if (p->name == name) return p->value;
    return Tensor();  // identity_v: no W_O, the values go into the stream as they are
  };
  const int64_t d = model.config().d_model;
  Tensor eye({d, d}, DType::f64);
  for (int64_t i = 0; i < d; ++i) eye.data<double>()[i * d + i] = 1.0;
  // The blocks as capture(Seq2Seq) orders them: cross-, encoder self-, decoder self-attention.
  const std::vector<std::pair<std::string, std::string>> names = {
      {"decoder.", ".cross_attention.o.weight"},
      {"encoder.", ".attention.o.weight"},
      {"decoder.", ".self_attention.o.weight"}};
  for (std::size_t b = 0; b < names.size() && b < run.blocks.size(); ++b) {
    Block& block = run.blocks[b];
    for (std::size_t l = 0; l < block.layers.size(); ++l) {
      const Tensor w = w_o(names[b].first + std::to_string(l) + names[b].second);
      block.output_matrix.push_back(w.defined() ? w : eye);
      // Grouped-query attention keeps one v a kv head: each query head reads its group's.
      const Tensor kv = block.layers[l].v.to(DType::f64).contiguous();
      const int64_t heads = model.config().heads, group = heads / kv.dim(1), m = kv.dim(2),
                    dv = kv.dim(3);
      Tensor v({1, heads, m, dv}, DType::f64);
      for (int64_t h = 0; h < heads; ++h)
        std::copy_n(kv.data<double>() + (h / group) * m * dv, m * dv,
                    v.data<double>() + h * m * dv);
      block.ov_norms.push_back(ov_norms(block.output_matrix.back(), v));
    }
  }
}

}  // namespace qkv::explain
