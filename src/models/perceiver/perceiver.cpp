// The Perceiver of qkv/perceiver.h: forward, backward, save and load.
#include "qkv/perceiver.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/dispatch.h"
#include "core/safetensors.h"
#include "qkv/field_error.h"
#include "qkv/json.h"

namespace qkv {

namespace {

constexpr const char* kFormatKey = "format";
constexpr const char* kFormat = "qkv-perceiver";
constexpr const char* kConfigKey = "qkv.config";

nn::MultiHeadAttentionOptions cross_options(const PerceiverConfig& c) {
  nn::MultiHeadAttentionOptions o;
  o.d_model = c.d_model;
  o.heads = c.heads;
  return o;
}

nn::BlockOptions block_options(const PerceiverConfig& c) {
  nn::BlockOptions o;
  o.d_model = c.d_model;
  o.heads = c.heads;
  o.ffn_hidden = 4 * c.d_model;
  o.attention.d_model = c.d_model;
  o.attention.heads = c.heads;
  return o;
}

// y[b, i, :] = x[b, i, :] + t[i, :]  (x: [B, M, D] contiguous, t: [≥ M, D]).
Tensor add_rows(const Tensor& x, const Tensor& t) {
  Tensor y = x.clone();
  const int64_t b = y.dim(0), m = y.dim(1), d = y.dim(2);
  dispatch_float(y.dtype(), [&]<class T>(T) {
    T* py = y.data<T>();
    const T* pt = t.data<T>();
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < m * d; ++j) py[i * m * d + j] += pt[j];
  });
  return y;
}

// a + b, elementwise (one shape).
Tensor add(const Tensor& a, const Tensor& b) {
  Tensor y = a.clone();
  const Tensor c = b.contiguous();
  dispatch_float(y.dtype(), [&]<class T>(T) {
    T* py = y.data<T>();
    const T* pc = c.data<T>();
    for (int64_t i = 0; i < y.numel(); ++i) py[i] += pc[i];
  });
  return y;
}

// The latents [N, D] repeated for each of B inputs: [B, N, D].
Tensor broadcast(const Tensor& latents, int64_t b) {
  Tensor y({b, latents.dim(0), latents.dim(1)}, latents.dtype());
  const int64_t n = latents.numel();
  dispatch_float(y.dtype(), [&]<class T>(T) {
    const T* p = latents.data<T>();
    for (int64_t i = 0; i < b; ++i) std::copy(p, p + n, y.data<T>() + i * n);
  });
  return y;
}

// Forward was z₀[b] = latents for every b, so ∂latents += Σ_b ∂z₀[b].
void unbroadcast_into(Tensor& grad, const Tensor& dz) {
  const Tensor g = dz.contiguous();
  const int64_t b = g.dim(0), n = grad.numel();
  dispatch_float(grad.dtype(), [&]<class T>(T) {
    T* pg = grad.data<T>();
    const T* pd = g.data<T>();
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < n; ++j) pg[j] += pd[i * n + j];
  });
}

// [B, N, D] → the mean over N: [B, D].
Tensor mean_latents(const Tensor& z) {
  const Tensor x = z.contiguous();
  const int64_t b = x.dim(0), n = x.dim(1), d = x.dim(2);
  Tensor y = Tensor::full({b, d}, 0.0, x.dtype());
  dispatch_float(y.dtype(), [&]<class T>(T) {
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t k = 0; k < d; ++k) py[i * d + k] += px[(i * n + j) * d + k] / T(n);
  });
  return y;
}

// Forward was pooled = (1/N) Σ_n z[:, n], so ∂z[:, n] = ∂pooled / N for every n.
Tensor unmean_latents(const Tensor& dpooled, int64_t n) {
  const Tensor g = dpooled.contiguous();
  const int64_t b = g.dim(0), d = g.dim(1);
  Tensor dz({b, n, d}, g.dtype());
  dispatch_float(g.dtype(), [&]<class T>(T) {
    const T* pg = g.data<T>();
    T* pz = dz.data<T>();
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t k = 0; k < d; ++k) pz[(i * n + j) * d + k] = pg[i * d + k] / T(n);
  });
  return dz;
}

std::string config_json(const PerceiverConfig& c) {
  return nlohmann::json{{"task", c.task},       {"length", c.length},   {"vocab", c.vocab},
                        {"classes", c.classes}, {"latents", c.latents}, {"d_model", c.d_model},
                        {"heads", c.heads},     {"blocks", c.blocks}}
      .dump();
}

