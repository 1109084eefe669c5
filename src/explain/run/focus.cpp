// Which query token a view starts from, and which head it shows first: the questions every view of
// a sentence asks of its run.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <numeric>

#include "qkv/explain.h"

namespace qkv::explain {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

double Run::weight(int64_t l, int64_t h, int64_t i, int64_t j) const {
  return blocks.front().weight(l, h, i, j);
}

int64_t default_focus(const Run& e) {
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

std::optional<int64_t> find_token(const Run& e, std::string_view spec) {
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

int64_t focus(const Run& e, const std::optional<std::string>& spec) {
  if (!spec) return default_focus(e);
  if (const std::optional<int64_t> found = find_token(e, *spec)) return *found;
  std::string tokens;
  for (const TokenInfo& t : e.tokens) tokens += (tokens.empty() ? "" : " ") + t.text;
  throw Error("'" + *spec + "' is not a token of the text; expected one of: " + clip(tokens, 120) +
              " (or an index 0-" + std::to_string(e.size() - 1) + ")");
}

bool is_other_word(const Run& e, int64_t i, int64_t j) {
  const TokenInfo& k = e.tokens[static_cast<std::size_t>(j)];
  // A decoder's first token is where its heads park weight that has nowhere better to go (an
  // attention sink): like BERT's [CLS], it does not count as a word a head chose.
  if (e.causal() && j == 0) return false;
  return !k.special && !k.punctuation && k.word != e.tokens[static_cast<std::size_t>(i)].word;
}

std::vector<HeadPick> picks(const Run& e, int64_t focus, int top_k) {
  std::vector<HeadPick> out;
  for (int64_t l = 0; l < e.model.layers; ++l)
    for (int64_t h = 0; h < e.model.heads; ++h) {
      HeadPick p{.layer = l, .head = h};
      std::vector<int64_t> keys(static_cast<std::size_t>(e.size()));
      std::iota(keys.begin(), keys.end(), 0);
      // The focus row once (a long text's is recomputed from its rows), then its keys by weight.
      const std::vector<double> row = e.blocks.front().weight_row(l, h, focus);
      std::stable_sort(keys.begin(), keys.end(), [&](int64_t a, int64_t b) {
        return row[static_cast<std::size_t>(a)] > row[static_cast<std::size_t>(b)];
      });
      keys.resize(std::min<std::size_t>(keys.size(), static_cast<std::size_t>(top_k)));
      p.top = keys;
      p.other_word = !keys.empty() && is_other_word(e, focus, keys[0]);
      out.push_back(std::move(p));
    }
  return out;
}

HeadPick suggested_head(const Run& e, int64_t focus, const std::vector<HeadPick>& all) {
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
