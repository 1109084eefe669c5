// models/text/pre_tokenizers.h — how a byte-level BPE vocabulary cuts text into the pieces that
// its merges work within, by the name a GGUF gives it (tokenizer.ggml.pre, llama.cpp's names).
//
// Each is the Split(regex, Isolated) of the model's tokenizer.json as Hugging Face's tokenizers
// runs it (Oniguruma), written out by hand over the classes of unicode_tables.h — \p{L} (L*),
// \p{N} (N*), \s (White_Space), other — with the alternatives tried in the regex's order. ␠ below
// is U+0020 alone.
//
//   smollm  Digits(individual_digits), then GPT-2's regex on each stretch between the digits
//           (SmolLM 1/2; llama.cpp's LLAMA_VOCAB_PRE_TYPE_SMOLLM: "\p{N}" then GPT-2's).
//   gpt2    GPT-2's regex alone ("gpt-2"; LLAMA_VOCAB_PRE_TYPE_GPT2):
//             's|'t|'re|'ve|'m|'ll|'d | ␠?\p{L}+ | ␠?\p{N}+ | ␠?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+
//           (contractions in lower case only).
//   llama3  Llama 3, 3.1, 3.2 ("llama-bpe", "llama3", "llama-v3"; LLAMA_VOCAB_PRE_TYPE_LLAMA3):
//             (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,3} |
//             ␠?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
//           The contractions in any case, as Oniguruma folds it: 'S, 'LL, and 'ſ (U+017F, whose
//           fold is s; llama.cpp's hand-written split, which lowers ASCII only, cuts 'ſ apart).
//   qwen2   Qwen 2, 2.5, 3 ("qwen2", "deepseek-r1-qwen"; LLAMA_VOCAB_PRE_TYPE_QWEN2): llama3's
//           regex with \p{N} alone, one digit a piece.
//
// Learned from llama.cpp's src/llama-vocab.cpp (the names and regexes) and src/unicode.cpp
// (unicode_regex_split_custom_llama3), checked against tokenizers on the goldens of
// tests/golden/bpe/ (tests/golden/make_bpe_pretokenizer_goldens.py).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qkv {

enum class PreTokenizer { smollm, gpt2, llama3, qwen2 };

// The pre-tokenizer a GGUF's tokenizer.ggml.pre names, or none when qkv does not know the name.
std::optional<PreTokenizer> pre_tokenizer_named(std::string_view name);
// Its first name above ("smollm", "gpt-2", "llama-bpe", "qwen2").
std::string_view pre_tokenizer_name(PreTokenizer p);
// The names pre_tokenizer_named reads, for a message: "\"smollm\", \"gpt-2\", ...".
std::string known_pre_tokenizer_names();

// Whether the vocabulary takes a piece that is itself a token whole, before any merge (the
// "ignore_merges" of Llama 3's tokenizer.json; llama.cpp sets it for LLAMA_VOCAB_PRE_TYPE_LLAMA3).
bool ignores_merges(PreTokenizer p);

// Whether the model's tokenizer.json puts the text in NFC before pre-tokenizing it (Qwen's
// "normalizer": {"type": "NFC"}; llama.cpp and transformers' GGUF loader skip it, so their ids
// differ from the model's own on text that is not in NFC, such as "e\u0301").
bool normalizes_to_nfc(PreTokenizer p);

// The pieces of `text` (UTF-8, checked by the caller; no special tokens) as the byte offset where
// each ends, in order: the last is text.size(), and none is empty.
std::vector<std::size_t> pre_tokenizer_cuts(PreTokenizer p, std::string_view text);

}  // namespace qkv
