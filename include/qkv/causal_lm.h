// qkv/causal_lm.h — a decoder-only language model from one GGUF file of the architectures
// supported_gguf_architectures() names (llama, qwen2, qwen3, gemma3; SmolLM2-135M is the default),
// run exactly on its dequantized weights.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qkv/attention.h"
#include "qkv/residual.h"
#include "qkv/tensor.h"

namespace qkv {

// Where scripts/fetch_model smollm2 puts SmolLM2-135M-Instruct's GGUF file, under $QKV_HOME.
std::string default_causal_lm_path();

// How load_weights keeps a model's matrices. file: as the GGUF file stores them (Q4_1, Q4_K,
// …), multiplied on their blocks — about the file's size in memory; float32: dequantized at load,
// 4 bytes a parameter and a packed copy besides. Both give the same bits wherever a pass runs in
// float32 (a captured pass, a prompt); generate's decode may run int8 on the blocks
// (GenerateOptions::product).
enum class WeightFormat { file, float32 };
// How a pass of few rows (decode) multiplies matrices kept as blocks: int8 — the rows quantized to
// 8 bits per 32 values, integer dot products, as llama.cpp computes (fast); float32 — every block
// dequantized, the bits of the float32 path (exact).
enum class DecodeProduct { int8, float32 };

struct GenerateOptions {
  int64_t max_tokens = 64;  // new tokens at most
  double temperature = 0;   // 0: greedy (the most likely token); else sample softmax(logits / T)
  uint64_t seed = 1;        // of the sampling
  bool stop_at_eos = true;  // false: go on past the tokens that end generation (benchmarks)
  // The passes of the new tokens on blocks (the prompt's pass runs float32: the first token is
  // the float32 path's).
  DecodeProduct product = DecodeProduct::int8;
};

struct TokenizeOptions {
  // Leave out a character whose bytes the vocabulary has no token for, as Hugging Face and
  // llama.cpp do, instead of refusing it: for a text whose exact ids do not matter (a benchmark's
  // prompt).
  bool drop_unspelled = false;
};

// How RoPE pairs the dimensions of a head it rotates (llama.cpp's rope types): llama's GGUF files
// keep adjacent pairs (2i, 2i + 1), their converter having permuted W_Q and W_K to make it so;
// the others (Qwen, Gemma: GPT-NeoX's way, Hugging Face's rotate_half) pair i with i + r/2.
enum class RopePairing { adjacent, halves };

// A decoder's sizes and what its architecture (general.architecture: llama, qwen2, qwen3, gemma3)
// changes in it, from its GGUF file's metadata (models/llama/config.cpp).
struct LlamaConfig {
  std::string architecture = "llama";
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
  int64_t context = 0;  // positions it reads at most ({arch}.context_length)
  double eps = 1e-5, rope_base = 10000;
  bool tied_output = true;  // no output.weight: the logits reuse the embedding

