// The GGUF decoder's weights read, and its forward pass (models/llama/llama.h says what it
// computes; config.cpp reads the config, rope.cpp turns q and k).
#include "models/llama/llama.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "qkv/memory.h"
#include "qkv/threads.h"

namespace qkv {
namespace {

// parallel_for over row blocks of about 16k floats each (a few µs of work: enough to be worth a
// thread, few enough that two threads share the rows evenly).
void for_row_blocks(int64_t rows, int64_t width, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t per = std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, width));
  const int64_t blocks = (rows + per - 1) / per;
  parallel_for(blocks, resolve_num_threads(0),
               [&](int64_t b, int) { fn(b * per, std::min(rows, (b + 1) * per)); });
}

// x ← x / √(mean(x²) + ε) · w, over rows of x [n, d] (contiguous float32).
void rms_norm(Tensor& x, const Tensor& w, double eps) {
  const int64_t d = x.dim(-1), n = x.numel() / d;
  const float* g = w.data<float>();
  for_row_blocks(n, d, [&](int64_t i0, int64_t i1) {
    for (float* p = x.data<float>() + i0 * d; i0 < i1; ++i0, p += d) {
      double squares = 0;
      for (int64_t j = 0; j < d; ++j) squares += double{p[j]} * p[j];
      const auto inv = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(d) + eps));
      for (int64_t j = 0; j < d; ++j) p[j] = p[j] * inv * g[j];
    }
  });
}

// h += x, both [n, d] contiguous.
void add_into(Tensor& h, const Tensor& x) {
  const int64_t d = h.dim(-1);
  float* hp = h.data<float>();
  const float* xp = x.data<float>();
  for_row_blocks(h.numel() / d, d, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0 * d; i < i1 * d; ++i) hp[i] += xp[i];
  });
}

// gate ← SiLU(gate) ⊙ up = gate·σ(gate)·up, both [n, ffn] contiguous (Shazeer 2020).
void swiglu(Tensor& gate, const Tensor& up) {
  const int64_t d = gate.dim(-1);
  float* g = gate.data<float>();
  const float* u = up.data<float>();
  for_row_blocks(gate.numel() / d, d, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0 * d; i < i1 * d; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  });
}

// [B·n, heads·d] (B sequences of n rows) → [B, heads, n, d], contiguous.
Tensor split_heads(const Tensor& x, int64_t heads, int64_t batch = 1) {
  const int64_t n = x.numel() / x.dim(-1) / batch, d = x.dim(-1) / heads;
  Tensor out({batch, heads, n, d}, DType::f32);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < n; ++i)
        std::copy_n(x.data<float>() + ((b * n + i) * heads + h) * d, d,
                    out.data<float>() + ((b * heads + h) * n + i) * d);
  return out;
}

// Writes add [1, heads, n, d] at positions length … length + n − 1 of cache [1, heads, capacity,
// d], doubling the capacity (at least to length + n, and to `reserve` at first) when it is full.
void append(Tensor& cache, int64_t length, const Tensor& add, int64_t reserve) {
  const int64_t heads = add.dim(1), n = add.dim(2), d = add.dim(3);
  if (!cache.defined() || cache.dim(2) < length + n) {
    const int64_t capacity = std::max<int64_t>(
        length + n, cache.defined() ? 2 * cache.dim(2) : reserve);
    Tensor grown({1, heads, capacity, d}, DType::f32);
    for (int64_t h = 0; h < heads && length > 0; ++h)
      std::copy_n(cache.data<float>() + h * cache.dim(2) * d, length * d,
                  grown.data<float>() + h * capacity * d);
    cache = std::move(grown);
  }
  const int64_t capacity = cache.dim(2);
  for (int64_t h = 0; h < heads; ++h)
    std::copy_n(add.data<float>() + h * n * d, n * d,
                cache.data<float>() + (h * capacity + length) * d);
}

}  // namespace

