// CausalLM (qkv/model.h): a GGUF decoder and its tokenizer, loaded together; generation.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>

#include "core/gguf.h"
#include "models/llama/llama.h"
#include "models/text/gguf_tokenizer.h"
#include "models/text/chat_template.h"
#include "qkv/model.h"

namespace qkv {
namespace {

// "Q4_1 (210 matrices), Q8_0 (1)": the types of the model's matrices, the most common first.
std::string types_of_matrices(const GgufFile& f, const LlamaConfig& c) {
  std::map<std::string, int64_t> count;
  for_each_llama_tensor(c, [&](const std::string& name, const Shape& shape) {
    if (shape.size() == 2 && (name != "output.weight" || !c.tied_output))
      ++count[ggml_type_name(f.info(name).type)];
  });
  std::vector<std::pair<std::string, int64_t>> by(count.begin(), count.end());
  std::stable_sort(by.begin(), by.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string s;
  for (std::size_t i = 0; i < by.size(); ++i)
    s += (i == 0 ? "" : ", ") + by[i].first + " (" + std::to_string(by[i].second) +
         (i == 0 ? by[i].second == 1 ? " matrix" : " matrices" : "") + ")";
  return s;
}

// The next-token logits must be finite: weights that overflow float32 make NaN or ±∞, and a choice
// among them (argmax picks id 0 when every comparison with NaN fails) is garbage, not a token.
void require_finite_logits(const float* z, int64_t vocab, std::size_t generated) {
  for (int64_t v = 0; v < vocab; ++v)
    if (!std::isfinite(z[v]))
      throw Error(std::string("the next-token logits ") +
                      (generated == 0 ? "of the prompt"
                                      : "after " + std::to_string(generated) + " generated token" +
                                            (generated == 1 ? "" : "s")) +
                      " came out " +
                      (std::isnan(z[v]) ? "NaN"
                       : z[v] > 0       ? "+∞"
                                        : "−∞") +
                      "; the model computes non-finite numbers (its weights overflow float32 or "
                      "are corrupt), so there is no next token to choose",
                  Error::Kind::runtime);
}

// The ids whose generation ends the text, as llama.cpp decides them (llama-vocab.cpp, its
// end-of-generation set): the end-of-text, end-of-turn and end-of-message ids the file states
// (tokenizer.ggml.eos_token_id, eot_token_id, eom_token_id; the fill-in-the-middle padding and
// separators too), and every token spelled as one of the end markers in use, whichever ids the
// file states: SmolLM2 states <|im_end|> as its end of text, but a model run without its chat
// template ends a document with <|endoftext|>, which a reader must not see as text.
std::vector<int32_t> end_of_generation_ids(const GgufFile& f, const GgufTokenizer& tokenizer) {
  std::vector<int32_t> ids;
  const auto add = [&](int32_t id) {
    if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  // GgufTokenizer::from_gguf has checked that each stated id is a token of the vocabulary.
  for (const char* which : {"eos", "eot", "eom", "fim_pad", "fim_rep", "fim_sep"}) {
    const std::string key = std::string("tokenizer.ggml.") + which + "_token_id";
    if (f.has(key)) add(f.meta(key).get<int32_t>());
  }
  for (const char* marker : {"<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>",
                             "<|end_of_text|>", "<|end|>", "<end_of_turn>", "<EOT>", "</s>"})
    add(tokenizer.id_of(marker));
  return ids;
}

}  // namespace

std::string default_causal_lm_path() {
  return (std::filesystem::path(default_model_dir()).parent_path() /
          "SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
      .string();
}

CausalLM CausalLM::open(const std::string& path) {
  const std::string file = path == "smollm2" ? default_causal_lm_path() : path;
  if (path == "smollm2" && !std::filesystem::exists(file))
    throw Error("the model SmolLM2-135M-Instruct is not installed (looked for " + file +
                    "); run scripts/fetch_model smollm2",
                Error::Kind::runtime);
  auto f = std::make_shared<const GgufFile>([&] {
    try {
      return GgufFile::open(file);
    } catch (const Error& e) {
      throw Error(e.what(), Error::Kind::runtime);
    }
  }());
  CausalLM m;
  m.path_ = file;
  m.config_ = std::make_shared<const LlamaConfig>(read_llama_config(*f));
  m.tokenizer_ = std::make_shared<const GgufTokenizer>(GgufTokenizer::from_gguf(*f));
  // A template that is absent, or not a string, leaves chat_prompt nothing to follow; plain
  // generation needs none.
  const bool has_template =
      f->has("tokenizer.chat_template") && f->meta("tokenizer.chat_template").is_string();
  m.chat_template_ = std::make_shared<const ChatTemplate>(ChatTemplate::parse(
      has_template ? f->meta("tokenizer.chat_template").get<std::string>() : std::string()));
  m.end_ids_ = end_of_generation_ids(*f, *m.tokenizer_);
  for (const WeightFormat format : {WeightFormat::file, WeightFormat::float32})
    m.weight_bytes_[static_cast<int>(format)] = llama_weight_bytes(*f, *m.config_, format);
  m.matrix_types_ = types_of_matrices(*f, *m.config_);
  m.file_ = std::move(f);
  return m;
}

void CausalLM::set_weight_format(WeightFormat format) {
  if (weights_ && format != format_)
    throw Error("CausalLM::set_weight_format: " + path_ +
                "'s weights are loaded already; set the format before load_weights()");
  format_ = format;
}

void CausalLM::load_weights() {
  if (weights_) return;
  weights_ = std::make_shared<const LlamaWeights>(read_llama_weights(*file_, *config_, format_));
  file_.reset();  // closes the file: everything is read
}

CausalLM CausalLM::load(const std::string& path) {
  CausalLM m = open(path);
  m.load_weights();
  return m;
}

bool CausalLM::ends_generation(int32_t id) const {
  return std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end();
}

std::string CausalLM::generated_text(int32_t id) const {
  // A control token is markup of the model's format (<|im_start|>, <|endoftext|>), not text: as
  // llama.cpp's detokenizer without `special`, it stands for nothing in what was generated. The
  // end markers count as control tokens whatever type the file gives them, as llama.cpp has it.
  if (tokenizer_->type(id) == TokenType::control || ends_generation(id)) return {};
  return tokenizer_->token_text(id);
}

std::vector<int32_t> CausalLM::tokenize(std::string_view text,
                                        const TokenizeOptions& options) const {
  // A character the vocabulary cannot spell is refused, not dropped as Hugging Face and llama.cpp
  // drop it: a model that never saw part of its prompt answers another question.
  return tokenizer_->encode(text, options.drop_unspelled ? GgufTokenizer::Unspelled::drop
                                                         : GgufTokenizer::Unspelled::refuse);
}

std::string CausalLM::token_text(int32_t id) const { return tokenizer_->token_text(id); }

std::string CausalLM::chat_prompt(std::string_view user, std::string_view system) const {
  try {
    // The text leaves out the BOS the template writes first: tokenize adds BOS where the file
    // says add_bos (models/text/chat_template.h says why), so the ids hold one.
    std::string prompt = chat_template_->format(user, system);
    // The family's markers must be tokens the text cannot spell otherwise: a vocabulary without
    // them, or with them as normal tokens, encodes "<|im_start|>" as its characters, and the
    // model reads no turns at all.
    const std::vector<std::string> markers = chat_template_->markers();
    const std::string family = chat_family_name(chat_template_->family());
    std::string listed;
    for (std::size_t i = 0; i < markers.size(); ++i)
      listed += (i == 0 ? "" : i + 1 == markers.size() ? " and " : ", ") + markers[i];
    for (const std::string& marker : markers) {
      const int32_t id = tokenizer_->id_of(marker);
      const std::string uses = "its chat template uses " + marker + " but its vocabulary ";
      if (id < 0)
        throw Error(uses + "has no such token; expected " + family + "'s markers " + listed +
                        " as control tokens of its vocabulary",
                    Error::Kind::runtime);
      const TokenType type = tokenizer_->type(id);
      if (type != TokenType::control && type != TokenType::user_defined) {
        constexpr const char* kNames[] = {"an undefined",   "a normal",  "an unknown", "a control",
                                          "a user-defined", "an unused", "a byte"};
        const auto t = static_cast<int32_t>(type);
        throw Error(uses + "has it as " + (t >= 0 && t <= 6 ? kNames[t] : "a") + " token (id " +
                        std::to_string(id) + ", type " + std::to_string(t) +
                        "), which a text spells in characters; expected a control token "
                        "(tokenizer.ggml.token_type 3)",
                    Error::Kind::runtime);
      }
    }
    return prompt;
  } catch (const Error& e) {
    throw Error(path_ + ": " + e.what(), e.kind());
  }
}

std::vector<int32_t> CausalLM::generate(const std::vector<int32_t>& prompt,
                                        const GenerateOptions& options,
                                        const std::function<void(int32_t)>& on_token) const {
  require_weights("generate");
  if (prompt.empty()) throw Error("generate: an empty prompt; expected at least one token");
  if (!(options.temperature >= 0) || !std::isfinite(options.temperature))
    throw Error("generate: temperature " + std::to_string(options.temperature) +
                "; expected 0 (greedy) or a positive number");
  if (static_cast<int64_t>(prompt.size()) > config_->context)
    throw Error("generate: the prompt is " + std::to_string(prompt.size()) +
                " tokens; the model reads at most " + std::to_string(config_->context) +
                " (its context length)");
  std::mt19937_64 rng(options.seed);
  KvCache cache{.reserve = std::min<int64_t>(
                    config_->context, static_cast<int64_t>(prompt.size()) + options.max_tokens)};
  std::vector<int32_t> out;
  const cpu::QuantProduct product = options.product == DecodeProduct::int8
                                        ? cpu::QuantProduct::int8
                                        : cpu::QuantProduct::float32;
  // The prompt's pass in float32 whatever the product (a prompt of a few tokens would take int8,
  // and so would its one row of logits): the first token is the float32 path's, as the lens and
  // bench model's validation see it; only the new tokens' passes run `product`.
  Tensor logits = llama_forward(*weights_, *config_, prompt, cache, {.last_logits_only = true});
  while (static_cast<int64_t>(out.size()) < options.max_tokens && cache.length < config_->context) {
    const float* z = logits.data<float>();
    require_finite_logits(z, config_->vocab, out.size());
    int32_t next = 0;
    if (options.temperature == 0) {
      for (int32_t v = 1; v < config_->vocab; ++v)
        if (z[v] > z[next]) next = v;
    } else {
      float top = z[0];
      for (int64_t v = 1; v < config_->vocab; ++v) top = std::max(top, z[v]);
      std::vector<double> p(static_cast<std::size_t>(config_->vocab));
      for (int64_t v = 0; v < config_->vocab; ++v)
        p[static_cast<std::size_t>(v)] = std::exp((z[v] - top) / options.temperature);
      next = static_cast<int32_t>(std::discrete_distribution<int64_t>(p.begin(), p.end())(rng));
    }
    if (options.stop_at_eos && ends_generation(next)) break;
    out.push_back(next);
    if (on_token) on_token(next);
    logits = llama_forward(*weights_, *config_, {next}, cache, {.product = product});
  }
  return out;
}

int64_t CausalLM::context_length() const { return config_->context; }

void CausalLM::require_weights(const char* what) const {
  if (!weights_)
    throw Error(std::string("CausalLM::") + what + ": " + path_ +
                    " is open but its weights are not loaded; call load_weights() first",
                Error::Kind::runtime);
}

Tensor CausalLM::capture(const std::vector<int32_t>& ids,
                         std::vector<AttentionCapture>& layers) const {
  require_weights("capture");
  KvCache cache;
  return llama_forward(*weights_, *config_, ids, cache, {.capture = &layers});
}

Tensor CausalLM::capture_rows(const std::vector<int32_t>& ids,
                              std::vector<AttentionCapture>& layers) const {
  require_weights("capture_rows");
  KvCache cache;
  return llama_forward(*weights_, *config_, ids, cache,
                       {.capture = &layers, .capture_rows = true, .last_logits_only = true});
}

Tensor CausalLM::step_logits(const std::vector<int32_t>& prompt,
                             const std::vector<int32_t>& tokens, DecodeProduct product) const {
  require_weights("step_logits");
  if (prompt.empty()) throw Error("step_logits: an empty prompt; expected at least one token");
  const LlamaOptions options{.last_logits_only = true,
                             .product = product == DecodeProduct::int8 ? cpu::QuantProduct::int8
                                                                       : cpu::QuantProduct::float32};
  KvCache cache;
  const int64_t vocab = config_->vocab;
  Tensor out({static_cast<int64_t>(tokens.size()) + 1, vocab}, DType::f32);
  Tensor z = llama_forward(*weights_, *config_, prompt, cache, {.last_logits_only = true});
  for (std::size_t i = 0;; ++i) {
    std::copy_n(z.data<float>(), vocab, out.data<float>() + static_cast<int64_t>(i) * vocab);
    if (i == tokens.size()) break;
    z = llama_forward(*weights_, *config_, {tokens[i]}, cache, options);
  }
  return out;
}

Tensor CausalLM::logits(const std::vector<int32_t>& ids) const {
  require_weights("logits");
  KvCache cache;
  return llama_forward(*weights_, *config_, ids, cache);
}

}  // namespace qkv
