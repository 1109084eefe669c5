// qkv/model.h — the models qkv runs and captures: a pretrained BERT-family sentence encoder
// (all-MiniLM-L6-v2, from a model directory) and the encoder-decoder models `qkv train` makes
// (from one .safetensors file). Every attention layer of either can be captured as
// qkv::AttentionCapture (qkv/attention.h), which is what qkv/explain.h shows.
//
// Opening: model_kind(path) says which a path holds; SentenceModel::load(dir) and
// Seq2Seq::load(file) open them. Training: qkv/train.h.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qkv/attention.h"
#include "qkv/nn.h"
#include "qkv/tensor.h"

namespace qkv {

// ---- opening a model ----

enum class ModelKind {
  sentence_encoder,  // a directory: config.json, model.safetensors, vocab.txt (BERT family)
  seq2seq,           // a file: a model `qkv train` saved
  causal_lm,         // a GGUF file: a decoder-only language model (SmolLM2)
};
// What `path` names: a regular file that starts with GGUF's magic bytes, whatever its name (an
// Ollama blob has none), a file called *.gguf, or the name "smollm2" is a decoder LLM; a file
// called *.safetensors (not a directory) a model `qkv train` saved; anything else is taken for a
// model directory. Only a regular file's first four bytes are read (a FIFO or a device is neither
// waited on nor read; a missing path goes by its name): opening the model says what is wrong.
ModelKind model_kind(const std::string& path);

// ---- text: tokens ----

struct Token {
  int32_t id;
  std::string text;  // as in the vocabulary, e.g. "##ing"
  // [begin, end): the bytes of its own text (A or B of a pair) the token came from. [CLS] has the
  // empty span at 0, each [SEP] the empty span at the end of the text it closes.
  std::size_t begin = 0, end = 0;
  int segment = 0;  // BERT's token type: 0 for [CLS] A [SEP], 1 for B [SEP] of a pair
};

struct Encoding {
  std::vector<Token> tokens;
  bool truncated = false;  // pieces were dropped to fit max_length
  std::vector<int32_t> ids() const;
  std::vector<int32_t> type_ids() const;  // each token's segment
};

// ---- the pretrained sentence encoder ----
// a sentence encoder as sentence-transformers runs all-MiniLM-L6-v2:
// WordPiece tokens → BERT encoder → mean over the tokens → unit length. The model directory holds
// config.json, model.safetensors and vocab.txt of any BERT-family encoder.

struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 384;
  int64_t num_layers = 6;
  int64_t num_heads = 12;
  int64_t intermediate_size = 1536;
  int64_t max_positions = 512;
  int64_t type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  int64_t head_dim() const { return hidden_size / num_heads; }
};

// What the encoder computed, for every sequence, layer and head: each layer's attention
// (scaled-dot, scale 1/√D, logits −∞ at padding keys) and its output.
struct BertCapture {
  Tensor embeddings;                     // [B, L, hidden] h₀
  std::vector<AttentionCapture> layers;  // one per layer, [B, H, L, ·]
  std::vector<Tensor> hidden;            // one per layer, [B, L, hidden]: the layer's output
};

struct BertWeights;        // models/bert/bert.h
class WordPieceTokenizer;  // models/text/tokenizer.h

// Where scripts/fetch_model puts all-MiniLM-L6-v2: $QKV_HOME/models/all-MiniLM-L6-v2, QKV_HOME
// defaulting to ~/.cache/qkv.
std::string default_model_dir();

struct SentenceModelOptions {
  // Tokens per text, [CLS] and [SEP] included (sentence-transformers); cut to the model's
  // max_position_embeddings when that is smaller.
  std::size_t max_length = 256;
  int batch_size = 32;
  bool reference = false;  // run the whole encoder in float64 (the reference twin)
};

class SentenceModel {
 public:
  // Errors (Kind::runtime) name the missing or bad file; a missing default model says how to
  // install it.
  static SentenceModel load(const std::string& dir, const SentenceModelOptions& options = {});

