// models/families.h — each family's entry in the registry (qkv/model.h), defined in its own folder
// (src/models/<family>/family.cpp) and listed once, in registry.cpp.
#pragma once

#include <memory>
#include <string>

#include "qkv/model.h"

namespace qkv {

ModelFamily bert_family();       // bert/family.cpp
ModelFamily llama_family();      // llama/family.cpp
ModelFamily perceiver_family();  // perceiver/family.cpp
ModelFamily seq2seq_family();    // seq2seq/family.cpp

// The name a view titles a model by: its file's or directory's own name ("dates.safetensors",
// "all-MiniLM-L6-v2"), a trailing '/' ignored.
std::string display_name(const std::string& path);
// Whether `path` ends in `ext` and is not a directory.
bool named(const std::string& path, const std::string& ext);

}  // namespace qkv
