// What both architectures share: the batches, the base class, saving and loading.
#include <algorithm>
#include <cmath>

#include "core/safetensors.h"
#include "qkv/model.h"
#include "rnnsearch.h"
#include "transformer.h"

namespace qkv {

namespace {

constexpr const char* kFormatKey = "format";
constexpr const char* kFormat = "qkv-seq2seq";
constexpr const char* kConfigKey = "qkv.config";

// The metadata's "format" as a message quotes it: at most 40 bytes (it is any string of the file).
std::string shown_format(const std::string& format) {
  return "\"" + (format.size() > 40 ? format.substr(0, 37) + "..." : format) + "\"";
}

// Token ids padded to `length` with PAD.
std::vector<int32_t> padded(std::vector<int32_t> ids, int64_t length) {
  ids.resize(static_cast<std::size_t>(length), Vocabulary::kPad);
  return ids;
}

// The fewest numbers a model of config `c` holds, whatever its attention variants: a config that
// lies about its sizes must not allocate what the file does not hold.
double fewest_parameters(const Seq2SeqConfig& c) {
  const double d = static_cast<double>(c.d_model), h = static_cast<double>(c.hidden());
  const double vocab = static_cast<double>(Vocabulary(c.characters).size());
  if (c.architecture == Seq2SeqArchitecture::rnnsearch)
    // Two embeddings and the output (vocabulary × d), the decoder GRU's W and U (3d × 2d, 3d × d).
    return 3 * vocab * d + 9 * d * d;
  // The query projections of the 3·layers attentions (d × d), the two weights of the 2·layers
  // FFNs (d × hidden), the embedding and the output (vocabulary × d).
  return static_cast<double>(c.layers) * (3 * d * d + 4 * d * h) + 2 * vocab * d;
}

}  // namespace

std::string_view to_string(Seq2SeqArchitecture architecture) {
  return architecture == Seq2SeqArchitecture::rnnsearch ? "rnnsearch" : "transformer";
}

std::optional<Seq2SeqArchitecture> parse_architecture(std::string_view name) {
  if (name == "transformer") return Seq2SeqArchitecture::transformer;
  if (name == "rnnsearch") return Seq2SeqArchitecture::rnnsearch;
  return std::nullopt;
}

Batch make_batch(const Vocabulary& vocab, const std::vector<Example>& examples) {
  Batch b;
  b.size = static_cast<int64_t>(examples.size());
  std::vector<std::vector<int32_t>> src, tgt;
  for (const Example& e : examples) {
    src.push_back(vocab.encode(e.source));
    tgt.push_back(vocab.encode(e.target));
    b.source_length = std::max<int64_t>(b.source_length, static_cast<int64_t>(src.back().size()));
    b.target_length =
        std::max<int64_t>(b.target_length, static_cast<int64_t>(tgt.back().size()) + 1);
  }
  b.target_out.assign(static_cast<std::size_t>(b.size * b.target_length), -1);
  for (int64_t i = 0; i < b.size; ++i) {
    const auto& s = src[static_cast<std::size_t>(i)];
    const auto& t = tgt[static_cast<std::size_t>(i)];
    b.source_lengths.push_back(static_cast<int64_t>(s.size()));
    b.source.push_back(padded(s, b.source_length));
    std::vector<int32_t> in{Vocabulary::kBos};
    in.insert(in.end(), t.begin(), t.end());
    b.target_lengths.push_back(static_cast<int64_t>(in.size()));
    b.target_in.push_back(padded(in, b.target_length));
    for (std::size_t j = 0; j <= t.size(); ++j)
      b.target_out[static_cast<std::size_t>(i * b.target_length) + j] =
          j < t.size() ? t[j] : Vocabulary::kEos;
    b.source_tokens += static_cast<int64_t>(s.size());
    b.target_tokens += static_cast<int64_t>(t.size()) + 1;
  }
  return b;
}

Seq2Seq::Seq2Seq(const Seq2SeqConfig& config)
    : config_((config.validate(), config)), vocab_(config.characters) {}

Seq2Seq::Decoded Seq2Seq::greedy_decode(const std::vector<std::string>& sources,
                                        int alignment_layer, int64_t batch_size) {
  Decoded result;
  for (std::size_t first = 0; first < sources.size();
       first += static_cast<std::size_t>(batch_size)) {
    const std::size_t last = std::min(sources.size(), first + static_cast<std::size_t>(batch_size));
    std::vector<Example> chunk;
    for (std::size_t i = first; i < last; ++i) chunk.push_back({sources[i], ""});
    decode_batch(make_batch(vocab_, chunk), alignment_layer, result);
  }
  return result;
}

std::vector<int32_t> Seq2Seq::begin_capture(const std::string& source, Seq2SeqCapture& c) {
  const Decoded decoded = greedy_decode({source});
  const std::vector<int32_t>& ids = decoded.ids[0];
  c.source = source;
  c.output = decoded.outputs[0];
  for (const int32_t id : vocab_.encode(source)) c.source_tokens.push_back(vocab_.token(id));
  std::vector<int32_t> target_in{Vocabulary::kBos};
  target_in.insert(target_in.end(), ids.begin(), ids.end() - 1);
  for (const int32_t id : target_in) c.target_tokens.push_back(vocab_.token(id));
  for (const int32_t id : ids) c.output_tokens.push_back(vocab_.token(id));
  return target_in;
}

std::shared_ptr<const ResidualModel> Seq2Seq::residual(const std::string& /*source*/) {
  throw Error(std::string(to_string(config_.architecture)) +
                  " keeps no residual stream (a GRU's state is not a sum of its layers' "
                  "outputs), so its heads cannot be ablated or attributed; expected a transformer "
                  "model (qkv train --arch transformer)",
              Error::Kind::invalid_argument);
}

std::unique_ptr<Seq2Seq> make_seq2seq(const Seq2SeqConfig& config, nn::Rng& rng, DType dtype) {
  if (config.architecture == Seq2SeqArchitecture::rnnsearch)
    return std::make_unique<RnnSearch>(config, rng, dtype);
  return std::make_unique<TransformerSeq2Seq>(config, rng, dtype);
}

void Seq2Seq::save(const std::string& path, const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> metadata = extra;
  metadata[kFormatKey] = kFormat;
  metadata[kConfigKey] = config_to_metadata(config_);
  nn::save_parameters(path, parameters(), metadata);
}

std::unique_ptr<Seq2Seq> Seq2Seq::load(const std::string& path,
                                       std::map<std::string, std::string>* metadata) {
  const SafetensorsFile file = read_safetensors(path);
  const auto format = file.metadata.find(kFormatKey);
  const auto config = file.metadata.find(kConfigKey);
  // What the file is, said before anything else is read from it: a BERT checkpoint has no format,
  // a Perceiver or another program's file another one.
  const std::string expected = std::string("; expected \"") + kFormat +
                               "\" (a model saved by qkv train), or \"qkv-perceiver\" (qkv train "
                               "--model perceiver)";
  if (format == file.metadata.end())
    throw Error(path + " is not a model saved by qkv train: its metadata has no \"format\"" +
                expected);
  if (format->second != kFormat)
    throw Error(path + " is not a model saved by qkv train: its metadata's format is " +
                shown_format(format->second) + expected);
  if (config == file.metadata.end())
    throw Error(path + ": its metadata has format \"" + kFormat + "\" but no " +
                std::string(kConfigKey) + "; expected the model's config, as qkv train saves it");
  const Seq2SeqConfig c = config_from_metadata(config->second, path);
  const double at_least = fewest_parameters(c);
  const double vocab = static_cast<double>(Vocabulary(c.characters).size());
  double held = 0;
  for (const auto& [name, t] : file.tensors) held += static_cast<double>(t.numel());
  if (at_least > held)
    throw Error(
        path + ": the metadata's " + std::string(kConfigKey) + " describes a model of at least " +
        grouped(static_cast<int64_t>(at_least)) + " numbers (layers " + std::to_string(c.layers) +
        ", d_model " + std::to_string(c.d_model) + ", ffn_hidden " + std::to_string(c.hidden()) +
        ", vocabulary " + std::to_string(static_cast<int64_t>(vocab)) + ") but the file holds " +
        grouped(static_cast<int64_t>(held)) + "; expected the config the weights were saved with");
  // The dtype the weights were saved in (load_parameters checks that every tensor agrees).
  const DType dtype = file.tensors.empty() ? DType::f32 : file.tensors.begin()->second.dtype();
  nn::Rng rng(0);
  auto model = make_seq2seq(c, rng, dtype);
  std::map<std::string, std::string> m = nn::load_parameters(path, model->parameters());
  if (metadata) *metadata = std::move(m);
  return model;
}

}  // namespace qkv