  Encoding tokenize(std::string_view text) const;
  // [CLS] A [SEP] B [SEP], cut to max_length as BertTokenizer's 'longest_first' does.
  Encoding tokenize_pair(std::string_view a, std::string_view b) const;
  // Unit-length sentence embeddings [N, hidden] (float32; float64 when `reference`). Texts are
  // sorted by length and run `batch_size` at a time, so padding stays small; `progress` (if set)
  // hears (texts done, texts in all) after each batch.
  Tensor embed(const std::vector<std::string>& texts,
               const std::function<void(std::size_t, std::size_t)>& progress = {}) const;
  // One encoding (a text or a pair, its segments as token types) through the encoder with
  // everything captured (float64 attention); returns its mean-pooled, unit-length embedding.
  Tensor encode_captured(const Encoding& encoding, BertCapture& capture) const;

  // What the work needs at its peak, in bytes: the whole process, this model as loaded included
  // (qkv/memory.h says what an estimate covers). embed() of `texts` texts of `text_bytes` bytes in
  // all, the longest `longest_text` bytes (a text has at most as many tokens as bytes, plus [CLS]
  // and [SEP]): their ids, the embeddings and one batch's activations at the longest length, in
  // batches of `batch_size` (0: the model's own, options().batch_size).
  int64_t embed_bytes(int64_t texts, int64_t text_bytes, int64_t longest_text,
                      int64_t batch_size = 0) const;
  // encode_captured() of `tokens` tokens: every layer's q, k, v, scores, logits, weights and
  // outputs kept (L² a head and layer), and the float64 reference's working set of one layer.
  int64_t capture_bytes(int64_t tokens) const;
  // The weights as they sit in memory (packed copies included) and the vocabulary.
  int64_t resident_bytes() const;

  const std::string& dir() const { return dir_; }
  const BertConfig& config() const { return config_; }
  const BertWeights& weights() const { return *weights_; }
  const WordPieceTokenizer& tokenizer() const { return *tokenizer_; }
  const SentenceModelOptions& options() const { return options_; }

 private:
  SentenceModel(std::string dir, BertConfig config, std::shared_ptr<const BertWeights> weights,
                std::shared_ptr<const WordPieceTokenizer> tokenizer, SentenceModelOptions options);

  std::string dir_;
  BertConfig config_;
  std::shared_ptr<const BertWeights> weights_;           // models/bert/bert.h
  std::shared_ptr<const WordPieceTokenizer> tokenizer_;  // models/text/tokenizer.h
  SentenceModelOptions options_;
};

// cos(a, b) of two embedding rows: 0 when a row is all zeros, NaN when either holds NaN or ∞.
double cosine(const Tensor& a, int64_t row_a, const Tensor& b, int64_t row_b);

// ---- a decoder-only language model: SmolLM2-135M (GGUF) ----

// Where scripts/fetch_model smollm2 puts SmolLM2-135M-Instruct's GGUF file, under $QKV_HOME.
std::string default_causal_lm_path();

struct GenerateOptions {
  int64_t max_tokens = 64;  // new tokens at most
  double temperature = 0;   // 0: greedy (the most likely token); else sample softmax(logits / T)
  uint64_t seed = 1;        // of the sampling
  bool stop_at_eos = true;  // false: go on past the tokens that end generation (benchmarks)
};

struct TokenizeOptions {
  // Leave out a character whose bytes the vocabulary has no token for, as Hugging Face and
  // llama.cpp do, instead of refusing it: for a text whose exact ids do not matter (a benchmark's
  // prompt).
  bool drop_unspelled = false;
};

class GgufFile;       // core/gguf.h
struct LlamaConfig;   // models/llama/llama.h
struct LlamaWeights;  // models/llama/llama.h
class BpeTokenizer;   // models/text/bpe.h
class ChatTemplate;   // models/text/chat_template.h

