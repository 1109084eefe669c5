// core/text/unicode_tables.h — the Unicode data of the BERT tokenizer, the terminal's column
// widths and the classes of the byte-level BPE pre-tokenizer, per code point.
//
// Hugging Face's BasicTokenizer asks Python's unicodedata and str.lower(); the tables in
// unicode_tables.cpp are generated from the same Python by scripts/make_unicode_tables.py (which
// also proves that folding code point by code point, as tokenizer.cpp does, equals BasicTokenizer's
// lower-then-NFD of NFC text), the widths in unicode_widths.cpp and the classes in
// unicode_classes.cpp by the same script.
// kUnicodeVersion says which Unicode they describe.
#pragma once

#include <cstdint>

namespace qkv::unicode {

extern const char* const kUnicodeVersion;  // Python's unicodedata.unidata_version, e.g. "14.0.0"

// Property bits (the generator writes the same values).
enum : uint8_t {
  kDropped = 1,         // removed by clean_text: NUL, U+FFFD, category C* except \t \n \r
  kWhitespace = 2,      // BERT's _is_whitespace: ' ', \t, \n, \r or Zs
  kOtherSeparator = 4,  // splits words in Python's str.split() though not BERT whitespace: Zl, Zp
  kPunctuation = 8,     // BERT's _is_punctuation: ASCII 33–47, 58–64, 91–96, 123–126, or P*
  kNonspacingMark = 16,  // category Mn: what run_strip_accents drops after NFD
  kCased = 32,          // Cased as str.lower()'s Final_Sigma rule sees it (asked of non-ignorables)
  kCaseIgnorable = 64,  // Case_Ignorable, ditto
};

struct Properties {
  uint8_t bits = 0;
  uint8_t ccc = 0;  // canonical combining class (0 for starters)
  bool has(uint8_t bit) const { return (bits & bit) != 0; }
};

Properties properties(char32_t cp);

// Columns a terminal gives the code point: 0 for combining and format characters (Mn, Me, Cf
// but the soft hyphen; Hangul medial vowels and final consonants), 2 where East_Asian_Width is
// W or F (CJK, kana, Hangul syllables, most emoji), 1 otherwise. For explain's terminal views.
int columns(char32_t cp);

// What the GPT-2 pre-tokenizer's regex asks of a code point (models/text/bpe.cpp): \p{L} (category
// L*), \p{N} (N*), \s (the White_Space property, as Oniguruma reads it) or none of them.
enum class RegexClass : uint8_t { other = 0, letter = 1, number = 2, space = 3 };
RegexClass regex_class(char32_t cp);

// BertTokenizer's _is_chinese_char: the CJK ideograph blocks (not Hangul, kana or CJK symbols).
bool is_cjk(char32_t cp);

inline constexpr int kMaxFoldLength = 4;
inline constexpr char32_t kCapitalSigma = 0x3A3, kSmallSigma = 0x3C3, kFinalSigma = 0x3C2;

// NFD(c.lower()) for one code point, in canonical order, Mn included; returns how many code points
// it wrote to `out`. Σ gives σ: the final form ς depends on the neighbours (see tokenizer.cpp).
int lower_nfd(char32_t cp, char32_t out[kMaxFoldLength]);

}  // namespace qkv::unicode
