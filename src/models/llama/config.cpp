// A GGUF decoder's config from its header (read_llama_config), the tensors it implies, and what
// its weights will take in memory: every architecture qkv runs, checked against the file's table
// of tensors before a byte of them is read.
//
// What each architecture changes, as llama.cpp reads and runs it (src/llama-model.cpp,
// src/llama-arch.cpp) and Hugging Face's modeling files define it:
//   llama   Llama 1–3.x, TinyLlama, Mistral 7B, SmolLM 1/2: adjacent RoPE pairs; Llama 3.1's
//           per-frequency factors when the file has rope_freqs.weight
//   qwen2   Qwen 2 / 2.5: biases on q, k and v; RoPE pairs (i, i + d/2)
//   qwen3   Qwen 3: RMSNorm over each head's q and k before RoPE; (i, i + d/2)
//   gemma3  Gemma 3 (text): q/k RMSNorm; the embedding × √hidden; GeGLU; post-attention and
//           post-feed-forward RMSNorm; 5 of every 6 layers slide over gemma3.attention.
//           sliding_window positions with RoPE base 10000, the 6th global with the file's base
//           and scaling. (The converter stores Gemma's norm gains as 1 + w: they multiply as
//           any RMSNorm's do.)
#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <set>
#include <sstream>
#include <string>

#include "models/llama/llama.h"
#include "qkv/memory.h"