// A Llama-architecture decoder from one GGUF file, run exactly on its dequantized weights, with
// its byte-level BPE tokenizer from the same file (models/llama/llama.h says what it computes).
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
  // Reads the weights, dequantizes, packs and checks them (finite), and closes the file; a second
  // call does nothing. Errors as open's.
  void load_weights();
  // open(path), then load_weights().
  static CausalLM load(const std::string& path);

  // The ids of a text, as Hugging Face's tokenizer gives them — but a character whose bytes the
  // vocabulary has no token for is a qkv::Error naming it, where Hugging Face and llama.cpp leave
  // it out unsaid (SmolLM2 lacks 21 of the 256 byte tokens, e.g. U+0004; a tiny vocabulary may
  // lack most).
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
  // qkv knows the ChatML family only (models/text/chat_template.h): a model whose template is
  // another, or that has none, or whose vocabulary lacks ChatML's markers as control (or
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
  // One pass over `ids` on the fast path (the fused attention kernel); the logits, [n, vocab].
  Tensor logits(const std::vector<int32_t>& ids) const;

  // What the work needs at its peak, in bytes: the whole process, this model as loaded included
  // (qkv/memory.h), known from the header alone (open). capture() of `tokens` tokens: every layer's
  // scores, logits and weights (tokens² a head and layer) and the logits of every position.
  int64_t capture_bytes(int64_t tokens) const;
  // generate() (and logits()) up to `positions` positions, prompt and new tokens together: the
  // KV cache at its largest and one pass's activations over the prompt.
  int64_t generate_bytes(int64_t positions) const;
  // load_weights() itself: the process with the model loaded, before any work.
  int64_t load_bytes() const;
  // The dequantized weights as they sit in memory once loaded (packed copies included) and the
  // tokenizer.
  int64_t resident_bytes() const;

  const std::string& path() const { return path_; }
  const LlamaConfig& config() const { return *config_; }
  // Positions the model reads at most (llama.context_length): prompt and generated tokens together.
  int64_t context_length() const;

 private:
  std::string path_;
  std::shared_ptr<const LlamaConfig> config_;
  std::shared_ptr<const LlamaWeights> weights_;
  std::shared_ptr<const BpeTokenizer> tokenizer_;
  std::shared_ptr<const ChatTemplate> chat_template_;
  std::vector<int32_t> end_ids_;  // ends_generation's
  // Open, the weights not yet loaded: the file they are read from (its header in memory).
  std::shared_ptr<const GgufFile> file_;

  void require_weights(const char* what) const;
};

// ---- the encoder-decoder models qkv trains ----
// synthetic sequence-to-sequence tasks for `qkv train`, character-level,
// generated on the fly from an nn::Rng.
//
// Each task has a vocabulary (PAD, BOS, EOS, then its characters), a generator of (source,
// target) examples, and a held-out test split: an example belongs to the test split iff the
// FNV-1a hash of its source string is 0 mod 10, so training (which draws only from the train
// split) never sees a test source, whatever the seed.
//
//   reverse   "kbqdafmt"                  → "tmfadqbk"
//   sort      "kbqdafmt"                  → "abdfkmqt"
//   copy      "kbqdafmt"                  → "kbqdafmt"
//   dates     "march 3rd 2021", "03/03/21", "3 Mar 2021", "2021/3/3",
//             "Wednesday, March 3, 2021"  → "2021-03-03"        (years 1950–2049)
//   lookup    "? b a3 b7 c1"              → "7"                  (the phonebook, learned)
//
// Quality is measured as exact-sequence accuracy: the whole output, EOS included, must match.

// Token ids of a character vocabulary: special tokens first, then one id a character.
class Vocabulary {
 public:
  static constexpr int32_t kPad = 0, kBos = 1, kEos = 2;
  Vocabulary() = default;
  explicit Vocabulary(const std::string& characters);  // distinct single-byte characters
  int64_t size() const { return static_cast<int64_t>(chars_.size()) + 3; }
  // Every character of s as an id; an unknown character is a qkv::Error naming it.
  std::vector<int32_t> encode(const std::string& s) const;
  // Ids to text, stopping at EOS; PAD and BOS are skipped, ids out of range show as '?'.
  std::string decode(const std::vector<int32_t>& ids) const;
  const std::string& characters() const { return chars_; }
  // "<pad>", "<s>", "</s>", or the character.
  std::string token(int32_t id) const;

