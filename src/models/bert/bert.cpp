#include "models/bert/bert.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/dispatch.h"
#include "core/safetensors.h"
#include "kernels/cpu/blas_threads.h"
#include "kernels/cpu/short_attention.h"
#include "nn/finite.h"
#include "qkv/json.h"

namespace qkv {
namespace {

using Json = nlohmann::json;

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// A config value as a message shows it: its JSON text, cut to 40 characters. (JSON has no NaN
// or ∞, and the parser refuses a literal that overflows, so every number here is finite.)
std::string value_str(const Json& v) {
  const std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 39) + "…" : s;
}

[[noreturn]] void bad_field(const std::string& path, const std::string& key, const Json& config,
                            const std::string& expected) {
  throw Error(path + ": \"" + key + "\" is " +
                  (config.contains(key) ? value_str(config[key]) : std::string("missing")) +
                  "; expected " + expected,
              Error::Kind::runtime);
}

// A required integer field in [lo, hi].
int64_t integer_field(const Json& config, const std::string& path, const char* key, int64_t lo,
                      int64_t hi) {
  const std::string expected =
      "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  if (!config.contains(key) || !config[key].is_number_integer())
    bad_field(path, key, config, expected);
  // Read as double too: a huge unsigned value would wrap around as int64_t.
  const double v = config[key].get<double>();
  if (v < static_cast<double>(lo) || v > static_cast<double>(hi))
    bad_field(path, key, config, expected);
  return config[key].get<int64_t>();
}

// An optional string field that, when present, must be `expected`.
void string_field(const Json& config, const std::string& path, const char* key,
                  const char* expected, const char* why) {
  if (config.contains(key) && config[key] != expected)
    bad_field(path, key, config, "\"" + std::string(expected) + "\"" + why);
}

// Reads and checks every field the encoder uses, each against its range.
BertConfig config_from_json(const Json& json, const std::string& path) {
  if (!json.is_object()) throw Error(path + ": expected a JSON object", Error::Kind::runtime);
  string_field(json, path, "hidden_act", "gelu", " (the erf form; the only one supported)");
  string_field(json, path, "position_embedding_type", "absolute", "");
  // A decoder's causal mask is not applied: an encoder config only (it was ignored).
  if (json.contains("is_decoder") && json["is_decoder"] != false)
    bad_field(path, "is_decoder", json,
              "false (qkv runs BERT as an encoder, without a causal mask)");
  BertConfig c;
  c.vocab_size = integer_field(json, path, "vocab_size", 1, 10'000'000);
  c.hidden_size = integer_field(json, path, "hidden_size", 1, 65536);
  c.num_layers = integer_field(json, path, "num_hidden_layers", 1, 1000);
  c.num_heads = integer_field(json, path, "num_attention_heads", 1, c.hidden_size);
  c.intermediate_size = integer_field(json, path, "intermediate_size", 1, 1 << 20);
  // [CLS] and [SEP] take two positions.
  c.max_positions = integer_field(json, path, "max_position_embeddings", 2, 1 << 20);
  c.type_vocab_size = integer_field(json, path, "type_vocab_size", 1, 1024);
  if (c.hidden_size % c.num_heads != 0)
    throw Error(path + ": \"hidden_size\" " + std::to_string(c.hidden_size) +
                    " is not a multiple of \"num_attention_heads\" " + std::to_string(c.num_heads) +
                    "; expected hidden_size = heads · head dim",
                Error::Kind::runtime);
  // Hugging Face's default when absent. LayerNorm divides by √(variance + eps): eps ≤ 0 makes a
  // constant row NaN, and a large eps flattens every row.
  if (json.contains("layer_norm_eps")) {
    const Json& eps = json["layer_norm_eps"];
    if (!eps.is_number() || !(eps.get<double>() > 0 && eps.get<double>() <= 1e-2))
      bad_field(path, "layer_norm_eps", json,
                "a small positive number (0 < eps ≤ 0.01), e.g. 1e-12");
    c.layer_norm_eps = eps.get<double>();
  }
  for (const char* key : {"hidden_dropout_prob", "attention_probs_dropout_prob"})
    if (json.contains(key) &&
        !(json[key].is_number() && json[key].get<double>() >= 0 && json[key].get<double>() <= 1))
      bad_field(path, key, json, "a probability from 0 to 1");
  return c;
}

// Stacks [n_i, ...] tensors along the first dimension.
Tensor concat_rows(const std::vector<Tensor>& parts) {
  Shape shape = parts[0].shape();
  shape[0] = 0;
  for (const Tensor& p : parts) shape[0] += p.dim(0);
  Tensor out(shape, parts[0].dtype());
  float* dst = out.data<float>();
  for (const Tensor& p : parts) {
    const Tensor c = p.contiguous();
    dst = std::copy(c.data<float>(), c.data<float>() + c.numel(), dst);
  }
  return out;
}

// The checkpoint's tensors, each taken (checked for shape) at most once; leftovers are errors.
class Checkpoint {
 public:
  Checkpoint(const std::string& path) : path_(path), file_(read_safetensors(path)) {
    // BertModel checkpoints name tensors "embeddings..."; task models prefix them with "bert.".
    bool all_prefixed = !file_.names.empty();
    for (const std::string& name : file_.names) all_prefixed &= name.rfind("bert.", 0) == 0;
    if (all_prefixed) prefix_ = "bert.";
  }

