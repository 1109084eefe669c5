// RNNsearch (Bahdanau, Cho and Bengio 2014, §3 and Appendix A): forward, backward through time,
// greedy decoding and capture. The attention at every decoder step is nn::AdditiveAttention —
// query s_{i−1}, keys and values the annotations h_j — which equals qkv::attention with the
// additive score (tested) but projects the keys once per source; the capture runs qkv::attention
// itself, so that the report shows the library's own numbers.
#include "rnnsearch.h"

#include <algorithm>
#include <cmath>

#include "core/dispatch.h"

namespace qkv {

namespace {

// Row-wise concatenation: parts [R, w_k] → [R, Σ w_k].
Tensor concat_columns(const std::vector<Tensor>& parts) {
  const int64_t rows = parts.front().dim(0);
  int64_t width = 0;
  for (const Tensor& p : parts) width += p.dim(1);
  Tensor out({rows, width}, parts.front().dtype());
  dispatch_float(out.dtype(), [&]<class T>(T) {
    int64_t at = 0;
    for (const Tensor& p : parts) {
      const Tensor c = p.contiguous();
      const int64_t w = c.dim(1);
      for (int64_t r = 0; r < rows; ++r)
        std::copy_n(c.data<T>() + r * w, w, out.data<T>() + r * width + at);
      at += w;
    }
  });
  return out;
}

// x[:, t, :] of a [B, T, D] tensor as a contiguous [B, D].
Tensor step_of(const Tensor& x, int64_t t) {
  return x.narrow(1, t, 1).contiguous().reshape({x.dim(0), x.dim(2)});
}

// Columns [first, first + width) of a [R, W] tensor, contiguous.
Tensor columns(const Tensor& x, int64_t first, int64_t width) {
  return x.narrow(1, first, width).contiguous();
}

// dst[:, t, :] = src for dst [B, T, D], src [B, D].
void put_step(Tensor& dst, int64_t t, const Tensor& src) {
  const int64_t b = dst.dim(0), steps = dst.dim(1), d = dst.dim(2);
  dispatch_float(dst.dtype(), [&]<class T>(T) {
    const Tensor s = src.contiguous();
    for (int64_t i = 0; i < b; ++i)
      std::copy_n(s.data<T>() + i * d, d, dst.data<T>() + (i * steps + t) * d);
  });
}

void add_into(Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel())
    throw Error("rnnsearch: a gradient of shape " + shape_str(b.shape()) + " added to " +
                shape_str(a.shape()));
  dispatch_float(a.dtype(), [&]<class T>(T) {
    const Tensor c = b.contiguous();
    for (int64_t i = 0; i < a.numel(); ++i) a.data<T>()[i] += c.data<T>()[i];
  });
}

Tensor tanh_of(const Tensor& x) {
  Tensor y = x.clone();
  dispatch_float(y.dtype(), [&]<class T>(T) {
    for (int64_t i = 0; i < y.numel(); ++i) y.data<T>()[i] = std::tanh(y.data<T>()[i]);
  });
  return y;
}

// ∂/∂x of y = tanh(x), given y: dy ⊙ (1 − y²).
Tensor tanh_backward(const Tensor& dy, const Tensor& y) {
  Tensor dx = dy.clone();
  dispatch_float(dx.dtype(), [&]<class T>(T) {
    for (int64_t i = 0; i < dx.numel(); ++i) {
      const T v = y.data<T>()[i];
      dx.data<T>()[i] *= 1 - v * v;
    }
  });
  return dx;
}

std::vector<std::vector<int32_t>> column_of(const std::vector<int32_t>& ids) {
  std::vector<std::vector<int32_t>> out;
  for (const int32_t id : ids) out.push_back({id});
  return out;
}

}  // namespace

RnnSearch::RnnSearch(const Seq2SeqConfig& config, nn::Rng& rng, DType dtype)
    : Seq2Seq(config),
      dtype_(dtype),
      d_(config.d_model),
      source_embedding_("source_embedding", vocab_.size(), d_, rng, dtype),
      target_embedding_("target_embedding", vocab_.size(), d_, rng, dtype),
      encoder_("encoder", d_, d_ / 2, rng, dtype),
      init_("init", d_ / 2, d_, true, rng, dtype),
      attention_("attention", d_, d_, d_, rng, dtype),
      decoder_("decoder", 2 * d_, d_, rng, dtype),
      readout_("readout", 3 * d_, d_, true, rng, dtype),
      output_("output", d_, vocab_.size(), true, rng, dtype) {}

