// qkv/tasks.h — the synthetic sequence-to-sequence tasks `qkv train` learns, character-level,
// generated on the fly from an nn::Rng.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "qkv/nn.h"

namespace qkv {

// Each task has a vocabulary (PAD, BOS, EOS, then its characters), a generator of (source,
// target) examples, and a held-out test split: an example belongs to the test split iff the
// FNV-1a hash of its source string is 0 mod 10, so training (which draws only from the train
// split) never sees a test source, whatever the seed.
//
//   reverse   "kbqdafmt"                  → "tmfadqbk"
//   sort      "kbqdafmt"                  → "abdfkmqt"
//   copy      "kbqdafmt"                  → "kbqdafmt"
//   dates     "march 3rd 2021", "03/03/21", "3 Mar 2021", "2021/3/3",
//             "Wednesday, March 3, 2021"  → "2021-03-03"        (years 1950–2049)
//   lookup    "? b a3 b7 c1"              → "7"                  (the phonebook, learned)
//   follow    "c qwcxe"                   → "cx"                 (which letter follows c)
//
// Which model trains each task, and its default steps and sizes, are in the registry of
// qkv/train.h (training_tasks()), with the Perceiver's task, count.
//
// Quality is measured as exact-sequence accuracy: the whole output, EOS included, must match.

// Token ids of a character vocabulary: special tokens first, then one id a character.
class Vocabulary {
 public:
  static constexpr int32_t kPad = 0, kBos = 1, kEos = 2;
  Vocabulary() = default;
  explicit Vocabulary(const std::string& characters);  // distinct single-byte characters
  int64_t size() const { return static_cast<int64_t>(chars_.size()) + 3; }
  // Every character of s as an id; an unknown character is a qkv::Error naming it.
  std::vector<int32_t> encode(const std::string& s) const;
  // Ids to text, stopping at EOS; PAD and BOS are skipped, ids out of range show as '?'.
  std::string decode(const std::vector<int32_t>& ids) const;
  const std::string& characters() const { return chars_; }
  // "<pad>", "<s>", "</s>", or the character.
  std::string token(int32_t id) const;

 private:
  std::string chars_;
  std::map<char, int32_t> ids_;
};

enum class Split { train, test };

// True when `source` belongs to the held-out test split (FNV-1a 64 of the bytes, mod 10 == 0).
bool in_test_split(const std::string& source);
Split split_of(const std::string& source);

struct Example {
  std::string source, target;
};

// Sizes of a task (reverse, sort, copy, lookup, follow; dates has none); 0 keeps its default.
struct TaskOptions {
  int64_t min_length = 0;  // default 8 (lookup: pairs, default 3; follow: letters, default 3)
  int64_t max_length = 0;  // default 16 (lookup: pairs, default 8; follow: letters, default 10)
  int64_t symbols = 0;     // default 20, follow 16 (the letters a, b, c, ...; at most 26)
};

class Task {
 public:
  using Generator = std::function<Example(nn::Rng&)>;
  Task(std::string name, std::string description, Vocabulary vocab, int64_t max_source,
       int64_t max_target, Generator generate);

  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  const Vocabulary& vocab() const { return vocab_; }
  int64_t max_source_length() const { return max_source_; }
  int64_t max_target_length() const { return max_target_; }  // EOS not counted

  // One example of `split`: draws until the source falls in it (≈ 10 draws for test).
  Example sample(nn::Rng& rng, Split split) const;
  std::vector<Example> batch(nn::Rng& rng, Split split, int64_t n) const;

 private:
  std::string name_, description_;
  Vocabulary vocab_;
  int64_t max_source_, max_target_;
  Generator generate_;
};

// The task names, in the order `qkv train --help` lists them.
std::vector<std::string> task_names();
// The task called `name`; an unknown name is a qkv::Error listing the known ones.
Task make_task(const std::string& name, const TaskOptions& options = {});

// Exact-sequence accuracy: the fraction of outputs equal to their targets.
double exact_accuracy(const std::vector<std::string>& outputs,
                      const std::vector<Example>& examples);

}  // namespace qkv
