// `qkv models`: the models qkv can open on this machine — the built-in ones, and every GGUF file
// in Ollama's, LM Studio's and the Hugging Face cache's stores, by the name --model takes.
#pragma once

#include <CLI/CLI.hpp>

namespace qkv::cli {

struct ModelsArgs {
  bool json = false;
};

CLI::App* add_models_command(CLI::App& app, ModelsArgs& args);
int run_models(const ModelsArgs& args);

}  // namespace qkv::cli
