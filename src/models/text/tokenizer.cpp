// BERT's basic tokenizer and WordPiece, step by step as transformers' BasicTokenizer and
// WordpieceTokenizer (models/bert/tokenization_bert_legacy.py) run them; see tokenizer.h.
#include "models/text/tokenizer.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <utility>

#include "core/text/unicode_tables.h"
#include "core/text/utf8.h"
#include "qkv/tensor.h"

namespace qkv {
namespace {

namespace uc = unicode;

// A code point and the bytes [begin, end) of the original text it came from.
struct Char {
  char32_t cp;
  std::size_t begin, end;
  uc::Properties props;
};

uc::Properties properties(char32_t cp) {
  static const auto ascii = [] {
    std::array<uc::Properties, 128> table;
    for (char32_t c = 0; c < 128; ++c) table[c] = uc::properties(c);
    return table;
  }();
  return cp < 128 ? ascii[cp] : uc::properties(cp);
}

// str.lower()'s Final_Sigma (Unicode §3.13, Table 3-17): Σ becomes ς when a cased letter comes
// before it and none after it, case-ignorable characters (marks, apostrophes, ...) skipped.
bool is_final_sigma(const std::vector<Char>& word, std::size_t i) {
  std::size_t j = i;
  while (j > 0 && word[j - 1].props.has(uc::kCaseIgnorable)) --j;
  if (j == 0 || !word[j - 1].props.has(uc::kCased)) return false;
  j = i + 1;
  while (j < word.size() && word[j].props.has(uc::kCaseIgnorable)) ++j;
  return j == word.size() || !word[j].props.has(uc::kCased);
}

// One whitespace-separated word, lowercased, then run_strip_accents: NFD, Mn dropped.
void lower_and_strip_accents(const std::vector<Char>& word, std::vector<Char>& out) {
  out.clear();
  for (std::size_t i = 0; i < word.size(); ++i) {
    const Char& c = word[i];
    if (c.cp < 0x80) {
      const char32_t lower = c.cp >= 'A' && c.cp <= 'Z' ? c.cp + 32 : c.cp;
      out.push_back({lower, c.begin, c.end, properties(lower)});
    } else if (c.cp == uc::kCapitalSigma) {
      const char32_t sigma = is_final_sigma(word, i) ? uc::kFinalSigma : uc::kSmallSigma;
      out.push_back({sigma, c.begin, c.end, properties(sigma)});
    } else {
      char32_t folded[uc::kMaxFoldLength];
      const int n = uc::lower_nfd(c.cp, folded);
      for (int k = 0; k < n; ++k) out.push_back({folded[k], c.begin, c.end, properties(folded[k])});
    }
  }
  // NFD's canonical ordering across the word: a stable sort by combining class within each run of
  // non-starters. It decides the order of the few non-starters that are not Mn (e.g. U+1D165).
  for (std::size_t i = 0; i < out.size();) {
    std::size_t j = i;
    while (j < out.size() && out[j].props.ccc != 0) ++j;
    if (j - i > 1) {
      std::stable_sort(out.begin() + i, out.begin() + j,
                       [](const Char& a, const Char& b) { return a.props.ccc < b.props.ccc; });
    }
    i = j == i ? i + 1 : j;
  }
  std::erase_if(out, [](const Char& c) { return c.props.has(uc::kNonspacingMark); });
}

}  // namespace

// A word as WordPiece receives it: its text, where each code point starts in it, and the original
// bytes each code point came from.
struct WordPieceTokenizer::Sink {
  std::string text;
  std::vector<std::size_t> offsets;  // offsets[i]: code point i's first byte; then text.size()
  std::vector<Char> chars;

