// `qkv explain`: a real model's attention on your sentence, explained (the main job).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "model_args.h"

namespace qkv::cli {

struct ExplainArgs {
  ModelArgs model;
  std::optional<std::string> text;  // empty: the default sentence
  std::string token;
  int layer = -1, head = -1;
  int top = 3;
  bool json = false;
  bool no_color = false, color = false;
};

CLI::App* add_explain_command(CLI::App& app, ExplainArgs& args);
int run_explain(const ExplainArgs& args);

}  // namespace qkv::cli
