// `qkv explain --model lookup.safetensors --input "? b a3 b7 c1"`: the phonebook read off the
// trained model's attention — the SQL lookup `SELECT number WHERE name = 'b'` learned from data.
#pragma once

#include <string>
#include <vector>

#include "qkv/model.h"

namespace qkv::cli {

// Lines saying, for a source of the lookup task ("? b a3 b7 c1"), which encoder head binds each
// number to the key before it, which decoder head matches the query key against the entries'
// keys (its weights per entry), and how much of what that head reads back through the values
// comes from the entry it matched (Σ weight·‖v‖ per entry), and the SQL the lookup stands for,
// in the terms of the model's own attention (additive for RNNsearch). Empty when `source` is not
// of the form "? k k1v1 k2v2 ...".
std::vector<std::string> phonebook_reading(const Seq2SeqCapture& capture);

}  // namespace qkv::cli