  // `config_says`: the config.json fields that set the shape, for a mismatch's message.
  Tensor take(const std::string& name, const Shape& shape, const std::string& config_says = "") {
    const std::string full = prefix_ + name;
    if (const auto skipped = file_.skipped.find(full); skipped != file_.skipped.end())
      throw Error(path_ + ": tensor \"" + full + "\" has dtype " + skipped->second +
                  "; expected F32, F16 or BF16");
    const auto it = file_.tensors.find(full);
    if (it == file_.tensors.end())
      throw Error(path_ + ": tensor \"" + full + "\" is missing; a BERT encoder needs it");
    if (it->second.shape() != shape)
      throw Error(path_ + ": tensor \"" + full + "\" has shape " + shape_str(it->second.shape()) +
                  "; expected " + shape_str(shape) + " for this config" +
                  (config_says.empty() ? "" : " (config.json: " + config_says + ")"));
    if (it->second.dtype() != DType::f32)
      throw Error(path_ + ": tensor \"" + full + "\" is float64; expected F32, F16 or BF16");
    require_finite_tensor(path_, full, it->second);
    taken_.insert(full);
    return it->second;
  }

  // Every tensor not taken must be one the encoder knowingly ignores.
  void check_no_extra() const {
    for (const std::string& name : file_.names) {
      if (taken_.count(name)) continue;
      const std::string bare = name.substr(name.rfind(prefix_, 0) == 0 ? prefix_.size() : 0);
      if (bare == "embeddings.position_ids" || bare.rfind("pooler.", 0) == 0) continue;
      throw Error(path_ + ": tensor \"" + name + "\" is not part of a BERT encoder of this config");
    }
  }

 private:
  std::string path_;
  SafetensorsFile file_;
  std::string prefix_;
  std::set<std::string> taken_;
};

template <class T>
void embed_tokens(T* h, const BertWeights& w, const std::vector<std::vector<int32_t>>& ids,
                  const std::vector<std::vector<int32_t>>* types, int64_t length, int64_t hidden) {
  const T* word = w.word_embeddings.data<T>();
  const T* position = w.position_embeddings.data<T>();
  const T* token_type = w.token_type_embeddings.data<T>();
  for (std::size_t b = 0; b < ids.size(); ++b)
    for (int64_t i = 0; i < length; ++i) {
      T* row = h + (static_cast<int64_t>(b) * length + i) * hidden;
      // Padding positions get the [PAD] (id 0, type 0) embedding; attention never reads them.
      const bool real = i < static_cast<int64_t>(ids[b].size());
      const int64_t id = real ? ids[b][i] : 0;
      const int64_t type = real && types != nullptr ? (*types)[b][i] : 0;
      for (int64_t j = 0; j < hidden; ++j)
        row[j] = word[id * hidden + j] + position[i * hidden + j] + token_type[type * hidden + j];
    }
}

// A model directory's JSON file (config.json, tokenizer_config.json), parsed; errors name it.
Json read_json_file(const std::string& path) {
  const std::string text = read_input_file(path, kBertConfigInput);
  try {
    return parse_json(text);
  } catch (const JsonError& e) {
    throw Error(path + ": " + e.what(), Error::Kind::runtime);
  }
}

}  // namespace

