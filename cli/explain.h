// `qkv explain`: a real model's attention on your sentence, explained (the main job).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "model_args.h"

namespace qkv::cli {

struct ExplainArgs {
  ModelArgs model;
  std::optional<std::string> text;    // empty: the default sentence
  std::optional<std::string> text_b;  // a second sentence: the pair [CLS] A [SEP] B [SEP]
  std::optional<std::string> input;   // with --model FILE.safetensors from qkv train
  std::string token;
  std::optional<int64_t> layer, head;  // checked against the model once it is loaded
  std::optional<int> top;              // keys a head (a Perceiver: positions a latent); default 3
  bool json = false;
  std::string html;  // write the HTML report here
  std::string svg;   // write a heatmap (with --layer/--head) or the model grid here
  std::string png;   // the same picture as a PNG
  bool no_color = false, color = false;
  std::string memory_limit;  // --memory-limit SIZE; empty: half the machine's memory
};

CLI::App* add_explain_command(CLI::App& app, ExplainArgs& args);
int run_explain(const ExplainArgs& args);
// --model FILE.safetensors saved by `qkv train`: the model's output on --input and its
// cross-attention alignment (source across, output down).
int run_explain_seq2seq(const ExplainArgs& args);
// --model FILE.safetensors saved by `qkv train --model perceiver`: what each latent gathers.
int run_explain_perceiver(const ExplainArgs& args);
// Throws a usage error "--layer 9 is out of range; this model has layers 0–5" when `index` is
// given and outside [0, count); `what` names the count ("layers", "decoder layers", "heads").
void check_index(const char* flag, const std::optional<int64_t>& index, int64_t count,
                 const std::string& what);

}  // namespace qkv::cli
