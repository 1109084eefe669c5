// The worked examples of `qkv attend --example NAME`, shipped inside the binary
// (examples/attend/*.json, embedded at build time by cmake/embed_examples.cmake).
#pragma once

#include <string>
#include <vector>

#include "qkv/explain.h"

namespace qkv::cli {

struct Example {
  std::string name, title, takeaway;
  std::vector<std::string> story;  // two lines, printed above the runs
  std::vector<explain::AttentionCall> runs;
};

// Every shipped example, in name order. Throws qkv::Error if an embedded file is malformed.
const std::vector<Example>& examples();
// The example called `name`; throws qkv::Error (usage) listing the names when there is none.
const Example& find_example(const std::string& name);

}  // namespace qkv::cli
