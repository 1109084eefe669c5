// What the model commands (embed, similarity, search, explain) share: the --model option and
// loading the model with a clear error. (Texts from arguments or stdin: qkv/lines.h.)
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "qkv/files.h"
#include "qkv/lines.h"
#include "qkv/model.h"
#include "qkv/terminal.h"

namespace qkv::cli {

// The kinds of model a command's --model takes besides a BERT model directory, for its help text
// and for what load_model says it expected.
struct ModelChoices {
  bool decoder = false;  // smollm2 or a GGUF file
  bool trained = false;  // a .safetensors file qkv train saved
};

struct ModelArgs {
  std::string dir;  // empty: default_model_dir()
  // A decoder's --weights (commands whose --model takes one): its matrices as the file's blocks
  // or float32 (CausalLM::set_weight_format).
  std::string weights = "file";
  // Set by add_model_option: the command ("qkv bench model") and what its --model takes.
  std::string command;
  ModelChoices choices;
};

// Adds --model to a subcommand.
void add_model_option(CLI::App& command, ModelArgs& args, ModelChoices choices = {});
// --weights file|float32, for the commands that run decoders: how the matrices are kept.
void add_weights_option(CLI::App& command, std::string& weights);
// --decode int8|float32, for the commands that generate: how a new token's pass multiplies them.
void add_decode_option(CLI::App& command, std::string& decode);
WeightFormat weight_format(const std::string& weights);   // "file" | "float32"
DecodeProduct decode_product(const std::string& decode);  // "int8" | "float32"

// --model as an input of check_outputs: the path given, else the default model's (the directory,
// or the GGUF file "smollm2" names), which no output may replace.
InputPath model_input(const ModelArgs& args);

// Opens --model through the registry (qkv/model.h), whatever it holds, with the faults of the
// family's loader mapped as every model command maps them: a model the user named is input like
// any other, so its faults are usage errors (exit 2, "--model FILE: ..."); an installed one (no
// --model, "minilm", "smollm2") is scripts/bootstrap's, so its faults are runtime errors (exit 1)
// that say how to reinstall it. A sentence encoder is checked as load_model checks it.
Model open_model_option(const ModelArgs& args, const OpenOptions& options = {});

// Loads --model DIR, whose faults are usage errors (exit 2, "--model DIR/config.json: ..."), or
// the default model, whose faults are runtime errors (exit 1) that say how to reinstall it. A
// decoder, a .safetensors file or any other file given here is a usage error that says what it
// is, what this command's --model takes, and which command takes it.
SentenceModel load_model(const ModelArgs& args, const SentenceModelOptions& options = {});
// Opens a decoder LLM — its header, config and tokenizer, not yet its weights (CausalLM::open) —
// so that the command can size its work and refuse it past --memory-limit having read only the
// header: a GGUF file the user named, whose faults are usage errors (exit 2, "--model FILE:
// ..."), or "smollm2", the one scripts/fetch_model installs, whose faults are runtime errors
// (exit 1) that say how to reinstall it.
CausalLM open_causal_lm(const std::string& model, WeightFormat format = WeightFormat::file);
// Then reads its weights (CausalLM::load_weights); faults as open_causal_lm's.
void load_weights(CausalLM& lm, const std::string& model);
// What a decoder's faults become once loaded (its chat template, say): the same rule.
[[noreturn]] void rethrow_for_causal_lm(const std::string& model, const Error& e);

// "text 2 (\"one\")": text i of `texts` as the commands' messages name it.
std::string text_label(const std::vector<std::string>& texts, int64_t i);

}  // namespace qkv::cli