  virtual ~Sink() = default;
  // A special token written in the text at [begin, end). Return false to stop.
  virtual bool special(int32_t id, std::size_t begin, std::size_t end) = 0;
  // The word in text/offsets/chars. Return false to stop.
  virtual bool word() = 0;
};

void WordPieceTokenizer::run(std::string_view text, Sink& sink) const {
  utf8::validate(text);
  std::vector<Char> raw, folded;
  // run_split_on_punc, then the sink.
  auto emit = [&](std::size_t first, std::size_t last) {
    sink.text.clear(), sink.offsets.clear(), sink.chars.clear();
    for (std::size_t k = first; k < last; ++k) {
      sink.offsets.push_back(sink.text.size());
      utf8::append(sink.text, folded[k].cp);
      sink.chars.push_back(folded[k]);
    }
    sink.offsets.push_back(sink.text.size());
    return sink.word();
  };
  auto flush = [&] {
    if (raw.empty()) return true;
    lower_and_strip_accents(raw, folded);
    raw.clear();
    std::size_t start = 0;
    for (std::size_t k = 0; k < folded.size(); ++k) {
      if (!folded[k].props.has(uc::kPunctuation)) continue;
      if (start < k && !emit(start, k)) return false;
      if (!emit(k, k + 1)) return false;
      start = k + 1;
    }
    return start == folded.size() || emit(start, folded.size());
  };
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] == '[') {  // HF's added-token trie: special tokens split the text first
      const auto it = std::find_if(specials_.begin(), specials_.end(), [&](int32_t id) {
        return text.substr(i).starts_with(vocab_[id]);
      });
      if (it != specials_.end()) {
        const std::size_t end = i + vocab_[*it].size();
        if (!flush() || !sink.special(*it, i, end)) return;
        i = end;
        continue;
      }
    }
    const std::size_t begin = i;
    const char32_t cp = utf8::next(text, i);
    const uc::Properties props = properties(cp);
    if (props.has(uc::kDropped)) continue;  // clean_text
    if (props.has(uc::kWhitespace | uc::kOtherSeparator)) {
      if (!flush()) return;
    } else if (uc::is_cjk(cp)) {  // tokenize_chinese_chars
      if (!flush()) return;
      raw.push_back({cp, begin, i, props});
      if (!flush()) return;
    } else {
      raw.push_back({cp, begin, i, props});
    }
  }
  flush();
}

std::vector<Token> WordPieceTokenizer::pieces(std::string_view text, std::size_t limit, int segment,
                                              bool& cut) const {
  struct Pieces : Sink {
    const WordPieceTokenizer& tok;
    std::size_t limit;
    int segment;
    bool cut = false;
    std::vector<Token> out, word_pieces;

    Pieces(const WordPieceTokenizer& t, std::size_t n, int s) : tok(t), limit(n), segment(s) {}
    bool add(Token token) {
      if (out.size() == limit) return cut = true, false;
      token.segment = segment;
      out.push_back(std::move(token));
      return true;
    }
    bool special(int32_t id, std::size_t begin, std::size_t end) override {
      return add({id, tok.vocab_[id], begin, end});
    }
    // wordpiece: greedy longest-match-first; no match anywhere makes the whole word [UNK].
    bool word() override {
      const std::size_t n = chars.size();
      auto span = [&](std::size_t first, std::size_t last, int32_t id) {
        Token t{id, tok.vocab_[id], chars[first].begin, chars[first].end};
        for (std::size_t k = first; k < last; ++k) {  // NFD may reorder; take the hull
          t.begin = std::min(t.begin, chars[k].begin), t.end = std::max(t.end, chars[k].end);
        }
        return t;
      };
      word_pieces.clear();
      for (std::size_t start = 0; start < n && n <= kMaxCharsPerWord;) {
        const Map& map = start == 0 ? tok.ids_ : tok.continuation_;
        const std::size_t longest = start == 0 ? tok.longest_ : tok.longest_continuation_;
        std::size_t end = n;
        while (end > start && offsets[end] - offsets[start] > longest) --end;
        int32_t id = -1;
        for (; end > start; --end) {
          id = tok.lookup(
              map, std::string_view(text).substr(offsets[start], offsets[end] - offsets[start]));
          if (id >= 0) break;
        }
        if (id < 0) {
          word_pieces.clear();
          break;
        }
        word_pieces.push_back(span(start, end, id));
        start = end;
      }
      if (word_pieces.empty()) return add(span(0, n, tok.unk_id_));
      for (Token& piece : word_pieces) {
        if (!add(std::move(piece))) return false;
      }
      return true;
    }
  } sink(*this, limit, segment);
  run(text, sink);
  cut = sink.cut;
  return std::move(sink.out);
}

Encoding WordPieceTokenizer::encode(std::string_view text, std::size_t max_length) const {
  if (max_length < 2) {
    throw Error("max_length is " + std::to_string(max_length) +
                "; expected at least 2, room for [CLS] and [SEP]");
  }
  Encoding out;
  out.tokens = pieces(text, max_length - 2, 0, out.truncated);
  out.tokens.insert(out.tokens.begin(), {cls_id_, vocab_[cls_id_], 0, 0});
  out.tokens.push_back({sep_id_, vocab_[sep_id_], text.size(), text.size()});
  return out;
}