 private:
  std::string chars_;
  std::map<char, int32_t> ids_;
};

enum class Split { train, test };

// True when `source` belongs to the held-out test split (FNV-1a 64 of the bytes, mod 10 == 0).
bool in_test_split(const std::string& source);
Split split_of(const std::string& source);

struct Example {
  std::string source, target;
};

// Sizes of the sequence tasks (reverse, sort, copy); 0 keeps the task's default.
struct TaskOptions {
  int64_t min_length = 0;  // default 8 (lookup: pairs, default 3)
  int64_t max_length = 0;  // default 16 (lookup: pairs, default 8)
  int64_t symbols = 0;     // default 20 (the letters a, b, c, ...; at most 26)
};

class Task {
 public:
  using Generator = std::function<Example(nn::Rng&)>;
  Task(std::string name, std::string description, Vocabulary vocab, int64_t max_source,
       int64_t max_target, Generator generate);

  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  const Vocabulary& vocab() const { return vocab_; }
  int64_t max_source_length() const { return max_source_; }
  int64_t max_target_length() const { return max_target_; }  // EOS not counted

  // One example of `split`: draws until the source falls in it (≈ 10 draws for test).
  Example sample(nn::Rng& rng, Split split) const;
  std::vector<Example> batch(nn::Rng& rng, Split split, int64_t n) const;

 private:
  std::string name_, description_;
  Vocabulary vocab_;
  int64_t max_source_, max_target_;
  Generator generate_;
};

// The task names, in the order `qkv train --help` lists them.
std::vector<std::string> task_names();
// The task called `name`; an unknown name is a qkv::Error listing the known ones.
Task make_task(const std::string& name, const TaskOptions& options = {});

// Exact-sequence accuracy: the fraction of outputs equal to their targets.
double exact_accuracy(const std::vector<std::string>& outputs,
                      const std::vector<Example>& examples);

// ---- dates, exposed for the tests ----
struct Date {
  int year = 2000, month = 1, day = 1;
};
enum class DateFormat {
  spelled,      // "march 3rd 2021"
  us_short,     // "03/03/21"   (MM/DD/YY; 50–99 → 19xx, 00–49 → 20xx)
  day_month,    // "3 Mar 2021"
  ymd_slashes,  // "2021/3/3"
  weekday,      // "Wednesday, March 3, 2021"
};
inline constexpr int kDateFormats = 5;
std::string format_date(const Date& date, DateFormat format);
std::string iso_date(const Date& date);  // "2021-03-03"
int days_in_month(int year, int month);
// 0 = Sunday … 6 = Saturday (proleptic Gregorian).
int weekday_of(const Date& date);

// The encoder–decoder models `qkv train` trains, character-level, one vocabulary shared by source
// and target. Two architectures (Seq2SeqConfig::architecture):
//
// transformer (Vaswani et al. 2017), pre-norm:
//   x = Embedding(src)·√d + PE          y = Embedding(tgt_in)·√d + PE      (tgt_in = BOS target)
//   memory = LayerNorm(EncoderBlockᴺ(x))
//   logits = Linear(LayerNorm(DecoderBlockᴺ(y, memory)))                    → target EOS
//
// rnnsearch (Bahdanau, Cho and Bengio 2014, "Neural machine translation by jointly learning to
// align and translate"), d = d_model:
//   h_j = [→h_j; ←h_j] = BidirectionalGRU(E_x src)_j        annotations, d/2 a direction
//   s_0 = tanh(W_s ←h_1)
//   e_ij = v_aᵀ tanh(W_a s_{i−1} + U_a h_j),  α_ij = softmax_j(e_ij),  c_i = Σ_j α_ij h_j
//   s_i = GRU([E_y y_{i−1}; c_i], s_{i−1})
//   logits_i = W_o tanh(O [s_i; E_y y_{i−1}; c_i])
// The attention is qkv::attention with the additive score: query s_{i−1}, keys = values = h_j.
//
// forward/backward follow nn.h: forward saves what backward needs; backward accumulates into the
// parameters' gradients. Greedy decoding is batched and can hand back the cross-attention
// weights of one decoder layer for every output step (the alignment of Bahdanau et al. 2014,
// Figure 3). Models are saved as safetensors with their configuration in the metadata.