LlamaWeights read_llama_weights(const GgufFile& f, const LlamaConfig& c, WeightFormat format) {
  LlamaWeights w;
  // The embedding is read a row at a time, unless it is the output matrix too.
  w.embedding = read_llama_matrix(f, "token_embd", c.vocab, c.hidden, false, format, c.tied_output);
  if (c.rope_factors) {
    const Tensor factors = read_llama_tensor(f, "rope_freqs.weight", {c.rope_dims / 2});
    for (int64_t i = 0; i < factors.numel(); ++i) {
      const double x = factors.data<float>()[i];
      if (!(x > 0))
        throw Error(f.name() + ": tensor \"rope_freqs.weight\" holds " + std::to_string(x) +
                        " at " + std::to_string(i) + "; expected positive factors",
                    Error::Kind::runtime);
      w.rope_factors.push_back(x);
    }
  }
  const int64_t q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim;
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    auto matrix = [&](const std::string& name, int64_t out, int64_t in, bool bias) {
      return read_llama_matrix(f, p + name, out, in, bias, format);
    };
    LlamaLayer layer{.attn_norm = read_llama_tensor(f, p + "attn_norm.weight", {c.hidden}),
                     .ffn_norm = read_llama_tensor(f, p + "ffn_norm.weight", {c.hidden}),
                     .q = matrix("attn_q", q, c.hidden, c.qkv_bias),
                     .k = matrix("attn_k", kv, c.hidden, c.qkv_bias),
                     .v = matrix("attn_v", kv, c.hidden, c.qkv_bias),
                     .o = matrix("attn_output", c.hidden, q, false),
                     .gate = matrix("ffn_gate", c.ffn, c.hidden, false),
                     .up = matrix("ffn_up", c.ffn, c.hidden, false),
                     .down = matrix("ffn_down", c.hidden, c.ffn, false)};
    if (c.qk_norm) {
      layer.q_norm = read_llama_tensor(f, p + "attn_q_norm.weight", {c.head_dim});
      layer.k_norm = read_llama_tensor(f, p + "attn_k_norm.weight", {c.head_dim});
    }
    if (c.post_norms) {
      layer.post_attn_norm = read_llama_tensor(f, p + "post_attention_norm.weight", {c.hidden});
      layer.post_ffn_norm = read_llama_tensor(f, p + "post_ffw_norm.weight", {c.hidden});
    }
    w.layers.push_back(std::move(layer));
  }
  w.output_norm = read_llama_tensor(f, "output_norm.weight", {c.hidden});
  w.output = c.tied_output ? w.embedding
                           : read_llama_matrix(f, "output", c.vocab, c.hidden, false, format);
  return w;
}

namespace {

// The keep-mask of layer l's queries at positions cache.length … + n − 1 over keys 0 … S − 1: the
// hooks' (bool [1 or B, H, n, S]) and, on a sliding layer, the window's (a key at most
// window − 1 positions before the query), by AND; undefined where neither hides a key.
Tensor layer_mask(const LlamaConfig& c, int64_t l, int64_t start, int64_t n, int64_t keys,
                  const LayerHooks& hooks) {
  Tensor mask = hooks.mask ? hooks.mask(l) : Tensor();
  const bool slides = !c.sliding.empty() && c.sliding[static_cast<std::size_t>(l)] &&
                      start + n - 1 >= c.sliding_window;  // else no key falls outside
  if (!slides) return mask;
  Tensor window = mask.defined() ? mask.contiguous().clone() : Tensor({1, 1, n, keys}, DType::b8);
  if (!mask.defined()) std::fill_n(window.data<bool>(), window.numel(), true);
  bool* p = window.data<bool>();
  const int64_t rows = window.numel() / (n * keys);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < keys; ++j)
        if (start + i - j >= c.sliding_window) p[(r * n + i) * keys + j] = false;
  return window;
}

