#include "bench/english.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace qkv::cli::bench {
namespace {

// Every word is one WordPiece token of BERT's uncased vocabulary, so a sentence of n words is
// n + 3 tokens ([CLS], the words, ".", [SEP]); sentence_of_tokens counts them regardless.
constexpr const char* kDeterminers[] = {"the", "a", "this", "that", "every", "some", "my", "our"};
constexpr const char* kAdjectives[] = {"old",   "young",   "small",  "large",  "quiet", "busy",
                                       "dark",  "bright",  "early",  "happy",  "green", "heavy",
                                       "warm",  "cold",    "new",    "famous", "local", "strange",
                                       "short", "careful", "simple", "red"};
constexpr const char* kNouns[] = {"cat",    "dog",     "teacher", "student",  "child",   "farmer",
                                  "doctor", "river",   "city",    "village",  "garden",  "house",
                                  "road",   "market",  "train",   "letter",   "book",    "song",
                                  "window", "door",    "lake",    "mountain", "forest",  "bridge",
                                  "table",  "library", "kitchen", "story",    "machine", "engineer",
                                  "sister", "brother", "king",    "queen",    "visitor", "painter"};
constexpr const char* kVerbs[] = {
    "reads",     "writes",    "finds",   "sees",   "opens",   "carries", "follows",
    "builds",    "watches",   "paints",  "visits", "crosses", "leaves",  "reaches",
    "remembers", "describes", "notices", "joins",  "likes",   "keeps",   "brings"};
constexpr const char* kPrepositions[] = {"near",   "behind",  "across", "under", "over",
                                         "beside", "through", "toward", "with",  "after"};
constexpr const char* kAdverbs[] = {"slowly",  "quickly",  "often",     "always", "rarely",
                                    "quietly", "suddenly", "carefully", "again",  "today"};
constexpr const char* kConjunctions[] = {"and", "but", "because", "while", "so", "although"};

template <std::size_t N>
const char* pick(SplitMix64& rng, const char* const (&words)[N]) {
  return words[rng.below(N)];
}

// One clause of exactly `length` words, 5 to 12:
//   the [adj] noun [adv] verb the [adj] noun [prep the [adj] noun]
// The optional words are chosen at random among those that make the length.
void append_clause(SplitMix64& rng, std::size_t length, std::vector<std::string>& words) {
  std::size_t extra = length - 5;  // beyond "the noun verb the noun"
  const bool prep = extra > 3 || (extra == 3 && rng.below(2) == 0);
  if (prep) extra -= 3;
  bool slot[4] = {};  // adjective 1, adverb, adjective 2, adjective 3 (in the prepositional phrase)
  const std::size_t slots = prep ? 4 : 3;
  for (std::size_t chosen = 0; chosen < extra;) {
    const std::size_t i = rng.below(slots);
    if (!slot[i]) slot[i] = true, ++chosen;
  }
  auto noun_phrase = [&](bool adjective) {
    words.push_back(pick(rng, kDeterminers));
    if (adjective) words.push_back(pick(rng, kAdjectives));
    words.push_back(pick(rng, kNouns));
  };
  noun_phrase(slot[0]);
  if (slot[1]) words.push_back(pick(rng, kAdverbs));
  words.push_back(pick(rng, kVerbs));
  noun_phrase(slot[2]);
  if (prep) {
    words.push_back(pick(rng, kPrepositions));
    noun_phrase(slot[3]);
  }
}

}  // namespace

// Any n ≥ 5 splits into clauses of 5–12 words and the conjunctions between them.
std::string english_like_sentence(SplitMix64& rng, std::size_t n) {
  std::vector<std::string> words;
  std::size_t left = std::max<std::size_t>(n, 5);
  while (left > 12) {  // a clause, a conjunction, and at least 5 words for the rest
    const std::size_t length = 5 + rng.below(std::min<std::size_t>(12, left - 6) - 5 + 1);
    append_clause(rng, length, words);
    words.push_back(pick(rng, kConjunctions));
    left -= length + 1;
  }
  append_clause(rng, left, words);
  std::string s;
  for (const std::string& w : words) s += (s.empty() ? "" : " ") + w;
  s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s + ".";
}

}  // namespace qkv::cli::bench