  // ---- what the architecture changes (attention_features says it in words) ----
  RopePairing rope_pairing = RopePairing::adjacent;
  int64_t rope_dims = 0;     // dimensions of a head RoPE turns, from the first (≤ head_dim)
  double rope_scale = 1;     // linear scaling: positions × 1/factor ({arch}.rope.scaling.factor)
  bool rope_factors = false;  // rope_freqs.weight: Llama 3.1's divisor of each frequency
  bool qkv_bias = false;      // q, k and v add a bias (qwen2)
  bool qk_norm = false;       // RMSNorm over each head's q and k before RoPE (qwen3, gemma3)
  double attention_scale = 0;  // the scores' scale: 1/√head_dim
  // Sliding-window layers attend to the last `sliding_window` positions only (the query's own
  // among them), with their own RoPE base (gemma3: 5 layers of 6, base 10000, no scaling).
  int64_t sliding_window = 0;
  std::vector<bool> sliding;  // per layer; empty: none slides
  double rope_base_sliding = 10000;
  // Gemma: the embedding × √hidden, GeGLU (GELU, tanh form) for SwiGLU, and an RMSNorm on the
  // attention's and the feed-forward's outputs before each is added to the stream.
  double embedding_scale = 1;
  bool gelu = false;
  bool post_norms = false;
  double final_softcap = 0;  // logits = c·tanh(logits / c) where c > 0 (gemma3.final_logit_softcapping)
};

// The architectures qkv runs, as general.architecture names them.
const std::vector<std::string>& supported_gguf_architectures();
// What the architecture does to attention beyond Llama's plain form, one short phrase each, as the
// explain views say it: "q, k, v biases", "RMSNorm on each head's q and k before RoPE", "sliding
// window of 512 on 5 of every 6 layers", "4 query heads share each key/value head", ...
std::vector<std::string> attention_features(const LlamaConfig& config);

class GgufFile;       // core/gguf.h
struct LlamaWeights;  // models/llama/llama.h
class GgufTokenizer;  // models/text/gguf_tokenizer.h
class ChatTemplate;   // models/text/chat_template.h

// A decoder from one GGUF file (llama, qwen2, qwen3 or gemma3: LlamaConfig says what each
// changes), run on its weights as the file stores them or dequantized (WeightFormat), with its
// tokenizer (byte-level BPE or
// SentencePiece, as tokenizer.ggml.model says) and chat template from the same file
// (models/llama/llama.h says what it computes).
class CausalLM {
 public:
  // Reads and checks the file's header — the metadata, the tokenizer, the chat template and the
  // table of tensors, each tensor the config needs present and of its shape — but none of the
  // weights: what the model will need in memory (resident_bytes, generate_bytes, capture_bytes)
  // is known before they are read, so that a caller can refuse a model too large for its limit
  // having read a few MB of it. tokenize and chat_prompt work at once; generate, capture and
  // logits need load_weights(). "smollm2" means default_causal_lm_path(). Errors (Kind::runtime)
  // name the file and what is wrong; a missing default model says how to fetch it.
  static CausalLM open(const std::string& path);
  // Reads the weights, keeps them as weight_format() says (the matrices as the file's blocks, or
  // dequantized and packed), checks them (finite), and closes the file; a second call does
  // nothing. Errors as open's.
  void load_weights();
  // How load_weights keeps the matrices (default WeightFormat::file); set before it (a qkv::Error
  // after, unless the same). resident_bytes and the other estimates follow it.
  void set_weight_format(WeightFormat format);
  WeightFormat weight_format() const { return format_; }
  // The ggml types of the model's matrices as the file stores them, the most common first:
  // "Q4_1 (210 matrices), Q8_0 (1)".
  const std::string& matrix_types() const { return matrix_types_; }
  // open(path), then load_weights().
  static CausalLM load(const std::string& path);

