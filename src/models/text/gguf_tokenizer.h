// models/text/gguf_tokenizer.h — the tokenizer a GGUF decoder declares (tokenizer.ggml.*):
// byte-level BPE (model "gpt2", models/text/bpe.h) or SentencePiece-style BPE (model "llama",
// models/text/spm.h), with the special ids and whether BOS / EOS go around a text.
//
// As llama.cpp reads them (src/llama-vocab.cpp, llama_vocab::impl::load):
//   tokenizer.ggml.add_bos_token  default true for "llama", false for "gpt2";
//   tokenizer.ggml.add_eos_token  default false;
//   tokenizer.ggml.bos_token_id / eos_token_id / unknown_token_id: for "llama", 1 / 2 / 0 when
//     absent (SentencePiece's defaults), for "gpt2" none; padding_token_id: none.
// Every tokenizer.ggml.*_token_id the file states must be a token of the vocabulary (an id outside
// it would never match, and generation would not stop at its end of text).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "models/text/bpe.h"
#include "models/text/spm.h"

namespace qkv {

class GgufFile;

class GgufTokenizer {
 public:
  using Unspelled = BpeTokenizer::Unspelled;

  // The file's tokenizer. Another tokenizer.ggml.model than "gpt2" or "llama" is a qkv::Error
  // naming it and the two qkv reads; a malformed vocabulary, a special id outside it, or add_bos
  // (add_eos) without a BOS (EOS) id, one naming the key.
  static GgufTokenizer from_gguf(const GgufFile& file);

  // The ids of a text, BOS first when add_bos() and EOS last when add_eos(), as llama.cpp's
  // tokenize with add_special and parse_special gives them (special tokens written in the text stay
  // whole). Text that is not UTF-8 is a qkv::Error; `unspelled` says what a character the
  // vocabulary cannot spell becomes (BpeTokenizer::Unspelled).
  std::vector<int32_t> encode(std::string_view text, Unspelled unspelled = Unspelled::drop) const;
  // The ids of a piece of text alone, without the BOS and EOS a whole text gets: a target token.
  std::vector<int32_t> encode_piece(std::string_view text, Unspelled unspelled) const;
  // The bytes the ids stand for (special tokens as they are spelled, BOS included; SentencePiece's
  // added prefix space dropped, spm.h).
  std::string decode(const std::vector<int32_t>& ids) const;
  // The bytes one token stands for: " the" for "Ġthe" and for "▁the", "\n" for "<0x0A>".
  std::string token_text(int32_t id) const;
  const std::string& token(int32_t id) const;   // as the vocabulary spells it
  int32_t id_of(std::string_view token) const;  // -1 if absent
  TokenType type(int32_t id) const;
  std::size_t size() const;

  int32_t bos() const { return bos_; }  // -1: none
  int32_t eos() const { return eos_; }
  int32_t unknown() const { return unknown_; }
  int32_t padding() const { return padding_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  const std::string& model() const { return model_; }  // "gpt2" or "llama"
  const std::string& pre() const { return pre_; }      // tokenizer.ggml.pre; "" if absent

  // The tokenizer inside, for what only one kind has (BpeTokenizer::pre_tokenize, scores).
  const BpeTokenizer* bpe() const { return std::get_if<BpeTokenizer>(&tokenizer_); }
  const SpmTokenizer* spm() const { return std::get_if<SpmTokenizer>(&tokenizer_); }

 private:
  explicit GgufTokenizer(std::variant<BpeTokenizer, SpmTokenizer> tokenizer)
      : tokenizer_(std::move(tokenizer)) {}

  std::variant<BpeTokenizer, SpmTokenizer> tokenizer_;
  std::string model_, pre_;
  int32_t bos_ = -1, eos_ = -1, unknown_ = -1, padding_ = -1;
  bool add_bos_ = false, add_eos_ = false;
};

// A GGUF's tokenizer metadata, each value checked to be of its type; a qkv::Error names the file,
// the key, what it holds and what was expected. Shared by the vocabularies above.
std::string gguf_string(const GgufFile& file, const std::string& key);
bool gguf_bool(const GgufFile& file, const std::string& key);
// An array of strings (`expected` describes it in the message).
std::vector<std::string> gguf_strings(const GgufFile& file, const std::string& key,
                                      const std::string& expected);
// An array of numbers, as float32 (the scores).
std::vector<float> gguf_floats(const GgufFile& file, const std::string& key);
// tokenizer.ggml.token_type: llama.cpp's types 0 to 6 (TokenType), one per token; empty when the
// file has none.
std::vector<int32_t> gguf_token_types(const GgufFile& file, const std::vector<std::string>& tokens);
// A token id: an integer from 0 to vocab − 1.
int32_t gguf_token_id(const GgufFile& file, const std::string& key, std::size_t vocab);

}  // namespace qkv
