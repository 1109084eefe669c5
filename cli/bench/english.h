// English-like text for the benchmarks: sentences of exactly n words from a fixed word list and a
// tiny grammar, the same on every machine, so that every run's numbers are comparable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace qkv::cli::bench {

// splitmix64 (Steele, Lea & Flood 2014), whose output the algorithm fixes, not
// std::uniform_int_distribution, whose mapping each standard library chooses for itself.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }

 private:
  uint64_t state_;
};

// A sentence of exactly n ≥ 5 words: whole clauses joined by conjunctions, capitalized, with a
// full stop. Every word is one WordPiece token of BERT's uncased vocabulary.
std::string english_like_sentence(SplitMix64& rng, std::size_t n);

}  // namespace qkv::cli::bench
