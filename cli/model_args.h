// What the model commands (embed, similarity, search, explain) share: the --model option, loading
// the model with a clear error, reading texts from arguments or stdin, and a progress line.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "qkv/model.h"
#include "text.h"

namespace qkv::cli {

struct ModelArgs {
  std::string dir;  // empty: default_model_dir()
};

// Adds --model DIR to a subcommand.
void add_model_option(CLI::App& command, ModelArgs& args);
// Loads --model DIR, whose faults are usage errors (exit 2, "--model DIR/config.json: ..."), or
// the default model, whose faults are runtime errors (exit 1) that say how to reinstall it.
SentenceModel load_model(const ModelArgs& args, const SentenceModelOptions& options = {});

// The texts given as arguments, else one text per line of stdin (a final newline ends the last
// line; \r\n is accepted). `what` names them in errors.
std::vector<std::string> texts_or_stdin(const std::vector<std::string>& args, const char* what);

// Reads a text file one line per entry, skipping empty lines; errors name `option` and the file.
std::vector<std::string> read_lines(const std::string& option, const std::string& path);

// Bytes `texts` hold in memory: their characters and each string's own object.
int64_t texts_bytes(const std::vector<std::string>& texts);
// The longest text's bytes.
int64_t longest_text(const std::vector<std::string>& texts);

}  // namespace qkv::cli