Encoding WordPieceTokenizer::encode_pair(std::string_view a, std::string_view b,
                                         std::size_t max_length) const {
  if (max_length < 3) {
    throw Error("max_length is " + std::to_string(max_length) +
                "; expected at least 3 for a pair, room for [CLS] and two [SEP]");
  }
  // No piece past the first `room` of either text can be kept, so neither is split further.
  const std::size_t room = max_length - 3;
  bool cut_a = false, cut_b = false;
  std::vector<Token> pa = pieces(a, room, 0, cut_a), pb = pieces(b, room, 1, cut_b);
  Encoding out;
  out.truncated = cut_a || cut_b || pa.size() + pb.size() > room;
  // 'longest_first' (transformers' truncate_sequences): the last piece of the longer text goes, B's
  // on a tie. Stopping each text at `room` pieces above changes nothing: a text longer than `room`
  // loses pieces until it is no longer than the other, and then both shrink in turn, B first.
  while (pa.size() + pb.size() > room) (pa.size() > pb.size() ? pa : pb).pop_back();
  out.tokens.reserve(pa.size() + pb.size() + 3);
  out.tokens.push_back({cls_id_, vocab_[cls_id_], 0, 0, 0});
  std::move(pa.begin(), pa.end(), std::back_inserter(out.tokens));
  out.tokens.push_back({sep_id_, vocab_[sep_id_], a.size(), a.size(), 0});
  std::move(pb.begin(), pb.end(), std::back_inserter(out.tokens));
  out.tokens.push_back({sep_id_, vocab_[sep_id_], b.size(), b.size(), 1});
  return out;
}

std::vector<std::string> WordPieceTokenizer::basic_tokenize(std::string_view text) const {
  struct Words : Sink {
    const WordPieceTokenizer& tok;
    std::vector<std::string> out;
    explicit Words(const WordPieceTokenizer& t) : tok(t) {}
    bool special(int32_t id, std::size_t, std::size_t) override {
      return out.push_back(tok.vocab_[id]), true;
    }
    bool word() override { return out.push_back(text), true; }
  } sink(*this);
  run(text, sink);
  return std::move(sink.out);
}

std::vector<int32_t> Encoding::ids() const {
  std::vector<int32_t> out;
  out.reserve(tokens.size());
  for (const Token& t : tokens) out.push_back(t.id);
  return out;
}

std::vector<int32_t> Encoding::type_ids() const {
  std::vector<int32_t> out;
  out.reserve(tokens.size());
  for (const Token& t : tokens) out.push_back(t.segment);
  return out;
}

WordPieceTokenizer::WordPieceTokenizer(std::vector<std::string> vocab) : vocab_(std::move(vocab)) {
  if (vocab_.size() > std::size_t(INT32_MAX)) {
    throw Error("the vocabulary has " + std::to_string(vocab_.size()) + " tokens; at most 2^31-1");
  }
  for (std::size_t i = 0; i < vocab_.size(); ++i) {
    const std::string& t = vocab_[i];
    ids_.insert_or_assign(t, int32_t(i));  // a repeated token keeps its last id, as load_vocab
    longest_ = std::max(longest_, t.size());
    if (t.starts_with("##")) {
      continuation_.insert_or_assign(t.substr(2), int32_t(i));
      longest_continuation_ = std::max(longest_continuation_, t.size() - 2);
    }
  }
  auto need = [&](const char* name, const char* role) {
    const int32_t found = id(name);
    if (found < 0) {
      throw Error("the vocabulary (" + std::to_string(vocab_.size()) + " tokens) has no " + name +
                  " token; BERT needs it " + role);
    }
    specials_.push_back(found);
    return found;
  };
  pad_id_ = need("[PAD]", "to pad batches");
  unk_id_ = need("[UNK]", "for words WordPiece cannot split");
  cls_id_ = need("[CLS]", "to start every encoding");
  sep_id_ = need("[SEP]", "to end every encoding");
  if (id("[MASK]") >= 0) specials_.push_back(id("[MASK]"));
}

WordPieceTokenizer WordPieceTokenizer::from_vocab_file(const std::string& path) {
  const std::string bytes = read_input_file(path, kVocabInput);
  utf8::validate(bytes, path + ": the vocabulary");
  // Python's universal newlines: \n, \r\n and \r all end a line; no empty token after the last.
  std::vector<std::string> vocab;
  std::size_t start = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != '\n' && bytes[i] != '\r') continue;
    vocab.push_back(bytes.substr(start, i - start));
    if (bytes[i] == '\r' && i + 1 < bytes.size() && bytes[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < bytes.size()) vocab.push_back(bytes.substr(start));
  try {
    return WordPieceTokenizer(std::move(vocab));
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

int32_t WordPieceTokenizer::lookup(const Map& map, std::string_view key) const {
  const auto it = map.find(key);
  return it == map.end() ? -1 : it->second;
}

int32_t WordPieceTokenizer::id(std::string_view token) const { return lookup(ids_, token); }

const std::string& WordPieceTokenizer::token(int32_t id) const {
  if (id < 0 || std::size_t(id) >= vocab_.size()) {
    throw Error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                std::to_string(vocab_.size()) + ")");
  }
  return vocab_[id];
}

}  // namespace qkv
