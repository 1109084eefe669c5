#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>

#include "models/llama/llama.h"
#include "models/text/tokenizer.h"
#include "qkv/explain.h"

namespace qkv::explain {
namespace {

bool punctuation_only(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (c >= 0x80 || std::isalnum(c)) return false;  // non-ASCII counts as a word character
  return true;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Fills e's tokens from the encoding (word indices run on across a pair) and runs it captured.
Explained run_encoding(const SentenceModel& model, Explained e, const Encoding& encoding) {
  e.truncated = encoding.truncated;
  int64_t word = -1;
  for (const Token& t : encoding.tokens) {
    const std::string& own = t.segment == 0 ? e.text : e.text_b;
    TokenInfo info{.text = t.text,
                   .surface = own.substr(t.begin, t.end - t.begin),
                   .id = t.id,
                   .segment = t.segment};
    info.special = model.is_cls_or_sep(t.id) ||
                   (t.begin == t.end && t.text.size() > 2 && t.text.front() == '[');
    info.punctuation = !info.special && punctuation_only(t.text);
    if (!info.special) {
      if (t.text.rfind("##", 0) != 0 || word < 0) ++word;
      info.word = word;
    }
    e.tokens.push_back(std::move(info));
  }
  const BertConfig& c = model.config();
  e.layers = c.num_layers;
  e.heads = c.num_heads;
  e.head_dim = c.head_dim();
  e.scale = 1.0 / std::sqrt(static_cast<double>(e.head_dim));
  e.embedding = model.encode_captured(encoding, e.capture);
  return e;
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

}  // namespace

Explained run(const CausalLM& model, std::string_view text) {
  Explained e;
  e.model = std::filesystem::path(model.path()).stem().string();
  e.text = std::string(text);
  const std::vector<int32_t> ids = model.tokenize(text);
  if (ids.empty()) throw Error("the text has no tokens; expected a sentence");
  int64_t word = -1;
  for (const int32_t id : ids) {
    const std::string bytes = model.token_text(id);
    // The token as a word piece (its leading space dropped, as the views and find_token expect);
    // the surface keeps it.
    const std::size_t start = bytes.find_first_not_of(' ');
    TokenInfo info{.text = start == std::string::npos ? bytes : bytes.substr(start),
                   .surface = bytes,
                   .id = id};
    info.special = bytes.size() > 4 && bytes.rfind("<|", 0) == 0 &&
                   bytes.compare(bytes.size() - 2, 2, "|>") == 0;
    const std::string bare = bytes.substr(
        bytes.find_first_not_of(' ') == std::string::npos ? 0 : bytes.find_first_not_of(' '));
    info.punctuation = !info.special && punctuation_only(bare);
    if (!info.special) {
      if (word < 0 || bytes.front() == ' ' || info.punctuation) ++word;
      info.word = word;
    }
    e.tokens.push_back(std::move(info));
  }
  std::vector<AttentionCapture> layers;
  const Tensor logits = model.capture(ids, layers);
  e.causal = true;
  e.layers = static_cast<int64_t>(layers.size());
  e.heads = layers.front().q.dim(1);
  e.kv_heads = layers.front().k.dim(1);
  e.head_dim = layers.front().q.dim(3);
  e.scale = layers.front().scale;
  for (AttentionCapture& c : layers) {
    c.k = repeat_heads(c.k, e.heads);
    c.v = repeat_heads(c.v, e.heads);
    e.capture.hidden.emplace_back();
    e.capture.layers.push_back(std::move(c));
  }
  // Induction: a repeated random sequence x₁…x_T x₁…x_T; in the repeat, token x_i (position
  // T + i − 1) may look for x_{i+1} after its first occurrence (position i). T = 24, or what half
  // a shorter context holds. The ids are drawn from 1000 … 20999 (past SmolLM2's special and byte
  // tokens); a smaller vocabulary draws from all of its ids.
  const int64_t repeat_length = std::min<int64_t>(24, model.config().context / 2);
  const int64_t vocab_size = model.config().vocab;
  e.induction = Tensor({e.layers, e.heads}, DType::f64);
  if (repeat_length >= 2) {
    std::mt19937_64 rng(2022);
    std::vector<int32_t> random(static_cast<std::size_t>(repeat_length));
    for (int32_t& id : random)
      id = static_cast<int32_t>(vocab_size >= 21000 ? 1000 + rng() % 20000
                                                    : rng() % static_cast<uint64_t>(vocab_size));
    std::vector<int32_t> twice = random;
    twice.insert(twice.end(), random.begin(), random.end());
    std::vector<AttentionCapture> repeat;
    model.capture(twice, repeat);
    const int64_t t = repeat_length;
    for (int64_t l = 0; l < e.layers; ++l)
      for (int64_t h = 0; h < e.heads; ++h) {
        const Tensor& w = repeat[static_cast<std::size_t>(l)].weights;
        double sum = 0;
        for (int64_t i = 1; i < t; ++i) sum += w.value((h * 2 * t + t + i - 1) * 2 * t + i);
        e.induction.at<double>(l, h) = sum / static_cast<double>(t - 1);
      }
  }
  // The last position's logits → the five most likely next tokens.
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
  for (int64_t k = 0; k < shown; ++k)
    e.next_tokens.emplace_back(
        model.token_text(order[static_cast<std::size_t>(k)]),
        std::exp(double{z[order[static_cast<std::size_t>(k)]]} - top) / total);
  return e;
}

double Explained::weight(int64_t l, int64_t h, int64_t i, int64_t j) const {
  return capture.layers[static_cast<std::size_t>(l)].weights.value(((h * size()) + i) * size() + j);
}

Explained run(const SentenceModel& model, std::string_view text) {
  Explained e;
  e.text = std::string(text);
  return run_encoding(model, std::move(e), model.tokenize(text));
}

Explained run(const SentenceModel& model, std::string_view text, std::string_view text_b) {
  Explained e;
  e.text = std::string(text);
  e.text_b = std::string(text_b);
  e.pair = true;
  return run_encoding(model, std::move(e), model.tokenize_pair(text, text_b));
}

int64_t default_focus(const Explained& e) {
  static const char* const kPronouns[] = {
      "it",      "he",     "she",        "they", "him",  "her",   "them",  "his", "its",  "their",
      "theirs",  "we",     "us",         "our",  "you",  "your",  "i",     "me",  "my",   "himself",
      "herself", "itself", "themselves", "this", "that", "these", "those", "who", "whom", "which"};
  for (int64_t i = 0; i < e.size(); ++i)
    for (const char* p : kPronouns)
      if (!e.tokens[i].special && e.tokens[i].text == p) return i;
  for (int64_t i = e.size() - 1; i >= 0; --i)  // the first piece of the last word
    if (!e.tokens[i].special && !e.tokens[i].punctuation) {
      while (i > 0 && e.tokens[i].text.rfind("##", 0) == 0) --i;
      return i;
    }
  return 0;
}

std::optional<int64_t> find_token(const Explained& e, std::string_view spec) {
  int64_t index = 0;
  const auto [end, ec] = std::from_chars(spec.data(), spec.data() + spec.size(), index);
  if (ec == std::errc() && end == spec.data() + spec.size() && !spec.empty())
    return index >= 0 && index < e.size() ? std::optional<int64_t>(index) : std::nullopt;
  int64_t occurrence = 1;
  if (const std::size_t colon = spec.rfind(':'); colon != std::string_view::npos && colon > 0) {
    const std::string_view n = spec.substr(colon + 1);
    const auto [nend, nec] = std::from_chars(n.data(), n.data() + n.size(), occurrence);
    if (nec == std::errc() && nend == n.data() + n.size() && occurrence >= 1)
      spec = spec.substr(0, colon);
    else
      occurrence = 1;
  }
  const std::string wanted = lower(spec);
  for (int64_t i = 0; i < e.size(); ++i)
    if ((lower(e.tokens[i].text) == wanted || lower(e.tokens[i].surface) == wanted) &&
        --occurrence == 0)
      return i;
  return std::nullopt;
}

bool is_other_word(const Explained& e, int64_t i, int64_t j) {
  const TokenInfo& k = e.tokens[static_cast<std::size_t>(j)];
  // A decoder's first token is where its heads park weight that has nowhere better to go (an
  // attention sink): like BERT's [CLS], it does not count as a word a head chose.
  if (e.causal && j == 0) return false;
  return !k.special && !k.punctuation && k.word != e.tokens[static_cast<std::size_t>(i)].word;
}

std::vector<HeadPick> picks(const Explained& e, int64_t focus, int top_k) {
  std::vector<HeadPick> out;
  for (int64_t l = 0; l < e.layers; ++l)
    for (int64_t h = 0; h < e.heads; ++h) {
      HeadPick p{.layer = l, .head = h};
      std::vector<int64_t> keys(static_cast<std::size_t>(e.size()));
      std::iota(keys.begin(), keys.end(), 0);
      std::stable_sort(keys.begin(), keys.end(), [&](int64_t a, int64_t b) {
        return e.weight(l, h, focus, a) > e.weight(l, h, focus, b);
      });
      keys.resize(std::min<std::size_t>(keys.size(), static_cast<std::size_t>(top_k)));
      p.top = keys;
      p.other_word = !keys.empty() && is_other_word(e, focus, keys[0]);
      out.push_back(std::move(p));
    }
  return out;
}

HeadPick suggested_head(const Explained& e, int64_t focus, const std::vector<HeadPick>& all) {
  const HeadPick* best = nullptr;
  for (const HeadPick& p : all) {
    if (!p.other_word) continue;
    const double w = e.weight(p.layer, p.head, focus, p.top[0]);
    if (best == nullptr || p.layer > best->layer ||
        (p.layer == best->layer && w > e.weight(best->layer, best->head, focus, best->top[0])))
      best = &p;
  }
  return best != nullptr ? *best : all.front();
}

}  // namespace qkv::explain