BertConfig read_bert_config(const std::string& path) {
  return config_from_json(read_json_file(path), path);
}

void check_bert_tokenizer_config(const std::string& path) {
  const Json json = read_json_file(path);
  if (!json.is_object()) throw Error(path + ": expected a JSON object", Error::Kind::runtime);
  const char* what =
      " (qkv's BERT tokenizer lowercases, strips accents and splits CJK characters, as uncased "
      "models such as all-MiniLM-L6-v2 need)";
  // Settings it applies: true, or null / absent (BERT's defaults; strip_accents null follows
  // do_lower_case).
  for (const char* key : {"do_lower_case", "do_basic_tokenize", "tokenize_chinese_chars"})
    if (json.contains(key) && json[key] != true)
      bad_field(path, key, json, std::string("true") + what);
  if (json.contains("strip_accents") && !json["strip_accents"].is_null() &&
      json["strip_accents"] != true)
    bad_field(path, "strip_accents", json, std::string("true or null") + what);
  // The special tokens, as strings or as AddedToken objects {"content": …}.
  for (const auto& [key, token] :
       {std::pair{"cls_token", "[CLS]"}, std::pair{"sep_token", "[SEP]"},
        std::pair{"unk_token", "[UNK]"}, std::pair{"pad_token", "[PAD]"}}) {
    if (!json.contains(key) || json[key].is_null()) continue;
    const Json& v = json[key];
    const Json content = v.is_object() && v.contains("content") ? v["content"] : v;
    if (content != token)
      bad_field(path, key, json, "\"" + std::string(token) + "\", the token qkv's BERT uses");
  }
  if (json.contains("tokenizer_class") && json["tokenizer_class"] != "BertTokenizer" &&
      json["tokenizer_class"] != "BertTokenizerFast")
    bad_field(path, "tokenizer_class", json, "\"BertTokenizer\" (a WordPiece vocabulary)");
}

BertWeights read_bert_weights(const std::string& safetensors_path, const BertConfig& c) {
  try {
    Checkpoint ckpt(safetensors_path);
    const int64_t hid = c.hidden_size, inter = c.intermediate_size;
    auto norm = [&](const std::string& name) {
      return nn::NormWeights{ckpt.take(name + ".weight", {hid}), ckpt.take(name + ".bias", {hid}),
                             c.layer_norm_eps};
    };
    auto linear = [&](const std::string& name, int64_t out, int64_t in) {
      return nn::LinearWeights{ckpt.take(name + ".weight", {out, in}),
                               ckpt.take(name + ".bias", {out})};
    };
    BertWeights w;
    const std::string hidden_says = ", hidden_size " + std::to_string(hid);
    w.word_embeddings = ckpt.take("embeddings.word_embeddings.weight", {c.vocab_size, hid},
                                  "vocab_size " + std::to_string(c.vocab_size) + hidden_says);
    w.position_embeddings =
        ckpt.take("embeddings.position_embeddings.weight", {c.max_positions, hid},
                  "max_position_embeddings " + std::to_string(c.max_positions) + hidden_says);
    w.token_type_embeddings =
        ckpt.take("embeddings.token_type_embeddings.weight", {c.type_vocab_size, hid},
                  "type_vocab_size " + std::to_string(c.type_vocab_size) + hidden_says);
    w.embedding_norm = norm("embeddings.LayerNorm");
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const std::string p = "encoder.layer." + std::to_string(l) + ".";
      const nn::LinearWeights q = linear(p + "attention.self.query", hid, hid);
      const nn::LinearWeights k = linear(p + "attention.self.key", hid, hid);
      const nn::LinearWeights v = linear(p + "attention.self.value", hid, hid);
      BertLayer layer;
      layer.qkv = {concat_rows({q.weight, k.weight, v.weight}),
                   concat_rows({q.bias, k.bias, v.bias})};
      layer.attention_out = linear(p + "attention.output.dense", hid, hid);
      layer.attention_norm = norm(p + "attention.output.LayerNorm");
      layer.intermediate = linear(p + "intermediate.dense", inter, hid);
      layer.output = linear(p + "output.dense", hid, inter);
      layer.output_norm = norm(p + "output.LayerNorm");
      // Packed once here, reused by every batch (cpu::packed_linear).
      for (nn::LinearWeights* l :
           {&layer.qkv, &layer.attention_out, &layer.intermediate, &layer.output})
        nn::pack(*l);
      w.layers.push_back(std::move(layer));
    }
    ckpt.check_no_extra();
    return w;
  } catch (const Error& e) {
    throw Error(e.what(), Error::Kind::runtime);  // a bad model file is a runtime failure
  }
}