PerceiverConfig config_from_json(const std::string& text, const std::string& path) {
  PerceiverConfig c;
  nlohmann::json j;
  try {
    j = parse_json(text);
  } catch (const JsonError& e) {
    throw Error(path + ": the metadata's " + std::string(kConfigKey) + " " + e.what(),
                Error::Kind::runtime);
  }
  try {
    c.task = j.at("task").get<std::string>();
    c.length = j.at("length").get<int64_t>();
    c.vocab = j.at("vocab").get<int64_t>();
    c.classes = j.at("classes").get<int64_t>();
    c.latents = j.at("latents").get<int64_t>();
    c.d_model = j.at("d_model").get<int64_t>();
    c.heads = j.at("heads").get<int64_t>();
    c.blocks = j.at("blocks").get<int64_t>();
  } catch (const nlohmann::json::exception&) {
    throw Error(path + ": the metadata's " + std::string(kConfigKey) +
                    " is not a Perceiver config (task, length, vocab, classes, latents, d_model, "
                    "heads, blocks)",
                Error::Kind::runtime);
  }
  try {
    c.validate();
    (void)make_perceiver_task(c.task, c.length);  // the task it reads, at its length
  } catch (const Error& e) {
    throw Error(path + ": the metadata's " + std::string(kConfigKey) + ": " + e.what(),
                Error::Kind::runtime);
  }
  return c;
}

}  // namespace

void PerceiverConfig::validate() const {
  auto check = [](const char* name, int64_t value, int64_t lo, int64_t hi) {
    if (value < lo || value > hi)
      throw FieldError(name, "{" + std::string(name) + "} " + std::to_string(value) +
                                 " is out of range; expected " + std::to_string(lo) + " to " +
                                 std::to_string(hi));
  };
  // The fields' own names: the command maps them to its flags, a model file's loader prefixes
  // its path.
  check("length", length, 1, 65536);
  check("vocab", vocab, 1, 65536);
  check("classes", classes, 2, 65536);
  check("latents", latents, 1, 4096);
  check("d_model", d_model, 1, 4096);
  check("heads", heads, 1, d_model);
  check("blocks", blocks, 0, 64);
  if (d_model % heads != 0)
    throw FieldError("d_model", "{d_model} " + std::to_string(d_model) +
                                    " is not a multiple of {heads} " + std::to_string(heads));
}

Perceiver::Perceiver(const PerceiverConfig& config, nn::Rng& rng, DType dtype)
    : embedding("embedding", (config.validate(), config.vocab), config.d_model, rng, dtype),
      latents(nn::make_parameter("latents", {config.latents, config.d_model}, 1.0, rng, dtype)),
      input_norm("input_norm", config.d_model, 1e-5, dtype),
      latent_norm("latent_norm", config.d_model, 1e-5, dtype),
      cross("cross", cross_options(config), rng, dtype),
      ffn_norm("ffn_norm", config.d_model, 1e-5, dtype),
      ffn("ffn", config.d_model, 4 * config.d_model, nn::Activation::relu, 0.0, rng, dtype),
      out_norm("out_norm", config.d_model, 1e-5, dtype),
      head("head", config.d_model, config.classes, true, rng, dtype),
      config_(config),
      positions_(nn::sinusoidal_positions(config.length, config.d_model, dtype)) {
  for (int64_t i = 0; i < config.blocks; ++i)
    blocks.push_back(std::make_unique<nn::EncoderBlock>("blocks." + std::to_string(i),
                                                        block_options(config), rng, dtype));
}

Tensor Perceiver::forward(const std::vector<std::vector<int32_t>>& ids, bool need_weights) {
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (static_cast<int64_t>(ids[i].size()) != config_.length)
      throw Error("Perceiver: input " + std::to_string(i) + " has " +
                  std::to_string(ids[i].size()) + " symbols; the model reads " +
                  std::to_string(config_.length));
  if (ids.empty()) throw Error("Perceiver: no inputs; expected at least one");
  batch_ = static_cast<int64_t>(ids.size());
  nn::Rng no_dropout(0);  // every dropout is 0: nothing is drawn
  const Tensor x = input_norm.forward(add_rows(embedding.forward(ids), positions_));
  const Tensor z0 = broadcast(latents.value, batch_);
  const Tensor z1 = add(z0, cross.forward(latent_norm.forward(z0), x, {}, Causal::none, false,
                                          no_dropout, need_weights));
  Tensor z = add(z1, ffn.forward(ffn_norm.forward(z1), false, no_dropout));
  for (auto& block : blocks) z = block->forward(z, {}, false, no_dropout);
  return head.forward(out_norm.forward(mean_latents(z)));
}

