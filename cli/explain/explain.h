// `qkv explain`: a model's attention on your input, explained. One door for every model: open it
// (the registry), capture one run (explain::capture), pick a view (terminal, --json, --html,
// --svg, --png).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model_args.h"
#include "qkv/explain.h"

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
  std::string memory_limit;     // --memory-limit SIZE; empty: half the machine's memory
  explain::LensRequest lens;    // --target, --versus, --corrupt, --knockout (a decoder)
  std::optional<int64_t> step;  // --step N (from 1): a trained seq2seq model's output step
  std::string circuit;          // --circuit L.H (a decoder), with --tokens and --offset
  std::string circuit_tokens;
  int64_t offset = 0;
  bool lens_wanted() const {  // the lens: interventions on a decoder's run
    return !lens.target.empty() || !lens.versus.empty() || !lens.corrupt.empty() ||
           !lens.knockout.empty() || step.has_value();
  }
  bool lens_asked() const { return lens_wanted() || !circuit.empty(); }  // any decoder's option
};

CLI::App* add_explain_command(CLI::App& app, ExplainArgs& args);
int run_explain(const ExplainArgs& args);

// The models qkv trains (trained.cpp): what they refuse before anything is read, the model file
// opened (its faults are bad input, exit 2), the source or input they read, and their views — a
// seq2seq model's alignment, a Perceiver's latents.
void check_trained_args(const ExplainArgs& args, ModelKind kind);
Model open_trained(const std::string& path);
explain::Input trained_input(const ExplainArgs& args, const Model& model);
int show_trained(const ExplainArgs& args, const explain::Run& run);
// The lens of a trained transformer's output step (--step, default 1) as the request asks:
// --corrupt checked as a source of the model's.
explain::CausalReading lens_of_step(const ExplainArgs& args, Seq2Seq& model,
                                    const explain::Run& run, const explain::OnProgress& progress);

// Throws a usage error "--layer 9 is out of range; this model has layers 0–5" when `index` is
// given and outside [0, count); `what` names the count ("layers", "decoder layers", "heads").
void check_index(const char* flag, const std::optional<int64_t>& index, int64_t count,
                 const std::string& what);
// Colours on standard output: --color, else a terminal without NO_COLOR (--no-color: never).
bool use_color(const ExplainArgs& args);

}  // namespace qkv::cli