enum class Seq2SeqArchitecture { transformer, rnnsearch };
std::string_view to_string(Seq2SeqArchitecture architecture);
std::optional<Seq2SeqArchitecture> parse_architecture(std::string_view name);

struct Seq2SeqConfig {
  Seq2SeqArchitecture architecture = Seq2SeqArchitecture::transformer;
  std::string task;  // the task it was made for ("reverse", "dates", ...)
  TaskOptions task_options;
  std::string characters;  // the vocabulary's characters (ids 3, 4, ...; 0–2: PAD, BOS, EOS)
  int64_t layers = 2;      // encoder blocks, and as many decoder blocks (rnnsearch: 1)
  int64_t heads = 4;       // rnnsearch: 1
  int64_t d_model = 64;    // rnnsearch: the annotations' and the decoder state's width (even)
  int64_t ffn_hidden = 0;  // 0: 4·d_model
  int64_t max_source = 32, max_target = 16;  // longest source; longest target (EOS not counted)
  double dropout = 0.0;
  // Every attention layer's variant (score, tie_qk, identity_v, kv_heads) — what `qkv experiment`
  // varies; d_model, heads and dropout are taken from the fields above. rnnsearch: additive.
  nn::MultiHeadAttentionOptions attention;

  int64_t hidden() const { return ffn_hidden > 0 ? ffn_hidden : 4 * d_model; }
  // Throws qkv::Error (usage) when a size is out of range, d_model % heads != 0, the characters
  // are not printable ASCII or kv_heads does not divide heads. Messages name qkv train's flags;
  // with `source` (a model file) they name the file and its metadata's field instead.
  void validate(const std::string& source = "") const;
};

// The config as JSON text, as a saved model's metadata holds it ("qkv.config"), and back: every
// field is checked (type, range, a known task whose characters and lengths the model covers);
// errors name `path` and the field, e.g. "m.safetensors: the metadata's qkv.config "layers" is 0;
// expected 1 to 64".
std::string config_to_metadata(const Seq2SeqConfig& config);
Seq2SeqConfig config_from_metadata(const std::string& text, const std::string& path);

// A config sized for `task` (vocabulary and lengths from it).
Seq2SeqConfig config_for(const Task& task, int64_t layers, int64_t heads, int64_t d_model);
// RNNsearch's: one layer, one head, the additive score.
Seq2SeqConfig rnnsearch_config_for(const Task& task, int64_t d_model);

// Examples as padded id batches.
struct Batch {
  int64_t size = 0, source_length = 0, target_length = 0;  // B, S, T (T = longest target + 1)
  std::vector<std::vector<int32_t>> source;                // [B][S], PAD after source_lengths
  std::vector<int64_t> source_lengths;
  std::vector<std::vector<int32_t>> target_in;   // [B][T]: BOS target, PAD after target_lengths
  std::vector<int64_t> target_lengths;           // |target| + 1
  std::vector<int32_t> target_out;               // [B·T]: target EOS, −1 (ignored) on padding
  int64_t target_tokens = 0, source_tokens = 0;  // real (unpadded) tokens
};
Batch make_batch(const Vocabulary& vocab, const std::vector<Example>& examples);

// One source through the trained model with every attention layer captured: what the report
// shows for a model `qkv train` made, as BertCapture is for BERT. Batch size 1, so each capture
// is [1, H, L, S] (see AttentionCapture, for every tensor's shape and meaning).
struct Seq2SeqCapture {
  std::string source, output;              // output: greedy decoding's text (EOS not included)
  std::vector<std::string> source_tokens;  // one per source character: the encoder's keys
  // The decoder's inputs, as training feeds them: "<s>" then every output token but the last;
  // decoder position t reads target_tokens[t] and predicts output_tokens[t].
  std::vector<std::string> target_tokens;
  std::vector<std::string> output_tokens;  // the generated tokens, "</s>" included when produced
  // The configuration the captures ran with (each capture holds its score, scale and mask).
  // rnnsearch: one cross "layer" (the additive attention, query s_{i−1}, keys = values = h_j), no
  // encoder or decoder self-attention.
  Seq2SeqArchitecture architecture = Seq2SeqArchitecture::transformer;
  int64_t layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  bool tie_qk = false, identity_v = false;
  // One per layer. encoder: self-attention over the source (padding-free, so nothing masked).
  // decoder_self: causal self-attention over target_tokens (logits −∞ above the diagonal).
  // cross: the decoder's queries over the encoder's output (its weights are greedy_decode's
  // alignment for that layer).
  std::vector<AttentionCapture> encoder, decoder_self, cross;
};