void Perceiver::backward(const Tensor& dlogits) {
  // Forward was logits = head(out_norm(mean(z))), so the gradient enters every latent / N.
  Tensor dz = unmean_latents(out_norm.backward(head.backward(dlogits)), config_.latents);
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) dz = (*it)->backward(dz);
  // z = z₁ + FFN(LN(z₁)): the residual passes dz, the branch adds its own.
  const Tensor dz1 = add(dz, ffn_norm.backward(ffn.backward(dz)));
  // z₁ = z₀ + Cross(LN(z₀), x): queries from the latents, keys and values from x.
  const nn::MultiHeadAttention::Grads g = cross.backward(dz1);
  unbroadcast_into(latents.grad, add(dz1, latent_norm.backward(g.dx)));
  // x = LN(Embedding(ids) + PE): the positions are fixed, the gradient goes to the embedding.
  embedding.backward(input_norm.backward(g.dmemory));
}

void Perceiver::collect(std::vector<nn::Parameter*>& out) {
  embedding.collect(out);
  out.push_back(&latents);
  input_norm.collect(out);
  latent_norm.collect(out);
  cross.collect(out);
  ffn_norm.collect(out);
  ffn.collect(out);
  for (auto& block : blocks) block->collect(out);
  out_norm.collect(out);
  head.collect(out);
}

void Perceiver::save(const std::string& path, const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> metadata = extra;
  metadata[kFormatKey] = kFormat;
  metadata[kConfigKey] = config_json(config_);
  nn::save_parameters(path, parameters(), metadata);
}

std::unique_ptr<Perceiver> Perceiver::load(const std::string& path,
                                           std::map<std::string, std::string>* metadata) {
  const SafetensorsFile file = read_safetensors(path);
  const auto format = file.metadata.find(kFormatKey);
  const auto config = file.metadata.find(kConfigKey);
  if (format == file.metadata.end() || format->second != kFormat)
    throw Error(path + " is not a Perceiver saved by qkv train --model perceiver: its metadata " +
                    (format == file.metadata.end()
                         ? std::string("has no \"format\"")
                         : "'s format is \"" + format->second.substr(0, 40) + "\"") +
                    "; expected \"" + kFormat + "\"",
                Error::Kind::runtime);
  if (config == file.metadata.end())
    throw Error(path + ": its metadata has format \"" + kFormat + "\" but no " +
                    std::string(kConfigKey) +
                    "; expected the model's config, as qkv train saves it",
                Error::Kind::runtime);
  const PerceiverConfig c = config_from_json(config->second, path);
  // A config that lies about its sizes must not allocate what the file does not hold: the model
  // has at least its latents, its embedding and the cross-attention's four d × d projections.
  const double d = static_cast<double>(c.d_model);
  const double at_least = static_cast<double>(c.latents + c.vocab) * d + 4 * d * d;
  double held = 0;
  for (const auto& [name, t] : file.tensors) held += static_cast<double>(t.numel());
  if (at_least > held)
    throw Error(path + ": the metadata's " + std::string(kConfigKey) +
                    " describes more numbers than the file holds",
                Error::Kind::runtime);
  const auto first = file.tensors.find("latents");
  const DType dtype = first != file.tensors.end() ? first->second.dtype() : DType::f32;
  nn::Rng rng(0);
  auto model = std::make_unique<Perceiver>(c, rng, dtype);
  std::map<std::string, std::string> m = nn::load_parameters(path, model->parameters());
  if (metadata) *metadata = std::move(m);
  return model;
}

bool is_perceiver_file(const std::string& path) {
  // Only *.safetensors files are opened: a GGUF model of hundreds of MB is never read here.
  const std::string ext = ".safetensors";
  if (path.size() <= ext.size() || path.compare(path.size() - ext.size(), ext.size(), ext) != 0)
    return false;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  try {
    const SafetensorsFile file = read_safetensors(path);
    const auto format = file.metadata.find(kFormatKey);
    return format != file.metadata.end() && format->second == kFormat;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace qkv