namespace qkv {
namespace {

struct Architecture {
  std::string name;
  RopePairing pairing = RopePairing::halves;
  bool qkv_bias = false, qk_norm = false, gemma = false;
};

const std::vector<Architecture>& architectures() {
  static const std::vector<Architecture> all = {
      {.name = "llama", .pairing = RopePairing::adjacent},
      {.name = "qwen2", .qkv_bias = true},
      {.name = "qwen3", .qk_norm = true},
      {.name = "gemma3", .qk_norm = true, .gemma = true},
  };
  return all;
}

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

// {arch}.block_count against the blocks the tensors hold: a count that is too small would run
// part of the model, one that is too large fails at a missing tensor (or, at 2·10⁹, at no size).
int64_t block_count(const GgufFile& f, const std::string& key) {
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
// (a missing one is named later), so that a lying size is named by its key.
void expect_rows(const GgufFile& f, const std::string& tensor, int64_t rows,
                 const std::string& because) {
  for (const GgufTensorInfo& t : f.tensors())
    if (t.name == tensor && t.shape.size() == 2 && t.shape[0] != rows)
      bad(f, "tensor \"" + tensor + "\" is " + shape_str(t.shape) + ", but " + because + " makes " +
                 std::to_string(rows) + " rows; the metadata and the tensors disagree");
}

// A size the file may state again: when present, it must be `expected`.
void expect_same(const GgufFile& f, const std::string& key, int64_t expected,
                 const std::string& what) {
  if (!f.has(key)) return;
  const nlohmann::json& v = f.meta(key);
  const bool equal =
      v.is_number_integer() && (v.is_number_unsigned() ? v.get<uint64_t>() == uint64_t(expected)
                                                       : v.get<int64_t>() == expected);
  if (!equal) bad(f, is(f, key) + "; expected " + what);
}

const Architecture& architecture_of(const GgufFile& f) {
  const nlohmann::json& arch = f.meta("general.architecture");
  for (const Architecture& a : architectures())
    if (arch == a.name) return a;
  std::string names;
  for (const std::string& n : supported_gguf_architectures())
    names += (names.empty() ? "" : ", ") + n;
  bad(f, "architecture " + gguf_value_str(arch) + ", which qkv does not run; expected one of " +
             names);
}

// RoPE as the file declares it: what qkv applies (linear scaling, Llama 3.1's factors) is read;
// what it does not (YaRN, LongRoPE, ...) is refused, not run wrongly.
void read_rope(const GgufFile& f, const std::string& a, LlamaConfig& c) {
  c.rope_base = meta_number(f, a + ".rope.freq_base", 10000);
  const std::string type_key = a + ".rope.scaling.type", factor_key = a + ".rope.scaling.factor";
  const std::string type = f.has(type_key) && f.meta(type_key).is_string()
                               ? f.meta(type_key).get<std::string>()
                               : (f.has(type_key) ? "?" : "");
  const double factor = meta_number(f, factor_key, 1);
  if (f.has(a + ".rope.scale_linear")) c.rope_scale = meta_number(f, a + ".rope.scale_linear", 1);
  if (type.empty() || type == "none" || type == "linear") {
    // llama.cpp scales positions by 1/factor whatever the type says but YaRN's extras: a factor
    // without a type, or beside "none", is linear scaling.
    c.rope_scale = factor;
  } else if (!(f.has(factor_key) && factor == 1)) {
    bad(f, is(f, type_key) +
               ": RoPE scaling qkv does not apply; expected none, linear, or Llama 3.1's "
               "rope_freqs.weight");
  }
  for (const GgufTensorInfo& t : f.tensors())
    if (t.name == "rope_freqs.weight") c.rope_factors = true;
}

// Gemma 3's layers: 5 of every 6 slide when the file states a window (llama.cpp's
// set_swa_pattern(6): layer l slides when l mod 6 < 5), with RoPE base 10000 and no scaling.
void read_gemma(const GgufFile& f, const std::string& a, LlamaConfig& c) {
  c.embedding_scale = std::sqrt(static_cast<double>(c.hidden));
  c.gelu = c.post_norms = true;
  const std::string window = a + ".attention.sliding_window";
  if (f.has(window) && f.meta(window) != 0) {
    c.sliding_window = meta_size(f, window);
    // The period: every period-th layer is global. The converter writes no key (Gemma 3 has 6);
    // llama.cpp reads one when a file has it.
    const std::string pattern = a + ".attention.sliding_window_pattern";
    const int64_t period = f.has(pattern) ? meta_size(f, pattern) : 6;
    c.sliding.resize(static_cast<std::size_t>(c.layers));
    for (int64_t l = 0; l < c.layers; ++l)
      c.sliding[static_cast<std::size_t>(l)] = l % period < period - 1;
    c.rope_base_sliding = meta_number(f, a + ".rope.freq_base_swa", 10000);
  }
  c.final_softcap = f.has(a + ".final_logit_softcapping")
                        ? meta_number(f, a + ".final_logit_softcapping", 0)
                        : 0;
  // Gemma 3 27B scales by 1/√(hidden / heads) (its query_pre_attn_scalar), the others by
  // 1/√head_dim; llama.cpp knows the 27B by its 62 layers.
  if (c.layers == 62)
    c.attention_scale = 1.0 / std::sqrt(static_cast<double>(c.hidden / c.heads));
}

// Every tensor the config needs, present and of its shape, before any is read: what the weights
// will take in memory is then known from the config alone (llama_weight_bytes). And no tensor
// besides them: one qkv leaves unread is part of another model than the one run (llama.cpp
// refuses a file whose tensor count is not what its architecture creates).
void check_tensors(const GgufFile& f, LlamaConfig& c) {
  const std::string& a = c.architecture;
  c.tied_output = true;
  for (const GgufTensorInfo& t : f.tensors())
    c.tied_output = c.tied_output && t.name != "output.weight";
  std::set<std::string> read;
  for_each_llama_tensor(c, [&](const std::string& name, const Shape& shape) {
    const GgufTensorInfo& info = f.info(name);
    if (info.shape != shape)
      bad(f, "tensor \"" + name + "\" is " + shape_str(info.shape) + "; expected " +
                 shape_str(shape) + " for this config");
    read.insert(name);
  });
  for (const GgufTensorInfo& t : f.tensors()) {
    if (read.contains(t.name)) continue;
    if (t.name.rfind("blk.", 0) == 0 && t.name.ends_with(".bias"))
      bad(f, "tensor \"" + t.name + "\" is a bias, which a " + a +
                 " decoder does not add; expected a " + a + " model without it");
    const std::string layers = std::to_string(c.layers) + (c.layers == 1 ? " layer" : " layers");
    const std::string blocks =
        c.layers == 1 ? "blk.0" : "blk.0 … blk." + std::to_string(c.layers - 1);
    bad(f, "it holds a tensor \"" + t.name + "\" that a " + a + " decoder of " + layers +
               " does not have; expected only the tensors of its layers (token_embd, " + blocks +
               ", output_norm, output)");
  }
}

}  // namespace

const std::vector<std::string>& supported_gguf_architectures() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const Architecture& a : architectures()) n.push_back(a.name);
    return n;
  }();
  return names;
}

