// models/text/nfc.h — Unicode Normalization Form C (UAX #15), for the NFC normalizer of Qwen's
// tokenizer.json: canonical decomposition, canonical ordering by combining class, canonical
// composition. The decompositions are nfc_table.cpp (scripts/make_nfc_table.py, from Python's
// unicodedata, the version of core/text/unicode_tables.h, whose combining classes it uses);
// Hangul syllables are composed and decomposed by the algorithm of Unicode §3.12.
#pragma once

#include <string>
#include <string_view>

namespace qkv::nfc {

struct Decomposition {
  char32_t cp;
  char32_t first, second;  // second: 0 for a singleton
  bool composes;           // a primary composite: not in Full_Composition_Exclusion
};
extern const Decomposition kDecompositions[];  // by cp, ascending
extern const int kDecompositionCount;

}  // namespace qkv::nfc

namespace qkv {

// NFC(text) of valid UTF-8 text (checked by the caller). Text below U+0300 is its own NFC and is
// returned as it is without decoding.
std::string to_nfc(std::string_view text);

}  // namespace qkv
