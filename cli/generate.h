// `qkv generate "prompt"`: a decoder LLM (SmolLM2-135M) continues the text, token by token.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

namespace qkv::cli {

struct GenerateArgs {
  std::string prompt;
  std::string model = "smollm2";
  int64_t max_tokens = 48;
  double temperature = 0;
  std::optional<uint64_t> seed;  // of the sampling; default 1 (none: greedy ignores it)
  bool chat = false;
  std::optional<std::string> system;  // with --chat: the system message (else the template's)
  std::string memory_limit;           // --memory-limit SIZE; empty: half the machine's memory
  bool explain = false;  // each token with the heads that carried it and the KV cache
  bool json = false;     // with --explain: one JSON object (explain::generation_json)
  std::string weights = "file";  // --weights: the matrices as the file's blocks, or float32
  std::string decode = "int8";   // --decode: a new token's pass on blocks, int8 or float32
};

CLI::App* add_generate_command(CLI::App& app, GenerateArgs& args);
int run_generate(const GenerateArgs& args);

}  // namespace qkv::cli