void for_each_llama_tensor(const LlamaConfig& c,
                           const std::function<void(const std::string&, const Shape&)>& fn) {
  const int64_t q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim;
  fn("token_embd.weight", {c.vocab, c.hidden});
  if (c.rope_factors) fn("rope_freqs.weight", {c.rope_dims / 2});
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    fn(p + "attn_norm.weight", {c.hidden});
    fn(p + "attn_q.weight", {q, c.hidden});
    fn(p + "attn_k.weight", {kv, c.hidden});
    fn(p + "attn_v.weight", {kv, c.hidden});
    if (c.qkv_bias) {
      fn(p + "attn_q.bias", {q});
      fn(p + "attn_k.bias", {kv});
      fn(p + "attn_v.bias", {kv});
    }
    if (c.qk_norm) {
      fn(p + "attn_q_norm.weight", {c.head_dim});
      fn(p + "attn_k_norm.weight", {c.head_dim});
    }
    fn(p + "attn_output.weight", {c.hidden, q});
    if (c.post_norms) fn(p + "post_attention_norm.weight", {c.hidden});
    fn(p + "ffn_norm.weight", {c.hidden});
    fn(p + "ffn_gate.weight", {c.ffn, c.hidden});
    fn(p + "ffn_up.weight", {c.ffn, c.hidden});
    fn(p + "ffn_down.weight", {c.hidden, c.ffn});
    if (c.post_norms) fn(p + "post_ffw_norm.weight", {c.hidden});
  }
  fn("output_norm.weight", {c.hidden});
  if (!c.tied_output) fn("output.weight", {c.vocab, c.hidden});
}

LlamaConfig read_llama_config(const GgufFile& f) {
  const Architecture& arch = architecture_of(f);
  const std::string a = arch.name;
  if (f.has(a + ".expert_count") && f.meta(a + ".expert_count") != 0)
    bad(f, is(f, a + ".expert_count") +
               ": a mixture of experts, which qkv does not run; expected a dense model");
  LlamaConfig c;
  c.architecture = a;
  c.rope_pairing = arch.pairing;
  c.qkv_bias = arch.qkv_bias;
  c.qk_norm = arch.qk_norm;
  c.layers = block_count(f, a + ".block_count");
  c.hidden = meta_size(f, a + ".embedding_length");
  c.heads = meta_size(f, a + ".attention.head_count");
  c.kv_heads = f.has(a + ".attention.head_count_kv") ? meta_size(f, a + ".attention.head_count_kv")
                                                      : c.heads;
  c.ffn = meta_size(f, a + ".feed_forward_length");
  c.context = meta_size(f, a + ".context_length");
  c.eps = meta_number(f, a + ".attention.layer_norm_rms_epsilon", 1e-5);
  read_rope(f, a, c);

  const nlohmann::json& tokens = f.meta("tokenizer.ggml.tokens");
  if (!tokens.is_array() || tokens.empty())
    bad(f, is(f, "tokenizer.ggml.tokens") + "; expected the vocabulary, an array of strings");
  c.vocab = static_cast<int64_t>(tokens.size());
  expect_same(f, a + ".vocab_size", c.vocab,
              "the " + std::to_string(c.vocab) + " tokens of tokenizer.ggml.tokens");

  const std::string hidden = a + ".embedding_length " + std::to_string(c.hidden);
  const std::string heads = a + ".attention.head_count " + std::to_string(c.heads);
  if (c.heads % c.kv_heads != 0)
    bad(f, a + ".attention.head_count_kv " + std::to_string(c.kv_heads) + " does not divide " +
               heads + "; expected a whole number of query heads per key/value head");
  // A head's dimension: attention.key_length where the file states it (Qwen 3, Gemma 3: not
  // hidden / heads), else hidden / heads; values have the same.
  std::string head_dim;
  if (f.has(a + ".attention.key_length")) {
    c.head_dim = meta_size(f, a + ".attention.key_length");
    head_dim = a + ".attention.key_length " + std::to_string(c.head_dim);
  } else {
    if (c.hidden % c.heads != 0)
      bad(f, heads + " does not divide " + hidden + "; expected whole heads");
    c.head_dim = c.hidden / c.heads;
    head_dim = "the head dimension " + std::to_string(c.head_dim) + " (" + hidden + " / " +
               std::to_string(c.heads) + " heads)";
  }
  expect_same(f, a + ".attention.value_length", c.head_dim,
              head_dim + ": qkv's heads have values as wide as their keys");
  if (c.head_dim % 2 != 0) bad(f, head_dim + " is odd; RoPE rotates pairs of dimensions");
  c.rope_dims = f.has(a + ".rope.dimension_count") ? meta_size(f, a + ".rope.dimension_count")
                                                   : c.head_dim;
  if (c.rope_dims > c.head_dim || c.rope_dims % 2 != 0)
    bad(f, is(f, a + ".rope.dimension_count") + "; expected an even number up to " + head_dim);
  c.attention_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  if (arch.gemma) read_gemma(f, a, c);
  // Another architecture's window (Mistral 7B v0.1's 4096, Qwen 2's unused one) is not read, as
  // llama.cpp reads none for it.

  // Each size against the tensors it shapes.
  for (const GgufTensorInfo& t : f.tensors())
    if (t.name == "token_embd.weight" && t.shape.size() == 2 &&
        (t.shape[1] != c.hidden || t.shape[0] != c.vocab))
      bad(f, "tensor \"token_embd.weight\" is " + shape_str(t.shape) + ", but " + hidden +
                 " and the " + std::to_string(c.vocab) + " tokens of tokenizer.ggml.tokens make " +
                 shape_str({c.vocab, c.hidden}) + "; the metadata and the tensors disagree");
  expect_rows(f, "blk.0.attn_q.weight", c.heads * c.head_dim,
              heads + " × " + head_dim);
  expect_rows(f, "blk.0.attn_k.weight", c.kv_heads * c.head_dim,
              a + ".attention.head_count_kv " + std::to_string(c.kv_heads) + " × " + head_dim);
  expect_rows(f, "blk.0.ffn_up.weight", c.ffn, a + ".feed_forward_length " + std::to_string(c.ffn));

  check_tensors(f, c);
  return c;
}

