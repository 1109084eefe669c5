// cli/progress.h — the one-line progress display of the long commands (bench, embed, search,
// train, experiment): a line on stderr rewritten in place, shown only when stderr is a terminal.
#pragma once

#include <string>

namespace qkv::cli {

class Progress {
 public:
  Progress();
  ~Progress();
  void show(const std::string& text);
  void clear();  // before writing a line of results to a terminal

 private:
  bool enabled_;
  bool shown_ = false;
};

}  // namespace qkv::cli
