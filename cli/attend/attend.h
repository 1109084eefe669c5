// `qkv attend`: attention on your own Q, K, V (.npy) or a built-in example, explained step by step.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "qkv/attend.h"

namespace qkv::cli {

struct AttendArgs {
  explain::CallArguments call;  // the inputs and options, as typed
  std::string out, weights, lse;
  std::string html;  // the self-contained HTML report
  std::string example;
  std::string memory_limit;  // for the L×S matrices; empty: half the machine's memory
  bool json = false;
  int digits = 2;
  int top = 3;
  // The options given on the command line, as "--score": a worked example honours only a few and
  // must reject the rest rather than ignore them, even when their value equals the default.
  std::vector<std::string> given;
};

CLI::App* add_attend_command(CLI::App& app, AttendArgs& args);
int run_attend(const AttendArgs& args);

}  // namespace qkv::cli