int64_t llama_weight_bytes(const GgufFile& f, const LlamaConfig& c, WeightFormat format) {
  double bytes = 0;
  for_each_llama_tensor(c, [&](const std::string& name, const Shape& shape) {
    if (shape.size() == 1) {  // norms, biases, rope_freqs: float32
      bytes += 4.0 * static_cast<double>(shape[0]);
      return;
    }
    // The embedding is packed only where it is the output matrix too.
    const bool packed = name != "token_embd.weight" || c.tied_output;
    bytes += static_cast<double>(
        llama_matrix_bytes(f.info(name).type, shape[0], shape[1], false, format, packed));
  });
  return saturated_bytes(bytes);
}

}  // namespace qkv

namespace qkv {
namespace {

// 1000000 as "1,000,000", 0.0625 as "0.0625".
std::string number(double x) {
  if (x == std::round(x) && std::abs(x) < 1e15) return grouped(static_cast<int64_t>(x));
  std::ostringstream s;
  s << x;
  return s.str();
}

}  // namespace

std::vector<std::string> attention_features(const LlamaConfig& c) {
  std::vector<std::string> f;
  const int64_t group = c.heads / c.kv_heads;
  if (c.kv_heads == 1)
    f.push_back("multi-query attention: all " + std::to_string(c.heads) +
                " query heads share one key/value head");
  else if (group > 1)
    f.push_back("grouped-query attention: " + std::to_string(group) +
                " query heads share each of " + std::to_string(c.kv_heads) + " key/value heads");
  if (c.qkv_bias) f.push_back("q, k and v add biases (b_Q, b_K, b_V)");
  if (c.qk_norm) f.push_back("RMSNorm on each head's q and k before RoPE");
  std::string rope = "RoPE base " + number(c.rope_base) + ", pairs " +
                     (c.rope_pairing == RopePairing::adjacent ? "(2i, 2i+1)" : "(i, i+d/2)");
  if (c.rope_dims < c.head_dim)
    rope += ", on " + std::to_string(c.rope_dims) + " of " + std::to_string(c.head_dim) + " dims";
  if (c.rope_scale != 1) rope += ", positions scaled 1/" + number(c.rope_scale);
  if (c.rope_factors) rope += ", Llama 3.1 frequency factors";
  f.push_back(rope);
  if (c.sliding_window > 0) {
    int64_t slide = 0;
    for (const bool s : c.sliding) slide += s ? 1 : 0;
    f.push_back("sliding window of " + std::to_string(c.sliding_window) + " positions on " +
                std::to_string(slide) + " of " + std::to_string(c.layers) +
                " layers (RoPE base " + number(c.rope_base_sliding) + " there); the rest global");
  }
  if (std::abs(c.attention_scale * std::sqrt(static_cast<double>(c.head_dim)) - 1) > 1e-12)
    f.push_back("scores scaled by " + number(c.attention_scale) + ", not 1/√" +
                std::to_string(c.head_dim));
  if (c.post_norms) f.push_back("RMSNorm on attention's output before it joins the stream");
  if (c.embedding_scale != 1)
    f.push_back("embeddings × √" + std::to_string(c.hidden) + " = " + number(c.embedding_scale));
  if (c.gelu) f.push_back("GeGLU feed-forward");
  if (c.final_softcap > 0) f.push_back("logits soft-capped at " + number(c.final_softcap));
  return f;
}

}  // namespace qkv