// gate ← GELU(gate) ⊙ up, GELU in its tanh form (Hendrycks & Gimpel 2016), as Gemma's
// gelu_pytorch_tanh and ggml_gelu compute it.
void geglu(Tensor& gate, const Tensor& up) {
  const int64_t d = gate.dim(-1);
  float* g = gate.data<float>();
  const float* u = up.data<float>();
  const double c = std::sqrt(2.0 / M_PI);
  for_row_blocks(gate.numel() / d, d, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0 * d; i < i1 * d; ++i) {
      const double x = g[i];
      g[i] = static_cast<float>(0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x))) * u[i]);
    }
  });
}

// The feed-forward half of a layer: h += W_down · (act(x·W_gateᵀ) ⊙ x·W_upᵀ), x = RMSNorm(h).
void feed_forward(const LlamaLayer& layer, const LlamaConfig& c, Tensor& h,
                  cpu::QuantProduct product) {
  Tensor x = h.clone();
  rms_norm(x, layer.ffn_norm, c.eps);
  std::vector<Tensor> gate_up = llama_matmuls(x, {&layer.gate, &layer.up}, product);
  Tensor& gate = gate_up[0];
  const Tensor& up = gate_up[1];
  if (c.gelu)
    geglu(gate, up);
  else
    swiglu(gate, up);
  Tensor f = llama_matmul(gate, layer.down, product);
  if (c.post_norms) rms_norm(f, layer.post_ffn_norm, c.eps);
  add_into(h, f);
}

}  // namespace

void llama_layer(const LlamaWeights& w, const LlamaConfig& c, int64_t l, Tensor& h, KvCache& cache,
                 std::vector<AttentionCapture>* capture, const LayerHooks& hooks,
                 bool capture_rows, cpu::QuantProduct product) {
  // h [n, hidden] with the cache, or [B, n, hidden]: B sequences side by side, no cache.
  const int64_t batch = h.rank() == 3 ? h.dim(0) : 1, n = h.dim(-2);
  if (batch > 1 && (cache.length > 0 || capture != nullptr))
    throw Error("llama: a batch of sequences runs without a cache or a capture");
  const LlamaLayer& layer = w.layers[static_cast<std::size_t>(l)];
  const auto li = static_cast<std::size_t>(l);
  if (cache.k.size() < static_cast<std::size_t>(c.layers))
    cache.k.resize(static_cast<std::size_t>(c.layers)), cache.v.resize(cache.k.size());
  Tensor x = h.clone();
  rms_norm(x, layer.attn_norm, c.eps);
  const std::vector<Tensor> qkv = llama_matmuls(x, {&layer.q, &layer.k, &layer.v}, product);
  Tensor q = split_heads(qkv[0], c.heads, batch);
  Tensor k = split_heads(qkv[1], c.kv_heads, batch);
  Tensor v = split_heads(qkv[2], c.kv_heads, batch);
  if (c.qk_norm) {  // each head's q and k over its own dimensions
    rms_norm(q, layer.q_norm, c.eps);
    rms_norm(k, layer.k_norm, c.eps);
  }
  const RopeTable rotations = rope_table(c, w, l, cache.length, n);
  for (Tensor* t : {&q, &k}) {  // RoPE on each sequence
    Tensor flat = t->reshape({1, batch * t->dim(1), n, c.head_dim});
    rope(flat, rotations);
  }
  Tensor keys = k, values = v;
  if (batch == 1) {
    append(cache.k[li], cache.length, k, cache.reserve);
    append(cache.v[li], cache.length, v, cache.reserve);
    keys = cache.k[li].narrow(2, 0, cache.length + n);
    values = cache.v[li].narrow(2, 0, cache.length + n);
  }
  const Tensor mask = layer_mask(c, l, cache.length, n, keys.dim(2), hooks);
  const bool keep = capture != nullptr && !capture_rows, rows = capture != nullptr && capture_rows;
  AttentionResult r = attention(q, keys, values,
                                {.scale = c.attention_scale,
                                 .causal = Causal::bottom_right,
                                 .mask = mask,
                                 .need_weights = keep,
                                 .need_scores = keep,
                                 .keep_for_backward = rows,
                                 .path = keep   ? Path::reference
                                         : rows ? Path::fused
                                                : Path::automatic});
  if (hooks.heads) {
    r.out = r.out.contiguous().to(DType::f32);
    hooks.heads(l, r.out);
  }
  if (capture != nullptr)
    capture->push_back({.score = Score::scaled_dot,
                        .scale = c.attention_scale,
                        .causal = Causal::bottom_right,
                        .q = q,
                        .k = keys.contiguous(),
                        .v = values.contiguous(),
                        .mask = mask,
                        .scores = r.scores,
                        .logits = r.logits,
                        .weights = r.weights,
                        .head_out = r.out,
                        .saved_max = r.saved_max,
                        .saved_sum = r.saved_sum});
  Shape merged = h.shape();
  merged.back() = c.heads * c.head_dim;  // Qwen 3's heads are wider than hidden / heads
  Tensor a = llama_matmul(nn::merge_heads(r.out).reshape(merged), layer.o, product);
  if (c.post_norms) rms_norm(a, layer.post_attn_norm, c.eps);
  add_into(h, a);
  if (hooks.attended) hooks.attended(l, h);
  feed_forward(layer, c, h, product);
  if (hooks.layer_out) hooks.layer_out(l, h);
}