BertWeights to(const BertWeights& w, DType dtype) {
  BertWeights out;
  out.word_embeddings = w.word_embeddings.to(dtype);
  out.position_embeddings = w.position_embeddings.to(dtype);
  out.token_type_embeddings = w.token_type_embeddings.to(dtype);
  out.embedding_norm = nn::to(w.embedding_norm, dtype);
  for (const BertLayer& l : w.layers)
    out.layers.push_back({nn::to(l.qkv, dtype), nn::to(l.attention_out, dtype),
                          nn::to(l.attention_norm, dtype), nn::to(l.intermediate, dtype),
                          nn::to(l.output, dtype), nn::to(l.output_norm, dtype)});
  out.dense_precision = w.dense_precision;  // rounded values stay rounded in float64
  return out;
}

BertWeights round_dense_to_bf16(const BertWeights& w) {
  BertWeights out = w;
  for (BertLayer& l : out.layers)
    for (nn::LinearWeights* linear : {&l.qkv, &l.attention_out, &l.intermediate, &l.output})
      *linear = nn::round_to_bf16(*linear);
  out.dense_precision = Precision::bf16;
  return out;
}

Tensor bert_encode(const BertWeights& w_given, const BertConfig& c,
                   const std::vector<std::vector<int32_t>>& ids, const BertOptions& options) {
  const int64_t batch = static_cast<int64_t>(ids.size());
  const int64_t hid = c.hidden_size, heads = c.num_heads, dh = c.head_dim();
  int64_t length = 0;
  std::vector<int64_t> lengths;
  for (const auto& seq : ids) {
    for (int32_t id : seq)
      if (id < 0 || id >= c.vocab_size)
        throw Error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                    std::to_string(c.vocab_size) + ")");
    lengths.push_back(static_cast<int64_t>(seq.size()));
    length = std::max(length, lengths.back());
  }
  if (const auto* types = options.token_types; types != nullptr) {
    if (types->size() != ids.size())
      throw Error("token_types has " + std::to_string(types->size()) + " sequences; expected " +
                  std::to_string(ids.size()) + ", one per sequence of ids");
    for (std::size_t b = 0; b < ids.size(); ++b) {
      if ((*types)[b].size() != ids[b].size())
        throw Error("sequence " + std::to_string(b) + " has " + std::to_string(ids[b].size()) +
                    " ids but " + std::to_string((*types)[b].size()) + " token types");
      for (int32_t t : (*types)[b])
        if (t < 0 || t >= c.type_vocab_size)
          throw Error("token type " + std::to_string(t) + " is outside the model's [0, " +
                      std::to_string(c.type_vocab_size) + ")");
    }
  }
  if (length > c.max_positions)
    throw Error("a sequence of " + std::to_string(length) + " tokens exceeds the model's " +
                std::to_string(c.max_positions) + " positions");
  // bf16: weights not rounded yet are rounded for this call (SentenceModel keeps a rounded copy);
  // each dense layer's input is rounded as it is taken.
  const bool bf16 = options.precision == Precision::bf16;
  BertWeights rounded_here;
  if (bf16 && w_given.dense_precision != Precision::bf16)
    rounded_here = round_dense_to_bf16(w_given);
  const BertWeights& w =
      bf16 && w_given.dense_precision != Precision::bf16 ? rounded_here : w_given;
  // A float32 layer's bf16 panels round x themselves (nn::round_to_bf16); float64 rounds here.
  auto dense_input = [bf16](const Tensor& x) {
    return bf16 && x.dtype() != DType::f32 ? nn::round_to_bf16(x) : x;
  };
  const DType dtype = w.word_embeddings.dtype();
  // One pool on the cores: qkv's workers split each GEMM, OpenBLAS stays single-threaded.
  const cpu::SingleThreadedBlas blas;

  Tensor h({batch, length, hid}, dtype);
  dispatch_float(dtype, [&]<class T>(T) {
    embed_tokens<T>(h.data<T>(), w, ids, options.token_types, length, hid);
  });
  nn::layer_norm(h, w.embedding_norm);
  BertCapture* capture = options.capture;
  if (capture != nullptr) {
    capture->embeddings = h.clone();
    capture->layers.clear();
    capture->hidden.clear();
  }

  const bool keep = capture != nullptr;
  // Short float32 sequences with nothing captured: attention straight from the projection's rows
  // into the merged heads (kernels/cpu/short_attention.h); else qkv::attention on [B, H, L, D].
  // It has no bf16 variant (it is a kernel of its own): bf16 takes qkv::attention.
  const bool short_path = !keep && dtype == DType::f32 && !bf16 &&
                          options.attention_path == Path::automatic &&
                          length <= cpu::kShortAttentionMaxLength;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)));
  for (const BertLayer& layer : w.layers) {
    // One GEMM projects h to [q | k | v] (each row: the heads of q, then of k, then of v).
    const Tensor qkv = nn::linear(dense_input(h), layer.qkv);
    Tensor merged;
    if (short_path) {
      merged = Tensor({batch, length, hid}, dtype);
      const float* rows = qkv.data<float>();
      cpu::short_attention({.B = batch,
                            .L = length,
                            .H = heads,
                            .D = dh,
                            .scale = scale,
                            .q = rows,
                            .k = rows + hid,
                            .v = rows + 2 * hid,
                            .ld = 3 * hid,
                            .out = merged.data<float>(),
                            .ldo = hid,
                            .lengths = lengths.data()});
    }
    // Else each of q, k, v is a strided [B, H, L, D] view of the projection.
    const Tensor heads_view = qkv.reshape({batch, length, 3 * heads, dh});
    const Tensor q = heads_view.narrow(2, 0, heads).transpose(1, 2);
    const Tensor k = heads_view.narrow(2, heads, heads).transpose(1, 2);
    const Tensor v = heads_view.narrow(2, 2 * heads, heads).transpose(1, 2);
    AttentionResult r;
    if (!short_path) {
      r = attention(q, k, v,
                    {.key_lengths = lengths,
                     .need_weights = keep,
                     .need_scores = keep,
                     .path = keep ? Path::reference : options.attention_path,
                     .precision = options.precision});
      merged = nn::merge_heads(r.out);
    }
    Tensor a = nn::linear(dense_input(merged), layer.attention_out);
    nn::layer_norm(a, layer.attention_norm, h);
    const Tensor f = nn::linear_gelu(dense_input(a), layer.intermediate);
    h = nn::linear(dense_input(f), layer.output);
    nn::layer_norm(h, layer.output_norm, a);
    if (keep) {
      capture->layers.push_back({.scale = 1.0 / std::sqrt(static_cast<double>(dh)),
                                 .q = q.contiguous(),
                                 .k = k.contiguous(),
                                 .v = v.contiguous(),
                                 .scores = r.scores,
                                 .logits = r.logits,
                                 .weights = r.weights,
                                 .head_out = r.out});
      capture->hidden.push_back(h.clone());
    }
  }
  return h;
}

