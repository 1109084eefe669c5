#!/usr/bin/env python3
"""Writes src/core/text/unicode_tables.cpp, the Unicode data of the BERT tokenizer,
src/core/text/unicode_widths.cpp, the terminal's column widths, and
src/core/text/unicode_classes.cpp, the classes the byte-level BPE pre-tokenizer asks about.

    python3 scripts/make_unicode_tables.py            # writes src/core/text/unicode_tables.cpp
    python3 scripts/make_unicode_tables.py --check    # compares the file with a fresh generation

Hugging Face's slow BertTokenizer (BasicTokenizer) decides everything with Python: the categories
of `unicodedata`, `str.lower()`, NFC and NFD. These tables are taken from the same Python so that
src/models/text/tokenizer.cpp computes the same words. Run it with the Python whose
`unicodedata.unidata_version` made the goldens (tests/golden/minilm); the version is written into
the file.

What the tokenizer needs, per code point:
  - properties (a range table): dropped by clean_text (NUL, U+FFFD, category C* except \\t \\n \\r);
    BERT whitespace (' ', \\t, \\n, \\r, Zs); another separator of Python's str.split() that survives
    clean_text (Zl, Zp); punctuation (ASCII 33-47, 58-64, 91-96, 123-126, or P*); Mn; and for the
    Final_Sigma rule of str.lower(), Cased and Case_Ignorable exactly as CPython sees them (found
    by asking str.lower(), which does not expose them otherwise); the canonical combining class.
  - the fold NFD(c.lower()) where it is not c itself (Hangul syllables are left to the algorithm
    of Unicode §3.12). Σ folds to σ here; the tokenizer picks ς by context as str.lower() does.

BasicTokenizer computes lower-then-NFD on NFC(text); the tokenizer folds code point by code point
without NFC. Before writing, this script proves the two agree: on every code point, on the
canonical decomposition of every code point, and on random words and texts of awkward characters,
with the tokenizer's algorithm modelled here from the tables alone.
"""

import argparse
import os
import random
import sys
import unicodedata as ud

MAX_CP = 0x110000
SIGMA = 0x3A3
HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3

# Bits of the property table; the same names and values are in src/core/text/unicode_tables.h.
DROPPED, WHITESPACE, OTHER_SEPARATOR, PUNCTUATION, NONSPACING_MARK, CASED, CASE_IGNORABLE = (
    1, 2, 4, 8, 16, 32, 64)

# BertTokenizer's _is_chinese_char, inclusive ranges.
CJK_RANGES = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]


def code_points():
    return (cp for cp in range(MAX_CP) if not 0xD800 <= cp <= 0xDFFF)


def cased_and_ignorable(c):
    """CPython's _PyUnicode_IsCased / _PyUnicode_IsCaseIgnorable as str.lower() uses them.

    lower() turns a final Σ into ς when, skipping case-ignorable characters, the one before is
    cased. "cΣ" ends in ς exactly when c is cased and not case-ignorable; "AcΣ" exactly when c is
    case-ignorable or cased. Cased is only ever asked of characters that are not case-ignorable.
    """
    cased = (c + "\u03a3").lower()[-1] == "\u03c2"
    either = ("A" + c + "\u03a3").lower()[-1] == "\u03c2"
    return cased, either and not cased


def properties(cp):
    c = chr(cp)
    cat = ud.category(c)
    bits = 0
    if cp == 0 or cp == 0xFFFD or (cat.startswith("C") and c not in "\t\n\r"):
        bits |= DROPPED
    if c in " \t\n\r" or cat == "Zs":
        bits |= WHITESPACE
    if c.isspace() and not bits:
        bits |= OTHER_SEPARATOR
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or \
            cat.startswith("P"):
        bits |= PUNCTUATION
    if cat == "Mn":
        bits |= NONSPACING_MARK
    cased, ignorable = cased_and_ignorable(c)
    bits |= (CASED if cased else 0) | (CASE_IGNORABLE if ignorable else 0)
    return bits, ud.combining(c)


