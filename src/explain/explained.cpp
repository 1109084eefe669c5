#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <numeric>

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
    info.special = t.id == model.tokenizer().cls_id() || t.id == model.tokenizer().sep_id() ||
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

}  // namespace

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