Tensor llama_embed(const LlamaWeights& w, const LlamaConfig& c, const std::vector<int32_t>& ids,
                   int64_t start) {
  const auto n = static_cast<int64_t>(ids.size());
  for (const int32_t id : ids)
    if (id < 0 || id >= c.vocab)
      throw Error("llama: token id " + std::to_string(id) + "; expected 0 to " +
                  std::to_string(c.vocab - 1));
  if (start + n > c.context)
    throw Error("llama: " + std::to_string(start + n) + " positions; the model reads at most " +
                std::to_string(c.context));
  Tensor h({n, c.hidden}, DType::f32);
  for (int64_t i = 0; i < n; ++i)
    llama_matrix_row(w.embedding, ids[static_cast<std::size_t>(i)], h.data<float>() + i * c.hidden);
  if (c.embedding_scale != 1) {
    const auto s = static_cast<float>(c.embedding_scale);
    for (int64_t i = 0; i < h.numel(); ++i) h.data<float>()[i] *= s;
  }
  return h;
}

void llama_rms_norm(Tensor& x, const Tensor& gain, double eps) { rms_norm(x, gain, eps); }

Tensor llama_unembed(const LlamaWeights& w, const LlamaConfig& c, const Tensor& normed,
                     cpu::QuantProduct product) {
  Tensor logits = llama_matmul(normed, w.output, product);
  if (c.final_softcap > 0) {
    const double cap = c.final_softcap;
    float* p = logits.data<float>();
    for (int64_t i = 0; i < logits.numel(); ++i)
      p[i] = static_cast<float>(cap * std::tanh(p[i] / cap));
  }
  return logits;
}

Tensor llama_forward(const LlamaWeights& w, const LlamaConfig& c, const std::vector<int32_t>& ids,
                     KvCache& cache, const LlamaOptions& options) {
  const auto n = static_cast<int64_t>(ids.size());
  Tensor h = llama_embed(w, c, ids, cache.length);
  if (options.capture != nullptr) options.capture->clear();
  for (int64_t l = 0; l < c.layers; ++l)
    llama_layer(w, c, l, h, cache, options.capture, {}, options.capture_rows, options.product);
  cache.length += n;
  if (options.last_logits_only && n > 1) h = h.narrow(0, n - 1, 1).clone();
  rms_norm(h, w.output_norm, c.eps);
  return llama_unembed(w, c, h, options.product);
}

}  // namespace qkv
