// Unicode NFC (UAX #15 §§ 1.3, 3.11, 3.12 of the Unicode Standard); see nfc.h.
#include "models/text/nfc.h"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/text/unicode_tables.h"
#include "core/text/utf8.h"

namespace qkv {
namespace {

// Hangul syllables (Unicode §3.12): S = S_BASE + (L·V_COUNT + V)·T_COUNT + T.
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr char32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

bool is_syllable(char32_t c) { return c >= kSBase && c < kSBase + kSCount; }

const nfc::Decomposition* decomposition(char32_t cp) {
  const nfc::Decomposition* end = nfc::kDecompositions + nfc::kDecompositionCount;
  const auto* it =
      std::lower_bound(nfc::kDecompositions, end, cp,
                       [](const nfc::Decomposition& d, char32_t c) { return d.cp < c; });
  return it != end && it->cp == cp ? it : nullptr;
}

// The full canonical decomposition of cp, appended (a decomposition's parts decompose again).
void decompose(char32_t cp, std::u32string& out) {
  if (is_syllable(cp)) {
    const char32_t s = cp - kSBase;
    out += kLBase + s / kNCount;
    out += kVBase + s % kNCount / kTCount;
    if (s % kTCount != 0) out += kTBase + s % kTCount;
    return;
  }
  const nfc::Decomposition* d = decomposition(cp);
  if (d == nullptr) {
    out += cp;
    return;
  }
  decompose(d->first, out);
  if (d->second != 0) decompose(d->second, out);
}

int ccc(char32_t cp) { return unicode::properties(cp).ccc; }

// The primary composite of a starter and the character after it, or 0 when there is none.
char32_t composite(char32_t starter, char32_t c) {
  if (starter >= kLBase && starter < kLBase + kLCount && c >= kVBase && c < kVBase + kVCount)
    return kSBase + ((starter - kLBase) * kVCount + (c - kVBase)) * kTCount;
  if (is_syllable(starter) && (starter - kSBase) % kTCount == 0 && c > kTBase &&
      c < kTBase + kTCount)
    return starter + (c - kTBase);
  static const auto pairs = [] {
    std::unordered_map<uint64_t, char32_t> m;
    for (int k = 0; k < nfc::kDecompositionCount; ++k) {
      const nfc::Decomposition& d = nfc::kDecompositions[k];
      if (d.composes) m.emplace(uint64_t(d.first) << 32 | d.second, d.cp);
    }
    return m;
  }();
  const auto it = pairs.find(uint64_t(starter) << 32 | c);
  return it == pairs.end() ? 0 : it->second;
}

// Canonical ordering: each run of non-starters stably sorted by combining class.
void reorder(std::u32string& cps, std::vector<int>& classes) {
  for (std::size_t i = 0; i < cps.size();) {
    if (classes[i] == 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < cps.size() && classes[j] != 0) ++j;
    std::vector<std::pair<int, char32_t>> run;
    for (std::size_t k = i; k < j; ++k) run.emplace_back(classes[k], cps[k]);
    std::stable_sort(run.begin(), run.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t k = i; k < j; ++k) std::tie(classes[k], cps[k]) = run[k - i];
    i = j;
  }
}

}  // namespace

std::string to_nfc(std::string_view text) {
  // Below U+0300 (lead bytes below 0xCC) nothing decomposes into, or composes with, anything else.
  if (std::all_of(text.begin(), text.end(),
                  [](char b) { return static_cast<unsigned char>(b) < 0xCC; }))
    return std::string(text);
  std::u32string cps;
  for (std::size_t i = 0; i < text.size();) decompose(utf8::next(text, i), cps);
  std::vector<int> classes(cps.size());
  for (std::size_t k = 0; k < cps.size(); ++k) classes[k] = ccc(cps[k]);
  reorder(cps, classes);
  // Composition: a character joins the last starter unless blocked — something between them of
  // class 0 or of a class not below its own.
  std::u32string out;
  std::vector<int> out_classes;
  std::ptrdiff_t starter = -1;
  for (std::size_t k = 0; k < cps.size(); ++k) {
    const int cls = classes[k];
    if (starter >= 0) {
      const bool adjacent = std::ptrdiff_t(out.size()) - 1 == starter;
      const bool blocked = !adjacent && out_classes.back() >= cls;
      if (const char32_t c = blocked ? 0 : composite(out[starter], cps[k]); c != 0) {
        out[starter] = c;
        continue;
      }
    }
    if (cls == 0) starter = std::ptrdiff_t(out.size());
    out += cps[k];
    out_classes.push_back(cls);
  }
  std::string result;
  result.reserve(text.size());
  for (const char32_t c : out) utf8::append(result, c);
  return result;
}

}  // namespace qkv
