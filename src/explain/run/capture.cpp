// explain::capture for the sentence models: BERT (one text or a pair) and decoder LLMs. Each
// tokenizes, runs with every layer captured, and fills one Run: tokens, one self-attention block,
// the residual stream (BERT) and the output (the sentence embedding; a decoder's next tokens).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>

#include "explain/run/values.h"
#include "models/llama/llama.h"
#include "qkv/explain_readings.h"
#include "qkv/explain_run.h"

namespace qkv::explain {
namespace {

bool punctuation_only(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (c >= 0x80 || std::isalnum(c)) return false;  // non-ASCII counts as a word character
  return true;
}

// The run's one self-attention block over its tokens, every layer of `layers`.
Block self_block(const Run& run, std::vector<AttentionCapture> layers, bool causal, int64_t heads,
                 int64_t kv_heads) {
  Block b{.kind = BlockKind::self_attention,
          .name = "self-attention",
          .note = causal
                      ? "each token asks (query); it and the tokens before it answer (key, value)"
                      : "every token asks (query) and every token answers (key, value)",
          .queries = run.tokens,
          .keys = run.tokens,
          .causal = causal};
  const int64_t group = kv_heads > 0 ? heads / kv_heads : 1;
  for (int64_t h = 0; h < heads; ++h) b.kv_head.push_back(h / group);
  b.layers = std::move(layers);
  return b;
}

// [1, Hkv, n, d] → [1, H, n, d]: key/value head g repeated for each of its H / Hkv query heads.
Tensor repeat_heads(const Tensor& t, int64_t heads) {
  const int64_t kv = t.dim(1), n = t.dim(2), d = t.dim(3), group = heads / kv;
  Tensor out({1, heads, n, d}, t.dtype());
  const Tensor c = t.contiguous().to(DType::f32);
  for (int64_t h = 0; h < heads; ++h)
    std::copy_n(c.data<float>() + (h / group) * n * d, n * d, out.data<float>() + h * n * d);
  return out.to(t.dtype());
}

// The decoder's tokens: each as a word piece (its leading space dropped, as the views and
// find_token expect), its surface the bytes it stands for, its span where those bytes sit.
std::vector<TokenInfo> decoder_tokens(const CausalLM& model, const std::vector<int32_t>& ids) {
  std::vector<TokenInfo> tokens;
  int64_t word = -1, at = 0;
  for (const int32_t id : ids) {
    const std::string bytes = model.token_text(id);
    const std::size_t start = bytes.find_first_not_of(' ');
    TokenInfo info{.text = start == std::string::npos ? bytes : bytes.substr(start),
                   .surface = bytes,
                   .begin = at,
                   .end = at + static_cast<int64_t>(bytes.size()),
                   .id = id};
    at = info.end;
    info.special = bytes.size() > 4 && bytes.rfind("<|", 0) == 0 &&
                   bytes.compare(bytes.size() - 2, 2, "|>") == 0;
    info.punctuation =
        !info.special && punctuation_only(start == std::string::npos ? bytes : bytes.substr(start));
    if (!info.special) {
      if (word < 0 || bytes.front() == ' ' || info.punctuation) ++word;
      info.word = word;
    }
    tokens.push_back(std::move(info));
  }
  return tokens;
}

// Induction: a repeated random sequence x₁…x_T x₁…x_T, T = 24 or what half a shorter context
// holds. The ids are drawn from 1000 … 20999 (past SmolLM2's special and byte tokens); a smaller
// vocabulary draws from all of its ids.
Tensor induction_of(const CausalLM& model, int64_t layers, int64_t heads) {
  const int64_t t = std::min<int64_t>(24, model.config().context / 2);
  const int64_t vocab = model.config().vocab;
  if (t < 2) return Tensor({layers, heads}, DType::f64);
  std::mt19937_64 rng(2022);
  std::vector<int32_t> random(static_cast<std::size_t>(t));
  for (int32_t& id : random)
    id = static_cast<int32_t>(vocab >= 21000 ? 1000 + rng() % 20000
                                             : rng() % static_cast<uint64_t>(vocab));
  std::vector<int32_t> twice = random;
  twice.insert(twice.end(), random.begin(), random.end());
  std::vector<AttentionCapture> repeat;
  model.capture(twice, repeat);
  return induction_scores(repeat, t);
}

// The last position's logits → the five most likely next tokens.
std::vector<std::pair<std::string, double>> next_tokens(const CausalLM& model,
                                                        const Tensor& logits) {
  const int64_t vocab = logits.dim(1), last = logits.dim(0) - 1;
  const float* z = logits.data<float>() + last * vocab;
  const float top = *std::max_element(z, z + vocab);
  double total = 0;
  for (int64_t v = 0; v < vocab; ++v) total += std::exp(double{z[v]} - top);
  std::vector<int32_t> order(static_cast<std::size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  const int64_t shown = std::min<int64_t>(5, vocab);
  std::partial_sort(order.begin(), order.begin() + shown, order.end(),
                    [z](int32_t a, int32_t b) { return z[a] > z[b]; });
  std::vector<std::pair<std::string, double>> out;
  for (int64_t k = 0; k < shown; ++k) {
    const int32_t id = order[static_cast<std::size_t>(k)];
    out.emplace_back(model.token_text(id), std::exp(double{z[id]} - top) / total);
  }
  return out;
}

// The decoder's architecture in the views' words: its features, and its q, k and v formulas.
void describe(const LlamaConfig& c, ModelHeader& m) {
  m.features = attention_features(c);
  const auto formed = [&](const std::string& w, const std::string& b, bool turned) {
    std::string x = w + "·x" + (c.qkv_bias ? " + " + b : "");
    if (turned && c.qk_norm) x = "RMSNorm(" + x + ")";
    return turned ? "RoPE(" + x + ")" : x;
  };
  m.query = formed("W_Q", "b_Q", true);
  m.key = formed("W_K", "b_K", true);
  m.value = formed("W_V", "b_V", false);
}

}  // namespace

Run capture(const CausalLM& model, std::string_view text, bool rows) {
  Run run;
  run.model.name = std::filesystem::path(model.path()).stem().string();
  run.model.family = model.config().architecture;  // "llama", "qwen2", ...
  run.text = std::string(text);
  const std::vector<int32_t> ids = model.tokenize(text);
  if (ids.empty()) throw Error("the text has no tokens; expected a sentence");
  run.tokens = decoder_tokens(model, ids);
  std::vector<AttentionCapture> layers;
  // rows: a long text's layers as rows (src/explain/run/rows.cpp), the last position's logits.
  const Tensor logits = rows ? model.capture_rows(ids, layers) : model.capture(ids, layers);
  ModelHeader& m = run.model;
  m.layers = static_cast<int64_t>(layers.size());
  m.heads = layers.front().q.dim(1);
  m.kv_heads = layers.front().k.dim(1);
  m.head_dim = layers.front().q.dim(3);
  m.d_model = model.config().hidden;
  m.scale = layers.front().scale;
  describe(model.config(), m);
  // A captured pass has many rows, or runs through the lens: float32 whatever the format.
  m.weights = model.weight_format() == WeightFormat::file
                  ? model.matrix_types() +
                        " as the file's blocks; every product in float32, the bits of --weights "
                        "float32"
                  : model.matrix_types() + " dequantized to float32 at load (--weights float32)";
  m.argument = model.path() == default_causal_lm_path() ? "smollm2" : model.path();
  for (AttentionCapture& c : layers) {
    c.k = repeat_heads(c.k, m.heads);
    c.v = repeat_heads(c.v, m.heads);
  }
  run.blocks.push_back(self_block(run, std::move(layers), true, m.heads, m.kv_heads));
  add_values(model, ids, run);  // the values' norms, the stream and the mixing (values.cpp)
  run.induction = induction_of(model, m.layers, m.heads);
  run.output.next_tokens = next_tokens(model, logits);
  return run;
}

Run capture(const SentenceModel& model, std::string_view text,
            std::optional<std::string_view> text_b) {
  Run run;
  run.model.name = "all-MiniLM-L6-v2";
  run.model.family = "bert";
  run.text = std::string(text);
  run.pair = text_b.has_value();
  if (text_b) run.text_b = std::string(*text_b);
  const Encoding encoding = text_b ? model.tokenize_pair(text, *text_b) : model.tokenize(text);
  run.truncated = encoding.truncated;
  int64_t word = -1;  // word indices run on across a pair
  for (const Token& t : encoding.tokens) {
    const std::string& own = t.segment == 0 ? run.text : run.text_b;
    TokenInfo info{.text = t.text,
                   .surface = own.substr(t.begin, t.end - t.begin),
                   .begin = static_cast<int64_t>(t.begin),
                   .end = static_cast<int64_t>(t.end),
                   .id = t.id,
                   .segment = t.segment};
    info.special = model.is_cls_or_sep(t.id) ||
                   (t.begin == t.end && t.text.size() > 2 && t.text.front() == '[');
    info.punctuation = !info.special && punctuation_only(t.text);
    if (!info.special) {
      if (t.text.rfind("##", 0) != 0 || word < 0) ++word;
      info.word = word;
    }
    run.tokens.push_back(std::move(info));
  }
  const BertConfig& c = model.config();
  run.model.layers = c.num_layers;
  run.model.heads = run.model.kv_heads = c.num_heads;
  run.model.head_dim = c.head_dim();
  run.model.d_model = c.hidden_size;
  run.model.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim()));
  BertCapture captured;
  run.output.embedding = model.encode_captured(encoding, captured);
  run.embeddings = std::move(captured.embeddings);
  run.hidden = std::move(captured.hidden);
  run.blocks.push_back(
      self_block(run, std::move(captured.layers), false, c.num_heads, c.num_heads));
  add_values(model, run);
  return run;
}

}  // namespace qkv::explain
