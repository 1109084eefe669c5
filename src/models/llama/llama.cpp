#include "models/llama/llama.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <set>
#include <string>

#include "nn/finite.h"
#include "qkv/memory.h"
#include "qkv/threads.h"

namespace qkv {
namespace {

[[noreturn]] void bad(const GgufFile& f, const std::string& what) {
  throw Error(f.name() + ": " + what, Error::Kind::runtime);
}

std::string is(const GgufFile& f, const std::string& key) {
  return "metadata \"" + key + "\" is " + gguf_value_str(f.meta(key));
}

// The largest size believed from metadata: far above any model a CPU runs (Llama 3 405B has 126
// layers, 16,384 dimensions, 128k positions, a 128k vocabulary), and small enough that no product
// of two sizes overflows.
constexpr int64_t kMaxSize = int64_t{1} << 24;

// An integer entry from 1 to kMaxSize; an unsigned one beyond INT64_MAX is only too large.
int64_t meta_size(const GgufFile& f, const std::string& key) {
  const nlohmann::json& v = f.meta(key);
  if (!v.is_number_integer()) bad(f, is(f, key) + "; expected a positive integer");
  if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t{kMaxSize} : v.get<int64_t>() > kMaxSize)
    bad(f, is(f, key) + ", too large; expected at most " + std::to_string(kMaxSize));
  if (v.get<int64_t>() <= 0) bad(f, is(f, key) + "; expected a positive integer");
  return v.get<int64_t>();
}

double meta_number(const GgufFile& f, const std::string& key, double fallback) {
  if (!f.has(key)) return fallback;
  const nlohmann::json& v = f.meta(key);
  if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
    bad(f, is(f, key) + "; expected a positive number");
  return v.get<double>();
}

// How many blocks the tensors hold: one more than the largest N of a tensor named blk.N.*.
int64_t blocks_in_tensors(const GgufFile& f) {
  int64_t blocks = 0;
  for (const GgufTensorInfo& t : f.tensors()) {
    if (t.name.rfind("blk.", 0) != 0) continue;
    int64_t n = -1;
    const char* begin = t.name.data() + 4;
    const auto [end, ec] = std::from_chars(begin, t.name.data() + t.name.size(), n);
    if (ec != std::errc() || end == begin || *end != '.' || n < 0) continue;
    blocks = std::max(blocks, std::min(n, kMaxSize) + 1);
  }
  return blocks;
}

// llama.block_count against the blocks the tensors hold: a count that is too small would run part
// of the model, one that is too large fails at a missing tensor (or, at 2·10⁹, at no size at all).
int64_t block_count(const GgufFile& f) {
  const std::string key = "llama.block_count";
  const nlohmann::json& v = f.meta(key);
  const int64_t blocks = blocks_in_tensors(f);
  const std::string held = blocks == 0 ? "the file's tensors hold no blocks (no blk.N.* tensors)"
                           : blocks == 1
                               ? "the file's tensors hold 1 block (blk.0)"
                               : "the file's tensors hold " + std::to_string(blocks) +
                                     " blocks (blk.0 … blk." + std::to_string(blocks - 1) + ")";
  const bool positive = v.is_number_integer() &&
                        (v.is_number_unsigned() ? v.get<uint64_t>() > 0 : v.get<int64_t>() > 0);
  if (!positive) bad(f, is(f, key) + "; expected a positive integer; " + held);
  const bool more =
      v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(blocks) : v.get<int64_t>() > blocks;
  if (more || v.get<int64_t>() < blocks)
    bad(f, is(f, key) + (more ? ", too large: " : ", too small: ") + held +
               (blocks > 0 ? "; expected " + std::to_string(blocks) : std::string()));
  return blocks;
}

// The rows of a matrix the metadata implies, checked against the file's tensor when it is there
// (a missing one is named when the weights are read), so that a lying size is named by its key.
void expect_rows(const GgufFile& f, const std::string& tensor, int64_t rows,
                 const std::string& because) {
  for (const GgufTensorInfo& t : f.tensors())
    if (t.name == tensor && t.shape.size() == 2 && t.shape[0] != rows)
      bad(f, "tensor \"" + tensor + "\" is " + shape_str(t.shape) + ", but " + because + " makes " +
                 std::to_string(rows) + " rows; the metadata and the tensors disagree");
}

// A size the file may state again (rope.dimension_count, attention.key_length, ...): when present,
// it must be `expected`, which qkv derives from the other sizes.
void expect_same(const GgufFile& f, const std::string& key, int64_t expected,
                 const std::string& what) {
  if (!f.has(key)) return;
  const nlohmann::json& v = f.meta(key);
  const bool equal =
      v.is_number_integer() && (v.is_number_unsigned() ? v.get<uint64_t>() == uint64_t(expected)
                                                       : v.get<int64_t>() == expected);
  if (!equal) bad(f, is(f, key) + "; expected " + what);
}

// The tensor `name` must be in the file, of `shape`: a qkv::Error naming both otherwise.
void expect_tensor(const GgufFile& f, const std::string& name, const Shape& shape) {
  const GgufTensorInfo& info = f.info(name);
  if (info.shape != shape)
    throw Error(f.name() + ": tensor \"" + name + "\" is " + shape_str(info.shape) + "; expected " +
                    shape_str(shape) + " for this config",
                Error::Kind::runtime);
}

// Calls fn(name, shape) for every tensor a model of config c holds, in the order they are read.
void for_each_tensor(const LlamaConfig& c,
                     const std::function<void(const std::string&, const Shape&)>& fn) {
  const int64_t kv = c.kv_heads * c.head_dim;
  fn("token_embd.weight", {c.vocab, c.hidden});
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    fn(p + "attn_norm.weight", {c.hidden});
    fn(p + "ffn_norm.weight", {c.hidden});
    fn(p + "attn_q.weight", {c.hidden, c.hidden});
    fn(p + "attn_k.weight", {kv, c.hidden});
    fn(p + "attn_v.weight", {kv, c.hidden});
    fn(p + "attn_output.weight", {c.hidden, c.hidden});
    fn(p + "ffn_gate.weight", {c.ffn, c.hidden});
    fn(p + "ffn_up.weight", {c.ffn, c.hidden});
    fn(p + "ffn_down.weight", {c.hidden, c.ffn});
  }
  fn("output_norm.weight", {c.hidden});
  if (!c.tied_output) fn("output.weight", {c.vocab, c.hidden});
}