// A model of either architecture; make_seq2seq builds the one its config names.
class Seq2Seq : public nn::Module {
 public:
  // logits: [B, T, V]. Saves what backward needs.
  virtual Tensor forward(const Batch& batch, bool training, nn::Rng& rng) = 0;
  // dlogits: [B, T, V] (∂loss/∂logits); accumulates every parameter's gradient.
  virtual void backward(const Tensor& dlogits) = 0;

  struct Decoded {
    std::vector<std::string> outputs;
    std::vector<std::vector<int32_t>> ids;  // the generated ids, EOS included when produced
    // With alignment_layer ≥ 0: per example, [H, steps, S] (float64) — the cross-attention
    // weights of that decoder layer's heads at each output step (EOS included) over the source.
    std::vector<Tensor> alignment;
  };
  // Greedy decoding, batch_size sources a batch; at most config.max_target + 1 steps.
  // alignment_layer: a decoder layer (0-based; −1 for none; ≥ layers: the last).
  Decoded greedy_decode(const std::vector<std::string>& sources, int alignment_layer = -1,
                        int64_t batch_size = 256);

  // Greedy-decodes `source`, then runs one teacher-forced pass of the encoder and the decoder
  // over the source and BOS + the output with capture on. Errors as greedy_decode's.
  virtual Seq2SeqCapture capture(const std::string& source) = 0;

  // The parameters and the config (in the metadata, with `extra` entries) to `path`, atomically.
  void save(const std::string& path, const std::map<std::string, std::string>& extra = {});
  // A model saved by save(); errors name the file. `metadata` receives the file's metadata.
  static std::unique_ptr<Seq2Seq> load(const std::string& path,
                                       std::map<std::string, std::string>* metadata = nullptr);

  const Seq2SeqConfig& config() const { return config_; }
  const Vocabulary& vocab() const { return vocab_; }

 protected:
  explicit Seq2Seq(const Seq2SeqConfig& config);  // validates it
  // greedy_decode of one batch (its sources, no targets yet), appended to `result`.
  virtual void decode_batch(Batch batch, int alignment_layer, Decoded& result) = 0;
  // What both captures begin with: greedy-decodes `source` into c's texts and tokens, and returns
  // the decoder's inputs as training feeds them (BOS, then every output but the last, which is
  // never an input), so that position t predicts output t.
  std::vector<int32_t> begin_capture(const std::string& source, Seq2SeqCapture& c);

  Seq2SeqConfig config_;
  Vocabulary vocab_;
};

// What the work on a model of `config` needs at its peak, in bytes: the whole process
// (qkv/memory.h), float32 parameters. train(): the parameters, their gradients and AdamW's two
// moments, and the activations forward and backward of a batch of `batch_size` examples at the
// config's longest source and target (and of the evaluation's decoding). Known before the model
// is made, so a command can refuse a size it cannot hold before allocating any of it.
int64_t seq2seq_train_bytes(const Seq2SeqConfig& config, int64_t batch_size);
// Seq2Seq::capture (and greedy_decode) of one source at the config's longest lengths: every
// attention layer's scores, logits and weights kept.
int64_t seq2seq_capture_bytes(const Seq2SeqConfig& config);

// A fresh model of config.architecture, initialized from `rng`.
std::unique_ptr<Seq2Seq> make_seq2seq(const Seq2SeqConfig& config, nn::Rng& rng,
                                      DType dtype = DType::f32);

}  // namespace qkv
