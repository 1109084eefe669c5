// The pre-tokenizers of byte-level BPE vocabularies; see pre_tokenizers.h. Each regex is matched by
// hand, one function per alternative group, as Oniguruma's leftmost-first alternation and greedy
// quantifiers with backtracking would match it at each position.
#include "models/text/pre_tokenizers.h"

#include <array>
#include <cstdint>

#include "core/text/unicode_tables.h"
#include "core/text/utf8.h"

namespace qkv {
namespace {

using unicode::RegexClass;

struct Named {
  std::string_view name;
  PreTokenizer p;
};
// The first name of each is the one qkv reports; the others are llama.cpp's aliases.
constexpr Named kNames[] = {
    {"smollm", PreTokenizer::smollm},          {"gpt-2", PreTokenizer::gpt2},
    {"llama-bpe", PreTokenizer::llama3},       {"llama3", PreTokenizer::llama3},
    {"llama-v3", PreTokenizer::llama3},        {"qwen2", PreTokenizer::qwen2},
    {"deepseek-r1-qwen", PreTokenizer::qwen2},
};

RegexClass regex_class(char32_t cp) {
  static const auto ascii = [] {
    std::array<RegexClass, 128> table;
    for (char32_t c = 0; c < 128; ++c) table[c] = unicode::regex_class(c);
    return table;
  }();
  return cp < 128 ? ascii[cp] : unicode::regex_class(cp);
}

// A code point of the text and where its bytes begin.
struct Unit {
  char32_t cp;
  std::size_t begin;
  RegexClass cls;
};
using Units = std::vector<Unit>;

bool is_newline(char32_t c) { return c == '\r' || c == '\n'; }

// A letter as (?i:...) compares it: Oniguruma's case fold, of which only ASCII and ſ (U+017F,
// folded to s) can reach the contractions' letters.
char32_t folded(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + ('a' - 'A');
  return c == 0x17F ? char32_t('s') : c;
}

// 's 't 're 've 'm 'll 'd at units[i]: where the match ends, or i when there is none.
std::size_t contraction(const Units& u, std::size_t i, std::size_t n, bool any_case) {
  if (u[i].cp != '\'' || i + 1 >= n) return i;
  const auto letter = [&](std::size_t k) { return any_case ? folded(u[k].cp) : u[k].cp; };
  const char32_t a = letter(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  if (i + 2 < n) {
    const char32_t b = letter(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  }
  return i;
}

// The end of the run of class `cls` from units[i], at most `max` long.
std::size_t run_end(const Units& u, std::size_t i, std::size_t n, RegexClass cls,
                    std::size_t max = SIZE_MAX) {
  std::size_t j = i;
  while (j < n && j - i < max && u[j].cls == cls) ++j;
  return j;
}

// \s+(?!\S) | \s+ from units[i], a space: the run of white space, less its last character when a
// non-space follows it (that one then starts the next match) — unless the run is one character.
std::size_t trailing_space(const Units& u, std::size_t i, std::size_t n) {
  const std::size_t j = run_end(u, i, n, RegexClass::space);
  return (j == n || j - i == 1) ? j : j - 1;
}

// GPT-2's regex (pre_tokenizers.h): where its match starting at units[i] ends.
std::size_t gpt2_match(const Units& u, std::size_t i, std::size_t n) {
  if (const std::size_t j = contraction(u, i, n, false); j > i) return j;
  // ␠?\p{L}+ | ␠?\p{N}+ | ␠?[^\s\p{L}\p{N}]+: one optional space, then a run of one class.
  const std::size_t s = u[i].cp == ' ' ? i + 1 : i;
  if (s < n && u[s].cls != RegexClass::space) return run_end(u, s, n, u[s].cls);
  return trailing_space(u, i, n);
}

// Llama 3's regex with \p{N}{1,max_digits} (pre_tokenizers.h): where its match at units[i] ends.
std::size_t llama3_match(const Units& u, std::size_t i, std::size_t n, std::size_t max_digits) {
  if (const std::size_t j = contraction(u, i, n, true); j > i) return j;
  const RegexClass cls = u[i].cls;
  // [^\r\n\p{L}\p{N}]?\p{L}+: letters, after at most one character that is none of those.
  if (cls == RegexClass::letter) return run_end(u, i, n, cls);
  if (cls != RegexClass::number && !is_newline(u[i].cp) && i + 1 < n &&
      u[i + 1].cls == RegexClass::letter)
    return run_end(u, i + 1, n, RegexClass::letter);
  if (cls == RegexClass::number) return run_end(u, i, n, cls, max_digits);  // \p{N}{1,max}
  // ␠?[^\s\p{L}\p{N}]+[\r\n]*: the optional space is taken only when such a run follows it.
  const std::size_t s = u[i].cp == ' ' && i + 1 < n ? i + 1 : i;
  if (u[s].cls == RegexClass::other) {
    std::size_t j = run_end(u, s, n, RegexClass::other);
    while (j < n && is_newline(u[j].cp)) ++j;
    return j;
  }
  // \s*[\r\n]+: \s* takes the whole run of white space, then gives back until a newline can
  // follow, so the match ends after the run's last \r or \n.
  const std::size_t j = run_end(u, i, n, RegexClass::space);
  for (std::size_t k = j; k > i; --k)
    if (is_newline(u[k - 1].cp)) return k;
  return trailing_space(u, i, n);
}

Units units_of(std::string_view text) {
  Units units;
  units.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t begin = i;
    const char32_t cp = utf8::next(text, i);
    units.push_back({cp, begin, regex_class(cp)});
  }
  return units;
}

// Where the piece of `p` that starts at units[i] ends.
std::size_t match_end(PreTokenizer p, const Units& u, std::size_t i, std::size_t n) {
  switch (p) {
    case PreTokenizer::llama3:
      return llama3_match(u, i, n, 3);
    case PreTokenizer::qwen2:
      return llama3_match(u, i, n, 1);
    case PreTokenizer::gpt2:
      return gpt2_match(u, i, n);
    case PreTokenizer::smollm:
      break;
  }
  // Digits(individual_digits): each \p{N} alone; GPT-2's regex on each stretch between them.
  if (u[i].cls == RegexClass::number) return i + 1;
  std::size_t end = i;
  while (end < n && u[end].cls != RegexClass::number) ++end;
  return gpt2_match(u, i, end);
}

}  // namespace

std::optional<PreTokenizer> pre_tokenizer_named(std::string_view name) {
  for (const Named& n : kNames)
    if (n.name == name) return n.p;
  return std::nullopt;
}

std::string_view pre_tokenizer_name(PreTokenizer p) {
  for (const Named& n : kNames)
    if (n.p == p) return n.name;
  return "?";
}

std::string known_pre_tokenizer_names() {
  std::string out;
  for (const Named& n : kNames) {
    out += out.empty() ? "\"" : ", \"";
    out += n.name;
    out += '"';
  }
  return out;
}

bool ignores_merges(PreTokenizer p) { return p == PreTokenizer::llama3; }

bool normalizes_to_nfc(PreTokenizer p) { return p == PreTokenizer::qwen2; }

std::vector<std::size_t> pre_tokenizer_cuts(PreTokenizer p, std::string_view text) {
  const Units u = units_of(text);
  const std::size_t n = u.size();
  std::vector<std::size_t> cuts;
  for (std::size_t i = 0; i < n;) {
    i = match_end(p, u, i, n);
    cuts.push_back(i < n ? u[i].begin : text.size());
  }
  return cuts;
}

}  // namespace qkv