// The tensor, whose shape read_llama_config checked, read and required finite.
Tensor read(const GgufFile& f, const std::string& name, const Shape& shape) {
  expect_tensor(f, name, shape);
  Tensor t = f.tensor(name);
  require_finite_tensor(f.name(), name, t);
  return t;
}

nn::LinearWeights linear(const GgufFile& f, const std::string& name, int64_t out, int64_t in) {
  nn::LinearWeights w{.weight = read(f, name, {out, in})};
  nn::pack(w);
  return w;
}

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
// d], doubling the capacity (at least to length + n) when it is full.
void append(Tensor& cache, int64_t length, const Tensor& add) {
  const int64_t heads = add.dim(1), n = add.dim(2), d = add.dim(3);
  if (!cache.defined() || cache.dim(2) < length + n) {
    const int64_t capacity = std::max<int64_t>(length + n, cache.defined() ? 2 * cache.dim(2) : 0);
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

LlamaConfig read_llama_config(const GgufFile& f) {
  const nlohmann::json& arch = f.meta("general.architecture");
  if (arch != "llama")
    bad(f, "architecture " + gguf_value_str(arch) +
               "; expected \"llama\" (qkv runs Llama-architecture decoders)");
  // What qkv's forward pass does not do is refused, not run wrongly: experts, RoPE scaling, and
  // Llama 3.1's per-frequency RoPE factors.
  if (f.has("llama.expert_count") && f.meta("llama.expert_count") != 0)
    bad(f, is(f, "llama.expert_count") +
               ": a mixture of experts, which qkv does not run; expected a dense Llama model");
  // A factor other than 1 scales whatever the type says (llama.cpp takes a factor without a type
  // as linear scaling): it was run unscaled when the type was absent or "none", and a NaN factor
  // was not seen (issue 26's last sweep).
  const bool scaled =
      (f.has("llama.rope.scaling.type") && f.meta("llama.rope.scaling.type") != "none" &&
       !(f.has("llama.rope.scaling.factor") && f.meta("llama.rope.scaling.factor") == 1)) ||
      (f.has("llama.rope.scaling.factor") && f.meta("llama.rope.scaling.factor") != 1) ||
      (f.has("llama.rope.scale_linear") && f.meta("llama.rope.scale_linear") != 1);
  if (scaled) bad(f, "its RoPE is scaled (llama.rope.scaling.*), which qkv does not apply");
  for (const GgufTensorInfo& t : f.tensors())
    if (t.name == "rope_freqs.weight")
      bad(f,
          "tensor \"rope_freqs.weight\" scales RoPE's frequencies (Llama 3.1), which qkv "
          "does not apply");

  LlamaConfig c;
  c.layers = block_count(f);
  c.hidden = meta_size(f, "llama.embedding_length");
  c.heads = meta_size(f, "llama.attention.head_count");
  c.kv_heads = f.has("llama.attention.head_count_kv")
                   ? meta_size(f, "llama.attention.head_count_kv")
                   : c.heads;
  c.ffn = meta_size(f, "llama.feed_forward_length");
  c.context = meta_size(f, "llama.context_length");
  c.eps = meta_number(f, "llama.attention.layer_norm_rms_epsilon", 1e-5);
  c.rope_base = meta_number(f, "llama.rope.freq_base", 10000);

  const nlohmann::json& tokens = f.meta("tokenizer.ggml.tokens");
  if (!tokens.is_array() || tokens.empty())
    bad(f, is(f, "tokenizer.ggml.tokens") + "; expected the vocabulary, an array of strings");
  c.vocab = static_cast<int64_t>(tokens.size());
  expect_same(f, "llama.vocab_size", c.vocab,
              "the " + std::to_string(c.vocab) + " tokens of tokenizer.ggml.tokens");

  const std::string hidden = "llama.embedding_length " + std::to_string(c.hidden);
  const std::string heads = "llama.attention.head_count " + std::to_string(c.heads);
  if (c.hidden % c.heads != 0)
    bad(f, heads + " does not divide " + hidden + "; expected whole heads");
  if (c.heads % c.kv_heads != 0)
    bad(f, "llama.attention.head_count_kv " + std::to_string(c.kv_heads) + " does not divide " +
               heads + "; expected a whole number of query heads per key/value head");
  c.head_dim = c.hidden / c.heads;
  const std::string head_dim = "the head dimension " + std::to_string(c.head_dim) + " (" + hidden +
                               " / " + std::to_string(c.heads) + " heads)";
  if (c.head_dim % 2 != 0) bad(f, head_dim + " is odd; RoPE rotates pairs of dimensions");
  // Each size against the tensors it shapes.
  for (const GgufTensorInfo& t : f.tensors())
    if (t.name == "token_embd.weight" && t.shape.size() == 2 &&
        (t.shape[1] != c.hidden || t.shape[0] != c.vocab))
      bad(f, "tensor \"token_embd.weight\" is " + shape_str(t.shape) + ", but " + hidden +
                 " and the " + std::to_string(c.vocab) + " tokens of tokenizer.ggml.tokens make " +
                 shape_str({c.vocab, c.hidden}) + "; the metadata and the tensors disagree");
  expect_rows(f, "blk.0.attn_q.weight", c.hidden, hidden);
  expect_rows(f, "blk.0.attn_k.weight", c.kv_heads * c.head_dim,
              "llama.attention.head_count_kv " + std::to_string(c.kv_heads) + " × " + head_dim);
  expect_rows(f, "blk.0.ffn_up.weight", c.ffn,
              "llama.feed_forward_length " + std::to_string(c.ffn));
  // llama.cpp refuses a Llama file whose rotated dimensions are not the whole head; qkv rotates
  // whole heads, so a file that says otherwise would run as another model than it describes.
  expect_same(f, "llama.rope.dimension_count", c.head_dim, head_dim);
  expect_same(f, "llama.attention.key_length", c.head_dim, head_dim);
  expect_same(f, "llama.attention.value_length", c.head_dim, head_dim);

  // Every tensor the config needs, present and of its shape, before any is read: what the
  // weights will take in memory is then known from the config alone (llama_weight_bytes).
  c.tied_output = true;
  for (const GgufTensorInfo& t : f.tensors())
    c.tied_output = c.tied_output && t.name != "output.weight";
  std::set<std::string> read;
  for_each_tensor(c, [&](const std::string& name, const Shape& shape) {
    expect_tensor(f, name, shape);
    read.insert(name);
  });
  // And no tensor besides them: one qkv leaves unread is part of another model than the one run
  // (llama.cpp refuses a file whose tensor count is not what its architecture creates). The
  // biases llama.cpp adds when a Llama file has them (blk.N.attn_q.bias, ffn_up.bias, ...) are
  // said as such: qkv's decoder has none.
  for (const GgufTensorInfo& t : f.tensors()) {
    if (read.contains(t.name)) continue;
    if (t.name.rfind("blk.", 0) == 0 && t.name.ends_with(".bias"))
      bad(f, "tensor \"" + t.name +
                 "\" is a bias, which qkv's Llama decoder does not add; expected a Llama model "
                 "without biases");
    const std::string layers = std::to_string(c.layers) + (c.layers == 1 ? " layer" : " layers");
    const std::string blocks =
        c.layers == 1 ? "blk.0" : "blk.0 … blk." + std::to_string(c.layers - 1);
    bad(f, "it holds a tensor \"" + t.name + "\" that a Llama decoder of " + layers +
               " does not have; expected only the tensors of its layers (token_embd, " + blocks +
               ", output_norm, output)");
  }
  return c;
}

int64_t llama_weight_bytes(const LlamaConfig& c) {
  const auto packed = [](int64_t out, int64_t in) {  // a matrix and its packed copy (nn::pack)
    return static_cast<double>(nn::packed_resident_bytes(out, in));
  };
  const double hidden = static_cast<double>(c.hidden),
               embedding = 4.0 * hidden * static_cast<double>(c.vocab);
  const int64_t kv = c.kv_heads * c.head_dim;
  const double layer = 2 * 4.0 * hidden + 2 * packed(c.hidden, c.hidden) +
                       2 * packed(kv, c.hidden) + 2 * packed(c.ffn, c.hidden) +
                       packed(c.hidden, c.ffn);
  // Tied, the output matrix is the embedding itself: only its packed copy is more.
  const double output = packed(c.vocab, c.hidden) - (c.tied_output ? embedding : 0.0);
  return saturated_bytes(embedding + static_cast<double>(c.layers) * layer + 4.0 * hidden + output);
}

LlamaWeights read_llama_weights(const GgufFile& f, const LlamaConfig& c) {
  LlamaWeights w;
  w.embedding = read(f, "token_embd.weight", {c.vocab, c.hidden});
  const int64_t kv = c.kv_heads * c.head_dim;
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    w.layers.push_back({.attn_norm = read(f, p + "attn_norm.weight", {c.hidden}),
                        .ffn_norm = read(f, p + "ffn_norm.weight", {c.hidden}),
                        .q = linear(f, p + "attn_q.weight", c.hidden, c.hidden),
                        .k = linear(f, p + "attn_k.weight", kv, c.hidden),
                        .v = linear(f, p + "attn_v.weight", kv, c.hidden),
                        .o = linear(f, p + "attn_output.weight", c.hidden, c.hidden),
                        .gate = linear(f, p + "ffn_gate.weight", c.ffn, c.hidden),
                        .up = linear(f, p + "ffn_up.weight", c.ffn, c.hidden),
                        .down = linear(f, p + "ffn_down.weight", c.hidden, c.ffn)});
  }
  w.output_norm = read(f, "output_norm.weight", {c.hidden});
  w.output = c.tied_output
                 ? nn::LinearWeights{.weight = w.embedding}
                 : nn::LinearWeights{.weight = read(f, "output.weight", {c.vocab, c.hidden})};
  nn::pack(w.output);
  return w;
}

RopeTable rope_table(int64_t start, int64_t n, int64_t d, double base) {
  RopeTable t{.n = n, .d = d};
  t.cos.resize(static_cast<std::size_t>(n * (d / 2)));
  t.sin.resize(t.cos.size());
  for (int64_t i = 0; i < d / 2; ++i) {
    const double frequency = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(d));
    for (int64_t p = 0; p < n; ++p) {
      const double angle = static_cast<double>(start + p) * frequency;
      t.cos[static_cast<std::size_t>(p * (d / 2) + i)] = std::cos(angle);
      t.sin[static_cast<std::size_t>(p * (d / 2) + i)] = std::sin(angle);
    }
  }
  return t;
}