void RnnSearch::collect(std::vector<nn::Parameter*>& out) {
  source_embedding_.collect(out);
  target_embedding_.collect(out);
  encoder_.collect(out);
  init_.collect(out);
  attention_.collect(out);
  decoder_.collect(out);
  readout_.collect(out);
  output_.collect(out);
}

AttentionOptions RnnSearch::attention_options(const std::vector<int64_t>& source_lengths) const {
  AttentionOptions o;
  o.score = Score::additive;  // scale 1: e_ij = v_aᵀ tanh(W_a s_{i−1} + U_a h_j)
  o.key_lengths = source_lengths;
  o.params = {
      .w_q = attention_.w_a.value, .w_k = attention_.u_a.weight.value, .v = attention_.v_a.value};
  return o;
}

RnnSearch::Encoded RnnSearch::encode(const Batch& batch) {
  if (batch.source_length > config_.max_source)
    throw Error("a source of " + std::to_string(batch.source_length) +
                " characters is longer than the model's limit of " +
                std::to_string(config_.max_source));
  const Tensor x = source_embedding_.forward(batch.source);
  Encoded e;
  e.annotations = encoder_.forward(x, {}, {}, batch.source_lengths);
  // ←h_1: the reverse GRU's state after reading the whole source back to its first character.
  const Tensor first_backward = step_of(e.annotations, 0).narrow(1, d_ / 2, d_ / 2).contiguous();
  e.state = tanh_of(init_.forward(first_backward));
  return e;
}

Tensor RnnSearch::forward(const Batch& batch, bool /*training: no dropout*/, nn::Rng& /*rng*/) {
  if (batch.size == 0) throw Error("rnnsearch forward: the batch is empty");
  if (batch.target_length > config_.max_target + 1)
    throw Error("a target of " + std::to_string(batch.target_length - 1) +
                " characters is longer than the model's limit of " +
                std::to_string(config_.max_target));
  const int64_t b = batch.size, steps = batch.target_length;
  const Encoded e = encode(batch);
  annotations_ = e.annotations;
  state0_ = e.state;
  source_lengths_ = batch.source_lengths;
  attention_.set_memory(annotations_, source_lengths_);
  const Tensor embedded = target_embedding_.forward(batch.target_in);  // [B, T, d]
  Tensor readin({b, steps, 3 * d_}, dtype_);
  decoder_.clear();
  query_.clear();
  Tensor s = state0_;
  for (int64_t t = 0; t < steps; ++t) {
    query_.push_back(s);
    const Tensor c = attention_.forward(s);
    const Tensor y = step_of(embedded, t);
    s = decoder_.forward(concat_columns({y, c}), s);
    put_step(readin, t, concat_columns({s, y, c}));
  }
  readout_tanh_ = tanh_of(readout_.forward(readin));
  return output_.forward(readout_tanh_);
}

// Back through the readout, then the decoder steps in reverse (each step's GRU, then its
// attention, whose ∂query joins ∂s_{i−1} and whose ∂keys + ∂values join ∂h), then s_0 = tanh(W_s
// ←h_1) into ∂h_1, then the encoder and both embeddings.
void RnnSearch::backward(const Tensor& dlogits) {
  if (query_.empty()) throw Error("RnnSearch::backward called before forward");
  const int64_t steps = static_cast<int64_t>(query_.size());
  const int64_t b = annotations_.dim(0), s_len = annotations_.dim(1);
  const Tensor dreadin = readout_.backward(tanh_backward(output_.backward(dlogits), readout_tanh_));
  Tensor dembedded({b, steps, d_}, dtype_);
  Tensor ds({b, d_}, dtype_);
  for (int64_t t = steps - 1; t >= 0; --t) {
    const Tensor dr = step_of(dreadin, t);  // [∂s_t; ∂y; ∂c] from the readout
    add_into(ds, columns(dr, 0, d_));
    const nn::GRUCell::Grads g = decoder_.backward(ds);
    Tensor dy = columns(g.dx, 0, d_), dc = columns(g.dx, d_, d_);
    add_into(dy, columns(dr, d_, d_));
    add_into(dc, columns(dr, 2 * d_, d_));
    put_step(dembedded, t, dy);
    ds = g.dh;
    add_into(ds, attention_.backward(dc));
  }
  Tensor dannotations = attention_.memory_backward();  // keys (through U_a) and values
  const Tensor dfirst = init_.backward(tanh_backward(ds, state0_));  // ∂←h_1 [B, d/2]
  dispatch_float(dtype_, [&]<class T>(T) {
    for (int64_t i = 0; i < b; ++i)
      for (int64_t k = 0; k < d_ / 2; ++k)
        dannotations.data<T>()[i * s_len * d_ + d_ / 2 + k] += dfirst.data<T>()[i * (d_ / 2) + k];
  });
  source_embedding_.backward(encoder_.backward(dannotations).dx);
  target_embedding_.backward(dembedded);
  query_.clear();
}