def hangul_nfd(cp):
    s = cp - HANGUL_FIRST
    out = [0x1100 + s // 588, 0x1161 + (s % 588) // 28]
    if s % 28:
        out.append(0x11A7 + s % 28)
    return out


def build():
    props = {}
    for cp in range(MAX_CP):
        props[cp] = (DROPPED, 0) if 0xD800 <= cp <= 0xDFFF else properties(cp)
    ranges = []
    for cp in range(MAX_CP):
        if not ranges or ranges[-1][1:] != props[cp]:
            ranges.append((cp,) + props[cp])
    folds = {}
    for cp in code_points():
        if props[cp][0] & DROPPED:
            continue
        mapped = [ord(x) for x in ud.normalize("NFD", chr(cp).lower())]
        if HANGUL_FIRST <= cp <= HANGUL_LAST:
            assert mapped == hangul_nfd(cp), hex(cp)
        elif mapped != [cp]:
            folds[cp] = mapped
    return props, ranges, folds


# ---- the tokenizer's algorithm, from the tables alone (mirrors src/models/text/tokenizer.cpp) ----

class Model:
    def __init__(self, props, folds):
        self.props, self.folds = props, folds

    def bits(self, cp):
        return self.props[cp][0]

    def fold(self, cp):
        if HANGUL_FIRST <= cp <= HANGUL_LAST:
            return hangul_nfd(cp)
        return self.folds.get(cp, [cp])

    def final_sigma(self, word, i):
        j = i - 1
        while j >= 0 and self.bits(word[j]) & CASE_IGNORABLE:
            j -= 1
        if j < 0 or not self.bits(word[j]) & CASED:
            return False
        j = i + 1
        while j < len(word) and self.bits(word[j]) & CASE_IGNORABLE:
            j += 1
        return j == len(word) or not self.bits(word[j]) & CASED

    def fold_word(self, word):
        """lower, NFD and drop Mn for one whitespace-separated word (code points)."""
        out = []
        for i, cp in enumerate(word):
            if cp == SIGMA:
                out.append(0x3C2 if self.final_sigma(word, i) else 0x3C3)
            else:
                out.extend(self.fold(cp))
        # Canonical ordering: a stable sort by combining class inside each run of non-starters.
        i = 0
        while i < len(out):
            if self.props[out[i]][1] == 0:
                i += 1
                continue
            j = i
            while j < len(out) and self.props[out[j]][1] != 0:
                j += 1
            out[i:j] = sorted(out[i:j], key=lambda c: self.props[c][1])
            i = j
        return [c for c in out if not self.bits(c) & NONSPACING_MARK]

    def basic_tokenize(self, text):
        words, raw = [], []

        def flush():
            if raw:
                word = []
                for c in self.fold_word(raw):
                    if self.bits(c) & PUNCTUATION:
                        if word:
                            words.append("".join(map(chr, word)))
                            word = []
                        words.append(chr(c))
                    else:
                        word.append(c)
                if word:
                    words.append("".join(map(chr, word)))
                raw.clear()

        for ch in text:
            cp = ord(ch)
            b = self.bits(cp)
            if b & DROPPED:
                continue
            if b & (WHITESPACE | OTHER_SEPARATOR):
                flush()
            elif any(lo <= cp <= hi for lo, hi in CJK_RANGES):
                flush()
                raw.append(cp)
                flush()
            else:
                raw.append(cp)
        flush()
        return words


# ---- BasicTokenizer as transformers writes it (do_lower_case, strip_accents=None) ----

def hf_fold(token):
    return "".join(c for c in ud.normalize("NFD", token.lower()) if ud.category(c) != "Mn")


def hf_is_punctuation(c):
    cp = ord(c)
    return 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or \
        ud.category(c).startswith("P")


def hf_basic_tokenize(text):
    cleaned = []
    for c in text:
        cat = ud.category(c)
        if ord(c) in (0, 0xFFFD) or (cat.startswith("C") and c not in "\t\n\r"):
            continue
        cleaned.append(" " if c in " \t\n\r" or cat == "Zs" else c)
    spaced = "".join(f" {c} " if any(lo <= ord(c) <= hi for lo, hi in CJK_RANGES) else c
                     for c in cleaned)
    pieces = []
    for token in ud.normalize("NFC", spaced).split():
        current = None
        for c in hf_fold(token):
            if hf_is_punctuation(c):
                pieces.append(c)
                current = None
            else:
                if current is None:
                    pieces.append("")
                    current = len(pieces) - 1
                pieces[current] += c
    return " ".join(pieces).split()


def verify(props, folds):
    model = Model(props, folds)
    checked = 0
    for cp in code_points():
        if props[cp][0] & (DROPPED | WHITESPACE | OTHER_SEPARATOR):
            continue
        for word in ([cp], [ord(c) for c in ud.normalize("NFD", chr(cp))]):
            expected = hf_fold(ud.normalize("NFC", "".join(map(chr, word))))
            got = "".join(map(chr, model.fold_word(word)))
            assert got == expected, (hex(cp), got, expected)
            checked += 1
    # Awkward neighbours: Greek with Σ, marks of every kind (Mn with and without a class, the Mc
    # non-starters), conjoining jamo, İ, singletons, apostrophes and modifier letters (ignorable),
    # compatibility ideographs, separators and dropped characters.
    # A tenth of the characters are any code point at all.
    marks = [chr(cp) for cp in code_points() if props[cp][1] and not props[cp][0] & DROPPED]
    awkward = (list("AaΣσςΑάΆΟΔIİiK.'-’ʰ ,\t\u2028\u00ad\u200b\x00\ufffd한\u1100\u1161\u11a8")
               + [chr(c) for c in (0x212B, 0x2126, 0x212A, 0xF900, 0x2F800, 0x345, 0x34F, 0x1F80,
                                   0x1E9E, 0x3A3, 0x130, 0x4E00, 0x0B47, 0x0B3E, 0x2BC)])
    rng = random.Random(20240607)

    def character():
        roll = rng.random()
        if roll < 0.1:
            cp = rng.randrange(MAX_CP - 2048)
            return chr(cp + 2048 if cp >= 0xD800 else cp)
        return rng.choice(marks if roll < 0.4 else awkward)

    for _ in range(200000):
        text = "".join(character() for _ in range(rng.randint(1, 10)))
        got, expected = model.basic_tokenize(text), hf_basic_tokenize(text)
        assert got == expected, (ascii(text), got, expected)
        checked += 1
    return checked


# ---- the C++ file ----

def cpp(ranges, folds, checked):
    lines = [
        "// Generated by scripts/make_unicode_tables.py from Python "
        f"{sys.version.split()[0]}'s unicodedata",
        f"// (Unicode {ud.unidata_version}); do not edit. Regenerate with",
        "//   python3 scripts/make_unicode_tables.py",
        f"// which first checks the tables against Python ({checked} words and texts agreed).",
        '#include "core/text/unicode_tables.h"',
        "",
        "#include <algorithm>",
        "#include <cstdint>",
        "#include <iterator>",
        "",
        "namespace qkv::unicode {",
        "",
        f'const char* const kUnicodeVersion = "{ud.unidata_version}";',
        "",
        "namespace {",
        "",
        "struct Range {",
        "  char32_t first;  // the range lasts until the next one's first",
        "  uint8_t bits;",
        "  uint8_t ccc;",
        "};",
        "",
        "struct Fold {",
        "  char32_t cp;",
        "  uint16_t offset;  // into kFoldPool",
        "  uint8_t length;",
        "};",
        "",
        "// clang-format off",
        f"constexpr Range kRanges[{len(ranges)}] = {{",
    ]
    lines += wrap(f"{{0x{first:X},{bits},{ccc}}}," for first, bits, ccc in ranges)
    lines.append("};")
    lines.append("")
    pool, entries = [], []
    for cp in sorted(folds):
        entries.append(f"{{0x{cp:X},{len(pool)},{len(folds[cp])}}},")
        pool.extend(folds[cp])
    assert len(pool) < 65536 and max(len(v) for v in folds.values()) <= 4
    lines.append(f"constexpr char32_t kFoldPool[{len(pool)}] = {{")
    lines += wrap(f"0x{cp:X}," for cp in pool)
    lines.append("};")
    lines.append("")
    lines.append(f"constexpr Fold kFolds[{len(entries)}] = {{")
    lines += wrap(entries)
    lines.append("};")
    lines.append("")
    lines.append(f"constexpr char32_t kCjkRanges[{len(CJK_RANGES)}][2] = {{")
    lines += wrap(f"{{0x{lo:X},0x{hi:X}}}," for lo, hi in CJK_RANGES)
    lines.append("};")
    lines.append("// clang-format on")
    lines.append("")
    lines.append(f"static_assert(kMaxFoldLength >= {max(len(v) for v in folds.values())});")
    lines.append(CPP_FUNCTIONS)
    return "\n".join(lines) + "\n"


def width_ranges():
    """Columns a terminal gives each code point, as ranges (first, width) lasting until the next:
    0 for combining and format characters (Mn, Me, Cf but the soft hyphen) and the Hangul medial
    vowels and final consonants U+1160..U+11FF, which join the syllable before them; 2 where
    East_Asian_Width is W or F (CJK, kana, Hangul syllables, most emoji); 1 otherwise."""
    def width(cp):
        c = chr(cp)
        if cp == 0xAD:
            return 1
        if ud.category(c) in ("Mn", "Me", "Cf") or 0x1160 <= cp <= 0x11FF:
            return 0
        return 2 if ud.east_asian_width(c) in ("W", "F") else 1

    return value_ranges(width)


def value_ranges(value_of):
    """Every code point's value as ranges (first, value), each lasting until the next."""
    ranges, last = [], None
    for cp in range(MAX_CP):
        v = value_of(cp)
        if v != last:
            ranges.append((cp, v))
            last = v
    return ranges


def cpp_range_file(about, struct, field, table, entries, signature, result, extra=()):
    """A generated .cpp of one lookup: a sorted table of ranges (first code point, value), each
    lasting until the next, and `signature` returning `result` of the range holding cp. `about`
    ends the header comment's first sentence."""
    lines = [
        f"// Generated by scripts/make_unicode_tables.py from Python {sys.version.split()[0]}'s "
        "unicodedata",
        f"// (Unicode {ud.unidata_version}); do not edit. {about[0]}",
        *about[1:],
        "#include <algorithm>",
        "#include <cstdint>",
        "#include <iterator>",
        "",
        '#include "core/text/unicode_tables.h"',
        "",
        "namespace qkv::unicode {",
        "namespace {",
        "",
        f"struct {struct} {{",
        "  char32_t first;  // the range lasts until the next one's first",
        f"  {field};",
        "};",
        "",
        *extra,
        "// clang-format off",
        f"constexpr {struct} {table}[{len(entries)}] = {{",
    ]
    lines += wrap(entries)
    lines += [
        "};",
        "// clang-format on",
        "",
        "}  // namespace",
        "",
        f"{signature} {{",
        f"  const auto it = std::upper_bound(std::begin({table}), std::end({table}), cp,",
        f"                                   [](char32_t c, const {struct}& r) {{ return c < r.first; }});",
        f"  return it[-1].{result};",
        "}",
        "",
        "}  // namespace qkv::unicode",
    ]
    return "\n".join(lines) + "\n"


def cpp_widths():
    """src/core/text/unicode_widths.cpp: unicode::columns(), the terminal's table, apart from the
    tokenizer's."""
    return cpp_range_file(
        ["The columns a terminal gives each code point", "// (unicode_tables.h, columns())."],
        "WidthRange", "uint8_t columns", "kWidths",
        [f"{{0x{first:X},{w}}}," for first, w in width_ranges()], "int columns(char32_t cp)",
        "columns")

# The White_Space property (PropList.txt, unchanged since Unicode 6.3), which \s means in the
# Oniguruma regex of Hugging Face's ByteLevel pre-tokenizer. Python's str.isspace() differs
# (it adds U+001C..U+001F, and otherwise agrees: class_ranges checks that), so the list is written
# here.
WHITE_SPACE = ([*range(0x9, 0xE), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028,
                0x2029, 0x202F, 0x205F, 0x3000])

# Classes of unicode_classes.cpp; the same values are in src/core/text/unicode_tables.h.
CLASS_OTHER, CLASS_LETTER, CLASS_NUMBER, CLASS_SPACE = 0, 1, 2, 3


def class_ranges():
    """The class of each code point for the GPT-2 pre-tokenizer's regex, as ranges (first, class)
    lasting until the next: \\p{L} (category L*), \\p{N} (N*), \\s (White_Space) or other."""
    white = set(WHITE_SPACE)
    assert all(ud.category(chr(cp))[0] not in "LN" for cp in white)
    isspace = {cp for cp in code_points() if chr(cp).isspace()}
    assert isspace - white == set(range(0x1C, 0x20)) and white <= isspace

    def cls(cp):
        if cp in white:
            return CLASS_SPACE
        cat = ud.category(chr(cp))
        return CLASS_LETTER if cat[0] == "L" else CLASS_NUMBER if cat[0] == "N" else CLASS_OTHER

    return value_ranges(cls)


def cpp_classes():
    """src/core/text/unicode_classes.cpp: unicode::regex_class(), for the BPE pre-tokenizer."""
    return cpp_range_file(
        ["The class of each code point in the BPE pre-tokenizer's",
         "// regex: \\p{L}, \\p{N}, \\s (White_Space) or other (unicode_tables.h, regex_class())."],
        "ClassRange", "RegexClass cls", "kClasses",
        [f"{{0x{first:X},{'OLNS'[c]}}}," for first, c in class_ranges()],
        "RegexClass regex_class(char32_t cp)", "cls",
        extra=["constexpr RegexClass O = RegexClass::other, L = RegexClass::letter, "
               "N = RegexClass::number,",
               "                     S = RegexClass::space;",
               ""])

def wrap(items, width=98):
    out, line = [], "  "
    for item in items:
        if len(line) + len(item) > width:
            out.append(line.rstrip())
            line = "  "
        line += item
    if line.strip():
        out.append(line.rstrip())
    return out


CPP_FUNCTIONS = """
}  // namespace

Properties properties(char32_t cp) {
  const auto it = std::upper_bound(std::begin(kRanges), std::end(kRanges), cp,
                                   [](char32_t c, const Range& r) { return c < r.first; });
  return {it[-1].bits, it[-1].ccc};
}

bool is_cjk(char32_t cp) {
  for (const auto& r : kCjkRanges) {
    if (cp >= r[0] && cp <= r[1]) return true;
  }
  return false;
}

int lower_nfd(char32_t cp, char32_t out[kMaxFoldLength]) {
  // Hangul syllables: Unicode 3.12, Conjoining Jamo Behavior.
  constexpr char32_t kFirst = 0xAC00, kCount = 11172, kPerL = 588, kPerV = 28;
  if (cp >= kFirst && cp < kFirst + kCount) {
    const char32_t s = cp - kFirst;
    out[0] = 0x1100 + s / kPerL;
    out[1] = 0x1161 + s % kPerL / kPerV;
    if (s % kPerV == 0) return 2;
    out[2] = 0x11A7 + s % kPerV;
    return 3;
  }
  const auto it = std::lower_bound(std::begin(kFolds), std::end(kFolds), cp,
                                   [](const Fold& f, char32_t c) { return f.cp < c; });
  if (it == std::end(kFolds) || it->cp != cp) {
    out[0] = cp;
    return 1;
  }
  std::copy_n(kFoldPool + it->offset, it->length, out);
  return it->length;
}

}  // namespace qkv::unicode"""


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(root, "src/core/text/unicode_tables.cpp"))
    parser.add_argument("--widths-out",
                        default=os.path.join(root, "src/core/text/unicode_widths.cpp"))
    parser.add_argument("--classes-out",
                        default=os.path.join(root, "src/core/text/unicode_classes.cpp"))
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when --out, --widths-out or --classes-out differs from what "
                        "this Python generates")
    args = parser.parse_args()
    props, ranges, folds = build()
    checked = verify(props, folds)
    files = {args.out: cpp(ranges, folds, checked), args.widths_out: cpp_widths(),
             args.classes_out: cpp_classes()}
    if args.check:
        stale = 0
        for path, text in files.items():
            with open(path, encoding="utf-8") as f:
                same = f.read() == text
            print(f"{path}: {'up to date' if same else 'differs from a fresh generation'}")
            stale += not same
        return 1 if stale else 0
    for path, text in files.items():
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    print(f"wrote {args.out}: Unicode {ud.unidata_version}, {len(ranges)} ranges, "
          f"{len(folds)} folds, {checked} checks against Python")
    return 0


if __name__ == "__main__":
    sys.exit(main())
