#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <numeric>

#include "core/dispatch.h"
#include "core/gguf.h"
#include "core/safetensors.h"
#include "models/bert/bert.h"
#include "models/text/tokenizer.h"
#include "qkv/model.h"

namespace qkv {

std::string default_model_dir() {
  const char* qkv_home = std::getenv("QKV_HOME");
  std::string root;
  if (qkv_home != nullptr && *qkv_home != '\0') {
    root = qkv_home;
  } else {
    const char* home = std::getenv("HOME");
    root = std::string(home != nullptr ? home : ".") + "/.cache/qkv";
  }
  return root + "/models/all-MiniLM-L6-v2";
}

SentenceModel SentenceModel::load(const std::string& dir, const SentenceModelOptions& options) {
  namespace fs = std::filesystem;
  if (options.max_length < 2)
    throw Error("max_length " + std::to_string(options.max_length) +
                " leaves no room for [CLS] and [SEP]; expected at least 2");
  if (options.batch_size < 1)
    throw Error("batch size " + std::to_string(options.batch_size) + "; expected at least 1");
  const std::pair<const char*, const InputSpec*> files[] = {
      {"config.json", &kBertConfigInput},
      {"model.safetensors", &kSafetensorsInput},
      {"vocab.txt", &kVocabInput}};
  for (const auto& [file, spec] : files) {
    // A FIFO, a device or a directory in the model's place is the caller's wrong input (exit 2),
    // refused before a byte is read; what the files hold is checked as they are read.
    if (fs::exists(fs::path(dir) / file)) {
      (void)InputFile(dir + "/" + file, *spec);
      continue;
    }
    if (dir == default_model_dir() && !fs::exists(dir))
      throw Error("the model all-MiniLM-L6-v2 is not installed (looked in " + dir +
                      "); install it with scripts/fetch_model (part of scripts/bootstrap), "
                      "or pass --model DIR",
                  Error::Kind::runtime);
    // A path that is not there at all was read as a folder missing its config.json.
    throw Error(
        dir + (fs::exists(dir) ? " has no " + std::string(file) : std::string(" does not exist")) +
            "; expected a BERT model directory (config.json, model.safetensors, vocab.txt)",
        Error::Kind::runtime);
  }
  BertConfig config = read_bert_config(dir + "/config.json");
  if (fs::exists(fs::path(dir) / "tokenizer_config.json"))
    check_bert_tokenizer_config(dir + "/tokenizer_config.json");
  // A model with fewer positions reads shorter texts (no option of the user's is wrong here).
  SentenceModelOptions used = options;
  used.max_length = std::min(options.max_length, static_cast<std::size_t>(config.max_positions));
  BertWeights weights = read_bert_weights(dir + "/model.safetensors", config);
  if (options.reference) weights = to(weights, DType::f64);
  WordPieceTokenizer tokenizer = [&] {
    try {
      return WordPieceTokenizer::from_vocab_file(dir + "/vocab.txt");
    } catch (const Error& e) {
      throw Error(e.what(), Error::Kind::runtime);
    }
  }();
  if (static_cast<int64_t>(tokenizer.size()) != config.vocab_size)
    throw Error(dir + "/vocab.txt has " + std::to_string(tokenizer.size()) +
                    " tokens but config.json says vocab_size " + std::to_string(config.vocab_size),
                Error::Kind::runtime);
  return SentenceModel(dir, config, std::make_shared<const BertWeights>(std::move(weights)),
                       std::make_shared<const WordPieceTokenizer>(std::move(tokenizer)), used);
}

SentenceModel::SentenceModel(std::string dir, BertConfig config,
                             std::shared_ptr<const BertWeights> weights,
                             std::shared_ptr<const WordPieceTokenizer> tokenizer,
                             SentenceModelOptions options)
    : dir_(std::move(dir)),
      config_(config),
      weights_(std::move(weights)),
      embed_weights_(options.precision == Precision::bf16
                         ? std::make_shared<const BertWeights>(round_dense_to_bf16(*weights_))
                         : weights_),
      tokenizer_(std::move(tokenizer)),
      options_(options) {}

SentenceModel SentenceModel::with_precision(Precision precision) const {
  SentenceModelOptions options = options_;
  options.precision = precision;
  return SentenceModel(dir_, config_, weights_, tokenizer_, options);
}

bool SentenceModel::is_cls_or_sep(int32_t id) const {
  return id == tokenizer_->cls_id() || id == tokenizer_->sep_id();
}

Encoding SentenceModel::tokenize(std::string_view text) const {
  return tokenizer_->encode(text, options_.max_length);
}

Encoding SentenceModel::tokenize_pair(std::string_view a, std::string_view b) const {
  return tokenizer_->encode_pair(a, b, options_.max_length);
}

Tensor SentenceModel::embed(const std::vector<std::string>& texts,
                            const std::function<void(std::size_t, std::size_t)>& progress) const {
  std::vector<std::vector<int32_t>> ids;
  ids.reserve(texts.size());
  for (const std::string& text : texts) ids.push_back(tokenize(text).ids());
  // Longest first, as sentence-transformers does: batches of similar lengths waste little padding.
  std::vector<std::size_t> order(texts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return ids[a].size() > ids[b].size(); });
  const DType dtype = weights_->word_embeddings.dtype();
  const int64_t hidden = config_.hidden_size;
  Tensor out({static_cast<int64_t>(texts.size()), hidden}, dtype);
  const std::size_t batch = static_cast<std::size_t>(options_.batch_size);
  for (std::size_t begin = 0; begin < order.size(); begin += batch) {
    const std::size_t end = std::min(order.size(), begin + batch);
    std::vector<std::vector<int32_t>> batch_ids;
    std::vector<int64_t> lengths;
    for (std::size_t i = begin; i < end; ++i) {
      batch_ids.push_back(ids[order[i]]);
      lengths.push_back(static_cast<int64_t>(batch_ids.back().size()));
    }
    const Tensor e = mean_pool_normalize(
        bert_encode(*embed_weights_, config_, batch_ids,
                    {.attention_path = options_.reference ? Path::reference : Path::automatic,
                     .precision = options_.precision}),
        lengths);
    for (std::size_t i = begin; i < end; ++i) {
      const int64_t row = static_cast<int64_t>(order[i]), from = static_cast<int64_t>(i - begin);
      dispatch_float(dtype, [&]<class T>(T) {
        std::copy_n(e.data<T>() + from * hidden, hidden, out.data<T>() + row * hidden);
      });
    }
    if (progress) progress(end, order.size());
  }
  return out;
}

Tensor SentenceModel::encode_captured(const Encoding& encoding, BertCapture& capture) const {
  const std::vector<int32_t> ids = encoding.ids();
  const std::vector<std::vector<int32_t>> types = {encoding.type_ids()};
  const Tensor hidden =
      bert_encode(*weights_, config_, {ids}, {.capture = &capture, .token_types = &types});
  return mean_pool_normalize(hidden, {static_cast<int64_t>(ids.size())});
}

double cosine(const Tensor& a, int64_t row_a, const Tensor& b, int64_t row_b) {
  const int64_t d = a.dim(1);
  if (b.dim(1) != d) throw Error("cosine: rows of different lengths");
  double dot = 0, na = 0, nb = 0;
  for (int64_t j = 0; j < d; ++j) {
    const double x = a.value(row_a * d + j), y = b.value(row_b * d + j);
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  // A zero row has no direction: 0. NaN in either row stays NaN (never a plausible 0).
  if (na == 0 || nb == 0) return 0.0;
  return dot / std::sqrt(na * nb);
}

}  // namespace qkv
