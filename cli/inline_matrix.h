// Small matrices typed on the command line: `qkv attend --query "[[1, 0], [0, 1]]"`, so that a
// learner can try "what if" numbers in the shell without writing .npy files.
#pragma once

#include <string>

#include "qkv/tensor.h"

namespace qkv::cli {

// Whether an argument is an inline matrix: its first non-space character is '['. Anything else
// is a file path, as before (a path that starts with '[' can be given as ./[name]).
bool is_inline_matrix(const std::string& argument);

enum class InlineUse {
  tensor,  // --query, --keys, --values: numbers; a flat list is one row, [1, D]
  mask,    // --mask: numbers (added to the logits) or true/false (may attend), not mixed
  param,   // --params: numbers; a flat list stays a vector (additive's v is [A])
};

// Parses JSON nested lists of one depth — [D], [L, D] or [H, L, D] — into a float64 (or, for a
// mask of true/false, bool) tensor. Throws qkv::Error naming `option` for text over 64 KiB, invalid
// JSON, NaN or ∞ (JSON has neither; a .npy file can hold them), an empty list, ragged rows, a
// deeper nesting or an entry that is not a number.
Tensor parse_inline_matrix(const std::string& option, const std::string& text, InlineUse use);

// The argument as shown in messages: a path as it is, inline text shortened to 40 characters.
std::string shown_argument(const std::string& argument);

}  // namespace qkv::cli