void RnnSearch::decode_batch(Batch batch, int alignment_layer, Decoded& result) {
  const int64_t max_steps = config_.max_target + 1;
  const int64_t b = batch.size;
  const Encoded e = encode(batch);
  attention_.set_memory(e.annotations, batch.source_lengths);
  const bool keep = alignment_layer >= 0;
  std::vector<int32_t> previous(static_cast<std::size_t>(b), Vocabulary::kBos);
  std::vector<std::vector<int32_t>> generated(static_cast<std::size_t>(b));
  std::vector<std::vector<Tensor>> weights(static_cast<std::size_t>(b));  // [S] a step
  std::vector<bool> done(static_cast<std::size_t>(b), false);
  Tensor s = e.state;
  for (int64_t step = 0; step < max_steps; ++step) {
    Tensor alpha;
    const Tensor c = attention_.forward(s, &alpha);
    const Tensor y = target_embedding_.forward(column_of(previous)).reshape({b, d_});
    s = decoder_.forward(concat_columns({y, c}), s);
    const Tensor logits =
        output_.forward(tanh_of(readout_.forward(concat_columns({s, y, c})))).to(DType::f64);
    const int64_t v = logits.dim(1);
    bool all_done = true;
    for (int64_t i = 0; i < b; ++i) {
      const auto at = static_cast<std::size_t>(i);
      if (done[at]) continue;
      const double* row = logits.data<double>() + i * v;
      const auto id = static_cast<int32_t>(std::max_element(row, row + v) - row);
      generated[at].push_back(id);
      previous[at] = id;
      if (keep) weights[at].push_back(alpha.narrow(0, i, 1).to(DType::f64));
      done[at] = id == Vocabulary::kEos;
      all_done = all_done && done[at];
    }
    if (all_done) break;
  }
  decoder_.clear();
  attention_.set_memory(e.annotations);  // forgets the steps
  for (int64_t i = 0; i < b; ++i) {
    const auto at = static_cast<std::size_t>(i);
    if (keep) {
      const int64_t steps = static_cast<int64_t>(weights[at].size());
      const int64_t len = batch.source_lengths[at];
      Tensor a({1, steps, len}, DType::f64);
      for (int64_t t = 0; t < steps; ++t)
        for (int64_t j = 0; j < len; ++j)
          a.at<double>(0, t, j) = weights[at][static_cast<std::size_t>(t)].data<double>()[j];
      result.alignment.push_back(a);
    }
    result.outputs.push_back(vocab_.decode(generated[at]));
    result.ids.push_back(std::move(generated[at]));
  }
}

// A teacher-forced pass over BOS + the output gives every step's query s_{i−1}; one attention
// call over them all (the rows are independent) keeps its scores, logits and weights.
Seq2SeqCapture RnnSearch::capture(const std::string& source) {
  Seq2SeqCapture c;
  const std::vector<int32_t> target_in = begin_capture(source, c);
  c.architecture = Seq2SeqArchitecture::rnnsearch;
  c.layers = 1;
  c.heads = 1;
  c.kv_heads = 1;
  c.head_dim = d_;
  c.identity_v = true;  // the values are the annotations themselves: no W_V

  Batch batch = make_batch(vocab_, {{source, ""}});
  batch.target_in = {target_in};
  batch.target_length = static_cast<int64_t>(target_in.size());
  batch.target_lengths = {batch.target_length};
  nn::Rng rng(0);
  forward(batch, false, rng);
  const int64_t steps = batch.target_length, s_len = batch.source_length;
  Tensor queries({1, 1, steps, d_}, dtype_);
  dispatch_float(dtype_, [&]<class T>(T) {
    for (int64_t t = 0; t < steps; ++t)
      std::copy_n(query_[static_cast<std::size_t>(t)].data<T>(), d_, queries.data<T>() + t * d_);
  });
  query_.clear();
  decoder_.clear();
  const Tensor keys = annotations_.reshape({1, 1, s_len, d_});
  AttentionOptions options = attention_options(batch.source_lengths);
  options.need_weights = options.need_scores = true;
  options.path = Path::reference;
  const AttentionResult r = attention(queries, keys, keys, options);
  AttentionCapture a;
  a.score = Score::additive;
  a.scale = 1;
  a.q = queries;
  a.k = a.v = keys.clone();
  a.scores = r.scores;
  a.logits = r.logits;
  a.weights = r.weights;
  a.head_out = r.out;
  c.cross.push_back(std::move(a));
  return c;
}

}  // namespace qkv
