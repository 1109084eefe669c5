// The tokenizer a GGUF declares; see gguf_tokenizer.h. The defaults are llama.cpp's
// (src/llama-vocab.cpp, llama_vocab::impl::load).
#include "models/text/gguf_tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "core/gguf.h"
#include "qkv/tensor.h"

namespace qkv {
namespace {

Error bad(const GgufFile& file, const std::string& key, const std::string& expected) {
  return Error(file.name() + ": metadata \"" + key + "\" is " + gguf_array_str(file.meta(key)) +
               "; expected " + expected);
}

// The id the file states under `key`, or `otherwise` when it states none.
int32_t stated_id(const GgufFile& file, const std::string& key, std::size_t vocab,
                  int32_t otherwise) {
  return file.has(key) ? gguf_token_id(file, key, vocab) : otherwise;
}

}  // namespace

std::string gguf_string(const GgufFile& file, const std::string& key) {
  const nlohmann::json& v = file.meta(key);
  if (!v.is_string()) throw bad(file, key, "a string");
  return v.get<std::string>();
}

bool gguf_bool(const GgufFile& file, const std::string& key) {
  const nlohmann::json& v = file.meta(key);
  if (!v.is_boolean()) throw bad(file, key, "a bool");
  return v.get<bool>();
}

std::vector<std::string> gguf_strings(const GgufFile& file, const std::string& key,
                                      const std::string& expected) {
  const nlohmann::json& v = file.meta(key);
  if (!v.is_array() ||
      !std::all_of(v.begin(), v.end(), [](const auto& x) { return x.is_string(); }))
    throw bad(file, key, expected);
  return v.get<std::vector<std::string>>();
}

std::vector<float> gguf_floats(const GgufFile& file, const std::string& key) {
  const nlohmann::json& v = file.meta(key);
  if (!v.is_array() ||
      !std::all_of(v.begin(), v.end(), [](const auto& x) { return x.is_number(); }))
    throw bad(file, key, "an array of numbers, one per token");
  std::vector<float> out;
  out.reserve(v.size());
  for (const auto& x : v) out.push_back(x.get<float>());
  return out;
}

std::vector<int32_t> gguf_token_types(const GgufFile& file,
                                      const std::vector<std::string>& tokens) {
  const std::string key = "tokenizer.ggml.token_type";
  if (!file.has(key)) return {};
  const nlohmann::json& v = file.meta(key);
  const std::string known =
      "llama.cpp's token types: 0 undefined, 1 normal, 2 unknown, 3 control, 4 user-defined, 5 "
      "unused, 6 byte";
  if (!v.is_array() ||
      !std::all_of(v.begin(), v.end(), [](const auto& x) { return x.is_number_integer(); }))
    throw bad(file, key, "an array of integers (" + known + ")");
  std::vector<int32_t> types;
  types.reserve(v.size());
  for (std::size_t id = 0; id < v.size(); ++id) {
    const nlohmann::json& type = v[id];
    if (type.is_number_unsigned() ? type.get<uint64_t>() <= 6
                                  : type.get<int64_t>() >= 0 && type.get<int64_t>() <= 6) {
      types.push_back(type.get<int32_t>());
      continue;
    }
    throw Error(file.name() + ": metadata \"" + key + "\" gives token " + std::to_string(id) +
                (id < tokens.size() ? " (" + gguf_value_str(tokens[id]) + ")" : "") + " the type " +
                type.dump() + "; expected 0 to 6 (" + known + ")");
  }
  return types;
}

int32_t gguf_token_id(const GgufFile& file, const std::string& key, std::size_t vocab) {
  const nlohmann::json& value = file.meta(key);
  const bool inside = value.is_number_integer() &&
                      (value.is_number_unsigned()
                           ? value.get<uint64_t>() < vocab
                           : value.get<int64_t>() >= 0 && value.get<int64_t>() < int64_t(vocab));
  if (!inside)
    throw Error(file.name() + ": metadata \"" + key + "\" is " + gguf_value_str(value) +
                "; expected a token id from 0 to " + std::to_string(vocab - 1) +
                " (the vocabulary holds " + std::to_string(vocab) + " tokens)");
  return value.get<int32_t>();
}

GgufTokenizer GgufTokenizer::from_gguf(const GgufFile& file) {
  const std::string model = gguf_string(file, "tokenizer.ggml.model");
  const std::string pre =
      file.has("tokenizer.ggml.pre") ? gguf_string(file, "tokenizer.ggml.pre") : "";
  const bool spm = model == "llama";
  if (model != "gpt2" && !spm)
    throw Error(file.name() + ": tokenizer.ggml.model \"" + model +
                "\"; qkv reads \"gpt2\" (byte-level BPE: Llama 3, Qwen, SmolLM) and \"llama\" "
                "(SentencePiece: Llama 2, Mistral, Gemma, Phi-3)");
  GgufTokenizer t(spm ? decltype(tokenizer_)(SpmTokenizer::from_gguf(file))
                      : decltype(tokenizer_)(BpeTokenizer::from_gguf(file)));
  t.model_ = model;
  t.pre_ = pre;
  const std::size_t vocab = t.size();
  // Every stated id a token: the byte-level reader checks its own; this checks them for both.
  const std::string prefix = "tokenizer.ggml.", suffix = "_token_id";
  for (const auto& [key, value] : file.metadata().items())
    if (key.size() > prefix.size() + suffix.size() && key.rfind(prefix, 0) == 0 &&
        key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0)
      gguf_token_id(file, key, vocab);
  // SentencePiece's own ids (<unk> 0, <s> 1, </s> 2) where a "llama" file states none, as
  // llama.cpp takes them; a vocabulary too small for them has none.
  const auto fallback = [&](int32_t id) { return spm && std::size_t(id) < vocab ? id : -1; };
  t.bos_ = stated_id(file, "tokenizer.ggml.bos_token_id", vocab, fallback(1));
  t.eos_ = stated_id(file, "tokenizer.ggml.eos_token_id", vocab, fallback(2));
  t.unknown_ = stated_id(file, "tokenizer.ggml.unknown_token_id", vocab, fallback(0));
  t.padding_ = stated_id(file, "tokenizer.ggml.padding_token_id", vocab, -1);
  const auto flag = [&](const std::string& key, bool otherwise) {
    return file.has(key) ? gguf_bool(file, key) : otherwise;
  };
  t.add_bos_ = flag("tokenizer.ggml.add_bos_token", spm);
  t.add_eos_ = flag("tokenizer.ggml.add_eos_token", false);
  for (const auto& [on, id, which] :
       {std::tuple{t.add_bos_, t.bos_, "bos"}, std::tuple{t.add_eos_, t.eos_, "eos"}})
    if (on && id < 0)
      throw Error(file.name() + ": metadata \"tokenizer.ggml.add_" + which +
                  "_token\" is true but the file states no tokenizer.ggml." + which +
                  "_token_id; expected the id of the token to add");
  return t;
}

std::vector<int32_t> GgufTokenizer::encode(std::string_view text, Unspelled unspelled) const {
  std::vector<int32_t> ids;
  if (add_bos_) ids.push_back(bos_);
  const std::vector<int32_t> body = encode_piece(text, unspelled);
  ids.insert(ids.end(), body.begin(), body.end());
  if (add_eos_) ids.push_back(eos_);
  return ids;
}

std::vector<int32_t> GgufTokenizer::encode_piece(std::string_view text,
                                                 Unspelled unspelled) const {
  return std::visit([&](const auto& t) { return t.encode(text, unspelled); }, tokenizer_);
}

std::string GgufTokenizer::decode(const std::vector<int32_t>& ids) const {
  return std::visit([&](const auto& t) { return t.decode(ids); }, tokenizer_);
}

std::string GgufTokenizer::token_text(int32_t id) const {
  return std::visit([&](const auto& t) { return t.token_text(id); }, tokenizer_);
}

const std::string& GgufTokenizer::token(int32_t id) const {
  return std::visit([&](const auto& t) -> const std::string& { return t.token(id); }, tokenizer_);
}

int32_t GgufTokenizer::id_of(std::string_view token) const {
  return std::visit([&](const auto& t) { return t.id_of(token); }, tokenizer_);
}

TokenType GgufTokenizer::type(int32_t id) const {
  return std::visit([&](const auto& t) { return t.type(id); }, tokenizer_);
}

std::size_t GgufTokenizer::size() const {
  return std::visit([](const auto& t) { return t.size(); }, tokenizer_);
}

}  // namespace qkv