  // The ids of a text, as Hugging Face's tokenizer gives them (byte-level BPE with the file's
  // pre-tokenizer, or SentencePiece; BOS and EOS where the file says so) — but a character the
  // vocabulary cannot spell (no byte token, no byte fallback) is a qkv::Error naming it, where
  // Hugging Face and llama.cpp leave it out unsaid or write <unk> (SmolLM2 lacks 21 of the 256
  // byte tokens, e.g. U+0004; a tiny vocabulary may lack most).
  std::vector<int32_t> tokenize(std::string_view text, const TokenizeOptions& options = {}) const;
  std::string token_text(int32_t id) const;  // the bytes a token stands for
  // The text a generated token adds: its bytes, but nothing for a control token (<|im_start|>,
  // <|endoftext|>: markup of the model's format, never text; llama.cpp's detokenizer does the
  // same unless asked for special tokens).
  std::string generated_text(int32_t id) const;
  // Whether generating `id` ends the text: the end-of-text, end-of-turn and end-of-message ids
  // the file states, and any token spelled as an end marker (<|endoftext|>, <|im_end|>,
  // <|eot_id|>, </s>, ...), as llama.cpp's end-of-generation tokens.
  bool ends_generation(int32_t id) const;
  // The prompt as the model's chat template (tokenizer.chat_template) frames one user message
  // after a system message — `system`, or when that is empty the template's own default — with
  // the generation prompt: the text Hugging Face's apply_chat_template(messages,
  // add_generation_prompt=True, tokenize=False) gives. For SmolLM2 and no `system`:
  //   "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging
  //   Face<|im_end|>\n<|im_start|>user\n" user "<|im_end|>\n<|im_start|>assistant\n"
  // qkv knows the families ChatML, Llama 3, Gemma, Mistral, Llama 2 and Phi-3
  // (models/text/chat_template.h), without the BOS text the template writes first (tokenize adds
  // BOS): a model whose template is another, or that has none, or one over 1 MiB, a system message
  // its template has no place for, or a vocabulary lacking the family's markers as control (or
  // user-defined) tokens, is a qkv::Error (Kind::runtime) naming the file.
  std::string chat_prompt(std::string_view user, std::string_view system = {}) const;
  // Continues `prompt` one token at a time (a KV cache: each step runs one position); calls
  // on_token(id) as each comes; stops at a token that ends generation (ends_generation; not
  // passed to on_token nor returned), at max_tokens, or when the prompt
  // and the new tokens fill the context (context_length() positions). Returns the new ids. A
  // prompt longer than the context is a qkv::Error; so are next-token logits that come out NaN or
  // ±∞ (Kind::runtime: the weights overflow float32), never a token chosen from them.
  std::vector<int32_t> generate(const std::vector<int32_t>& prompt, const GenerateOptions& options,
                                const std::function<void(int32_t)>& on_token = {}) const;
  // One pass over `ids` with every layer's attention captured ([1, H, n, ·]; k and v [1, Hkv, n,
  // ·], q and k after RoPE). Returns the logits, [n, vocab].
  Tensor capture(const std::vector<int32_t>& ids, std::vector<AttentionCapture>& layers) const;
  // The same pass on the fast path, for a long input: each layer's q, k, v, head outputs and its
  // rows' softmax (saved_max, saved_sum), no scores, logits or weights — O(n·d) a layer; any weight
  // is recomputed exactly from them (qkv/attention_weights.h). Returns the last position's
  // logits, [1, vocab].
  Tensor capture_rows(const std::vector<int32_t>& ids, std::vector<AttentionCapture>& layers) const;
  // One pass over `ids` on the fast path (the fused attention kernel); the logits, [n, vocab].
  Tensor logits(const std::vector<int32_t>& ids) const;
  // The next-token logits as generate computes them, [tokens.size() + 1, vocab]: after the prompt
  // (one pass, float32), then after each of `tokens` fed one pass a token with the cache — the decode of a
  // given continuation, so that two products can be compared step by step on the same tokens.
  Tensor step_logits(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens,
                     DecodeProduct product) const;
  // The model as a qkv::ResidualModel, layer by layer with hooks, sharing these weights: what the
  // causal lens (qkv/explain_lens.h) intervenes on. Needs load_weights().
  std::shared_ptr<const ResidualModel> residual() const;

  // What the work needs at its peak, in bytes: the whole process, this model as loaded included
  // (qkv/memory.h), known from the header alone (open). capture() of `tokens` tokens: every layer's
  // scores, logits and weights (tokens² a head and layer) and the logits of every position.
  int64_t capture_bytes(int64_t tokens) const;
  // capture_rows() of `tokens` tokens: every layer's q, k and v (k and v repeated to every head
  // by explain), head outputs and row softmax; one pass's activations.
  int64_t capture_rows_bytes(int64_t tokens) const;
  // generate() (and logits()) up to `positions` positions, prompt and new tokens together: the
  // KV cache at its largest and one pass's activations over the prompt.
  int64_t generate_bytes(int64_t positions) const;
  // load_weights() itself: the process with the model loaded, before any work.
  int64_t load_bytes() const;
  // The weights as they sit in memory once loaded (as weight_format() keeps them: the file's
  // blocks, or float32 with packed copies) and the tokenizer.
  int64_t resident_bytes() const;
  // The weights alone, as weight_format() keeps them (resident_bytes less the tokenizer).
  int64_t weight_bytes() const { return weight_bytes_[static_cast<int>(format_)]; }

  const std::string& path() const { return path_; }
  const LlamaConfig& config() const { return *config_; }
  // Positions the model reads at most ({arch}.context_length): prompt and generated tokens
  // together.
  int64_t context_length() const;

 private:
  std::string path_;
  std::shared_ptr<const LlamaConfig> config_;
  std::shared_ptr<const LlamaWeights> weights_;
  std::shared_ptr<const GgufTokenizer> tokenizer_;
  std::shared_ptr<const ChatTemplate> chat_template_;
  std::vector<int32_t> end_ids_;  // ends_generation's
  // Open, the weights not yet loaded: the file they are read from (its header in memory).
  std::shared_ptr<const GgufFile> file_;
  WeightFormat format_ = WeightFormat::file;
  int64_t weight_bytes_[2] = {0, 0};  // by WeightFormat, from the header
  std::string matrix_types_;

  void require_weights(const char* what) const;
};

}  // namespace qkv