Tensor mean_pool_normalize(const Tensor& hidden, const std::vector<int64_t>& lengths) {
  const int64_t batch = hidden.dim(0), length = hidden.dim(1), d = hidden.dim(2);
  if (static_cast<int64_t>(lengths.size()) != batch)
    throw Error("mean_pool_normalize: " + std::to_string(lengths.size()) +
                " lengths for a batch of " + std::to_string(batch));
  const Tensor h = hidden.contiguous().to(DType::f64);
  Tensor out({batch, d}, hidden.dtype());
  std::vector<double> mean(static_cast<std::size_t>(d));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n = std::min(lengths[b], length);
    std::fill(mean.begin(), mean.end(), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < d; ++j) mean[j] += h.data<double>()[(b * length + i) * d + j];
    double norm = 0;
    for (double& m : mean) {
      m /= static_cast<double>(std::max<int64_t>(n, 1));
      norm += m * m;
    }
    // torch.nn.functional.normalize: x / max(‖x‖, 1e-12).
    const double inv = 1.0 / std::max(std::sqrt(norm), 1e-12);
    for (int64_t j = 0; j < d; ++j)
      dispatch_float(hidden.dtype(),
                     [&]<class T>(T) { out.data<T>()[b * d + j] = static_cast<T>(mean[j] * inv); });
  }
  return out;
}

}  // namespace qkv