void rope(Tensor& x, const RopeTable& table) {
  const int64_t heads = x.dim(1), n = x.dim(2), d = x.dim(3);
  if (n != table.n || d != table.d)
    throw Error("rope: " + std::to_string(n) + " positions of dimension " + std::to_string(d) +
                "; the table is for " + std::to_string(table.n) + " of " + std::to_string(table.d));
  parallel_for(heads, resolve_num_threads(0), [&](int64_t h, int) {
    float* p = x.data<float>() + h * n * d;
    for (int64_t t = 0; t < n; ++t, p += d)
      for (int64_t i = 0; i < d / 2; ++i) {
        const double c = table.cos[static_cast<std::size_t>(t * (d / 2) + i)];
        const double s = table.sin[static_cast<std::size_t>(t * (d / 2) + i)];
        const double a = p[2 * i], b = p[2 * i + 1];
        p[2 * i] = static_cast<float>(a * c - b * s);
        p[2 * i + 1] = static_cast<float>(a * s + b * c);
      }
  });
}

void rope(Tensor& x, int64_t start, double base) {
  rope(x, rope_table(start, x.dim(2), x.dim(3), base));
}

void llama_layer(const LlamaWeights& w, const LlamaConfig& c, int64_t l, Tensor& h,
                 const RopeTable& rotations, KvCache& cache,
                 std::vector<AttentionCapture>* capture, const LayerHooks& hooks,
                 bool capture_rows) {
  // h [n, hidden] with the cache, or [B, n, hidden]: B sequences side by side, no cache.
  const int64_t batch = h.rank() == 3 ? h.dim(0) : 1, n = h.dim(-2);
  if (batch > 1 && (cache.length > 0 || capture != nullptr))
    throw Error("llama: a batch of sequences runs without a cache or a capture");
  const LlamaLayer& layer = w.layers[static_cast<std::size_t>(l)];
  const auto li = static_cast<std::size_t>(l);
  if (cache.k.size() < static_cast<std::size_t>(c.layers))
    cache.k.resize(static_cast<std::size_t>(c.layers)), cache.v.resize(cache.k.size());
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  Tensor x = h.clone();
  rms_norm(x, layer.attn_norm, c.eps);
  Tensor q = split_heads(nn::linear(x, layer.q), c.heads, batch);
  Tensor k = split_heads(nn::linear(x, layer.k), c.kv_heads, batch);
  Tensor v = split_heads(nn::linear(x, layer.v), c.kv_heads, batch);
  for (Tensor* t : {&q, &k}) {  // RoPE on each sequence
    Tensor flat = t->reshape({1, batch * t->dim(1), n, c.head_dim});
    rope(flat, rotations);
  }
  Tensor keys = k, values = v;
  if (batch == 1) {
    append(cache.k[li], cache.length, k);
    append(cache.v[li], cache.length, v);
    keys = cache.k[li].narrow(2, 0, cache.length + n);
    values = cache.v[li].narrow(2, 0, cache.length + n);
  }
  const bool keep = capture != nullptr && !capture_rows, rows = capture != nullptr && capture_rows;
  AttentionResult r = attention(q, keys, values,
                                {.scale = scale,
                                 .causal = Causal::bottom_right,
                                 .mask = hooks.mask ? hooks.mask(l) : Tensor(),
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
                        .scale = scale,
                        .causal = Causal::bottom_right,
                        .q = q,
                        .k = keys.contiguous(),
                        .v = values.contiguous(),
                        .scores = r.scores,
                        .logits = r.logits,
                        .weights = r.weights,
                        .head_out = r.out,
                        .saved_max = r.saved_max,
                        .saved_sum = r.saved_sum});
  add_into(h, nn::linear(nn::merge_heads(r.out).reshape(h.shape()), layer.o));
  if (hooks.attended) hooks.attended(l, h);

  x = h.clone();
  rms_norm(x, layer.ffn_norm, c.eps);
  Tensor gate = nn::linear(x, layer.gate);
  const Tensor up = nn::linear(x, layer.up);
  swiglu(gate, up);
  add_into(h, nn::linear(gate, layer.down));
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
    std::copy_n(w.embedding.data<float>() + ids[static_cast<std::size_t>(i)] * c.hidden, c.hidden,
                h.data<float>() + i * c.hidden);
  return h;
}

void llama_rms_norm(Tensor& x, const Tensor& gain, double eps) { rms_norm(x, gain, eps); }

Tensor llama_forward(const LlamaWeights& w, const LlamaConfig& c, const std::vector<int32_t>& ids,
                     KvCache& cache, const LlamaOptions& options) {
  const auto n = static_cast<int64_t>(ids.size());
  Tensor h = llama_embed(w, c, ids, cache.length);
  if (options.capture != nullptr) options.capture->clear();
  const RopeTable rotations = rope_table(cache.length, n, c.head_dim, c.rope_base);
  for (int64_t l = 0; l < c.layers; ++l)
    llama_layer(w, c, l, h, rotations, cache, options.capture, {}, options.capture_rows);
  cache.length += n;
  if (options.last_logits_only && n > 1) h = h.narrow(0, n - 1, 1).clone();
  rms_norm(h, w.output_norm, c.eps);
  return nn::linear(h, w.output);
}

}  // namespace qkv
