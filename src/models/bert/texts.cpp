// What a sentence model says of the texts it is given: before it embeds them, one that has no
// tokens of its own and those it will cut to max_length; after, a query's ranking of lines
// (qkv/sentence_model.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "core/text/utf8.h"
#include "models/text/tokenizer.h"
#include "qkv/finite.h"
#include "qkv/sentence_model.h"
#include "qkv/terminal.h"

namespace qkv {

void SentenceModel::require_tokens(std::string_view text, const std::string& what) const {
  if (tokenize(text).tokens.size() > 2) return;
  // The characters by code point: U+200B shows as nothing on a terminal. (Valid UTF-8 here:
  // tokenize refused anything else.)
  std::string points;
  std::size_t i = 0;
  for (int shown = 0; i < text.size() && shown < 4; ++shown) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(utf8::next(text, i)));
    points += (points.empty() ? "" : " ") + std::string(buf);
  }
  if (i < text.size()) points += " …";
  throw Error(what + " (" + points +
              ") has no tokens: the model drops every character in it (zero-width or control "
              "characters), so it would embed as a blank text; expected a text with words");
}

std::string SentenceModel::cut_note(std::span<const std::string> texts,
                                    const std::function<std::string(std::size_t)>& label,
                                    const std::string& kind) const {
  // A token covers at least one byte, so only texts of more bytes than the tokens that fit between
  // [CLS] and [SEP] need tokenizing here.
  const std::size_t fit = options_.max_length - 2;
  std::size_t cut = 0, first = 0;
  for (std::size_t i = 0; i < texts.size(); ++i)
    if (texts[i].size() > fit && tokenize(texts[i]).truncated && cut++ == 0) first = i;
  if (cut == 0) return "";
  const std::string limit = std::to_string(options_.max_length) + " tokens";
  if (texts.size() == 1 || cut == 1)
    return label(first) + " is longer than the model's " + limit +
           " and was cut to them; the rest of it is not in its embedding";
  return grouped(static_cast<int64_t>(cut)) + " of " + grouped(static_cast<int64_t>(texts.size())) +
         " " + kind + " are longer than the model's " + limit +
         " and were cut to them (the first: " + label(first) +
         "); the rest of each is not in its embedding";
}

Ranking rank_by_cosine(const Tensor& embeddings, double temperature) {
  const auto n = static_cast<std::size_t>(embeddings.dim(0) - 1);
  Ranking r{.cosine = std::vector<double>(n), .weight = std::vector<double>(n), .order = {}};
  for (std::size_t i = 0; i < n; ++i)
    r.cosine[i] = cosine(embeddings, 0, embeddings, static_cast<int64_t>(i + 1));
  // softmax(cos/τ) less its largest term in the exponent: every exp(·) ≤ 1, the sum ≥ 1.
  const double top = n == 0 ? 0 : *std::max_element(r.cosine.begin(), r.cosine.end());
  double total = 0;
  for (std::size_t i = 0; i < n; ++i)
    total += r.weight[i] = std::exp((r.cosine[i] - top) / temperature);
  for (double& w : r.weight) w /= total;
  for (std::size_t i = 0; i < n; ++i) {
    require_finite(r.cosine[i], "cos(q, k) of line " + std::to_string(i + 1));
    require_finite(r.weight[i], "the softmax weight of line " + std::to_string(i + 1));
  }
  r.order.resize(n);
  std::iota(r.order.begin(), r.order.end(), 0);
  std::stable_sort(r.order.begin(), r.order.end(),
                   [&](std::size_t a, std::size_t b) { return r.cosine[a] > r.cosine[b]; });
  return r;
}

}  // namespace qkv
