// The long-input task of the Perceiver: count one symbol among L letters.
#include <algorithm>
#include <string>
#include <vector>

#include "qkv/field_error.h"
#include "qkv/perceiver.h"

namespace qkv {

PerceiverTask make_perceiver_task(const std::string& name, int64_t length) {
  // FieldErrors: each front end names the field its way, a model file's loader prefixes its path.
  if (name != "count")
    throw FieldError("task", "{task} " + name + " is not a Perceiver task; expected count");
  if (length < 16 || length > 65536)
    throw FieldError("length", "{length} " + std::to_string(length) +
                                   " is out of range for the task count; expected 16 to 65536 "
                                   "(room for 9 '#')");
  PerceiverTask t;
  t.name = name;
  t.length = length;
  t.classes = 10;
  t.alphabet = "abcdefghijklmnopqrstuvwxyz#";
  const std::string digits = std::to_string(length);  // 1024 → "1,024", as summaries print sizes
  std::string letters;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) letters += ',';
    letters += digits[i];
  }
  t.description =
      "count the '#' among " + letters + " letters a–z: 0 to 9 of them, the class is how many";
  return t;
}

PerceiverExample PerceiverTask::generate(nn::Rng& rng) const {
  const int64_t letters = static_cast<int64_t>(alphabet.size()) - 1;
  PerceiverExample e;
  e.label = static_cast<int32_t>(rng.below(classes));
  e.input.resize(static_cast<std::size_t>(length));
  for (char& c : e.input) c = alphabet[static_cast<std::size_t>(rng.below(letters))];
  // Distinct positions: draw again where one is taken (at most 9 of ≥ 16 places).
  for (int32_t placed = 0; placed < e.label;) {
    char& c = e.input[static_cast<std::size_t>(rng.below(length))];
    if (c == counted()) continue;
    c = counted();
    ++placed;
  }
  return e;
}

std::vector<int32_t> PerceiverTask::encode(const std::string& input) const {
  // FieldErrors of the field "input": the command names it --input.
  if (static_cast<int64_t>(input.size()) != length)
    throw FieldError("input", "{input} has " + std::to_string(input.size()) +
                                  " symbols; the model reads " + std::to_string(length) +
                                  " (leave {input} out for a random example)");
  std::vector<int32_t> ids(input.size());
  for (std::size_t i = 0; i < input.size(); ++i) {
    const std::size_t at = alphabet.find(input[i]);
    if (at == std::string::npos)
      throw FieldError("input", "{input} has '" + FieldError::literal(std::string(1, input[i])) +
                                    "' at position " + std::to_string(i) +
                                    "; expected letters a–z and '" + std::string(1, counted()) +
                                    "'");
    ids[i] = static_cast<int32_t>(at);
  }
  return ids;
}

}  // namespace qkv
