// `qkv explain --model FILE.safetensors`: a model `qkv train` saved. A seq2seq model greedy-decodes
// one source (--input) and shows one decoder layer's cross-attention as an alignment heatmap
// (Bahdanau et al. 2014, Figure 3); a Perceiver shows what each latent query gathers from its long
// input (--input TEXT or @FILE).
#include <filesystem>
#include <iostream>

#include "explain/explain.h"
#include "output.h"
#include "qkv/files.h"
#include "qkv/terminal.h"

namespace qkv::cli {
namespace {

void refuse(bool given, const std::string& message) {
  if (given) throw Error(message);
}

// Each option a Perceiver does not read is refused, saying where it applies.
void check_perceiver_args(const ExplainArgs& args) {
  refuse(args.text.has_value(), "the text \"" + clip(args.text.value_or(""), 40) +
                                    "\" is given, but a Perceiver reads --input; expected "
                                    "--input TEXT or @FILE");
  refuse(args.text_b.has_value(), "a second text \"" + clip(args.text_b.value_or(""), 40) +
                                      "\" is given, but a Perceiver reads one --input; expected "
                                      "no second text");
  const std::string flag = args.layer ? "--layer" : "--head";
  refuse(args.layer || args.head,
         flag +
             " picks one head of a sentence model (the BERT model, smollm2) or of a model from "
             "qkv train; a Perceiver shows every latent's heads together; expected no " +
             flag);
  refuse(!args.svg.empty() || !args.png.empty(),
         std::string(args.svg.empty() ? "--png" : "--svg") +
             " draws a sentence model's heatmap (the BERT model, smollm2); a Perceiver's latents "
             "× positions heatmap is in --html FILE");
  refuse(!args.token.empty(), "--token '" + args.token +
                                  "' applies to qkv explain on a sentence (a BERT model or a "
                                  "decoder); a Perceiver shows what every latent gathers "
                                  "instead; expected no --token");
  const std::string& input = args.input.value_or("");
  check_outputs(
      {{"--html", args.html}},
      {{"--model", args.model.dir}, {"--input", input.starts_with('@') ? input.substr(1) : ""}});
}

void check_seq2seq_args(const ExplainArgs& args, ModelKind kind) {
  const std::string& path = args.model.dir;
  refuse(args.text_b.has_value(), "a second text \"" + clip(args.text_b.value_or(""), 40) +
                                      "\" is given, but a trained model reads one source; "
                                      "expected one");
  refuse(!args.svg.empty() || !args.png.empty(),
         std::string(args.svg.empty() ? "--png" : "--svg") +
             " is not available for trained models; use --html for their attention");
  refuse(kind != ModelKind::seq2seq,
         path.empty() ? "--input needs --model FILE.safetensors, a model saved by qkv train, e.g. "
                        "qkv train --task dates --out dates.safetensors"
                      : "--input needs --model FILE.safetensors saved by qkv train; " + path +
                            " is not a .safetensors file");
  refuse(!args.token.empty(), "--token '" + args.token +
                                  "' applies to qkv explain on a sentence (a BERT model or a "
                                  "decoder); a model from qkv train shows every output step's "
                                  "alignment instead; expected no --token");
  refuse(args.top.has_value(), "--top " + std::to_string(args.top.value_or(0)) +
                                   " applies to qkv explain on a sentence (a BERT model or a "
                                   "decoder) and on a Perceiver; a model from qkv train shows "
                                   "each output step's whole alignment instead; expected no --top");
  refuse(args.input && args.text, "both --input \"" + args.input.value_or("") +
                                      "\" and the text \"" + args.text.value_or("") +
                                      "\" are given; expected one");
  refuse(!std::filesystem::exists(path),
         "--model " + path + ": no such file; train one with qkv train --task dates --out " + path);
  check_outputs({{"--html", args.html}}, {{"--model", path}});
}

// The source: --input or the text, checked against the model's vocabulary and length; else a
// held-out example.
std::string seq2seq_source(const ExplainArgs& args, const Model& model) {
  check_index("--layer", args.layer, model.info().layers, "decoder layers");
  check_index("--head", args.head, model.info().heads, "heads");
  if (!args.input && !args.text) return explain::default_input(model).text;
  const std::string source = args.input ? *args.input : *args.text;
  refuse(source.empty(), "--input is empty; expected a source, e.g. \"march 3rd 2021\"");
  try {
    explain::check_source(model.seq2seq(), source);
  } catch (const Error& e) {
    throw Error((args.input ? "--input " : "the text ") + std::string(e.what()));
  }
  return source;
}

// --input TEXT, or --input @FILE for an input too long to type (one trailing newline dropped).
// A Perceiver reads at most 65,536 symbols: 1 MiB is far above any input, and far below what a
// FIFO, /dev/zero or a sparse 2 GB file would have it read (each was read whole, or forever).
std::string perceiver_input(const ExplainArgs& args, const Model& model) {
  if (!args.input) return explain::default_input(model).text;
  if (!args.input->starts_with('@')) return *args.input;
  std::string text;
  try {
    text =
        read_input_file(args.input->substr(1), {.expected = "a regular text file holding the input",
                                                .max_bytes = uint64_t{1} << 20,
                                                .noun = "the input"});
  } catch (const Error& e) {
    throw Error("--input @" + std::string(e.what()), e.kind());
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

int show_seq2seq(const ExplainArgs& args, const explain::Run& run) {
  const explain::Style style{.color = use_color(args)};
  const int64_t layer = args.layer.value_or(run.model.layers - 1);
  const Tensor alignment = explain::alignment(run, layer);
  const int64_t head = args.head.value_or(explain::sharpest_head(explain::head_entropy(alignment)));
  if (!args.html.empty()) {
    // Opens on the cross-attention of the layer and head shown in the terminal.
    explain::Report report =
        explain::report_of(run.model.name + " (" + run.model.task + " model)", run);
    report.layer = layer;
    report.head = head;
    write_and_say({{{"--html", args.html}, explain::html_report(report)}});
  }
  if (args.json)
    std::cout << explain::json_of(
                     run, {.layer = layer, .head = head, .model_path = path_json(args.model.dir)})
              << "\n";
  else
    std::cout << explain::render_seq2seq(run, {.layer = layer, .head = args.head, .style = style})
              << explain::render_lens(run, style);
  return 0;
}

int show_perceiver(const ExplainArgs& args, const explain::Run& run) {
  const int64_t top = args.top.value_or(3);
  const explain::Gathers gathers = explain::gathers(run, top);
  if (!args.html.empty())
    write_and_say({{{"--html", args.html},
                    explain::html_report(explain::report_of("Perceiver latents: " + run.model.name,
                                                            run, gathers))}});
  if (args.json)
    std::cout << explain::json_of(
                     run, {.top = top, .html_path = args.html.empty() ? "" : path_json(args.html)})
              << "\n";
  else
    std::cout << explain::render_perceiver(run, gathers);
  return 0;
}

}  // namespace

void check_trained_args(const ExplainArgs& args, ModelKind kind) {
  if (kind == ModelKind::perceiver && args.lens_asked())
    throw Error(
        "--target, --versus, --corrupt, --knockout, --step and --circuit read a model's "
        "output token; a Perceiver classifies its input; expected them with a decoder "
        "(--model smollm2) or a seq2seq model from qkv train");
  if (!args.circuit.empty())
    throw Error("--circuit \"" + clip(args.circuit, 20) +
                "\" reads a decoder's weights through its vocabulary; a model qkv train made is "
                "lensed by --target and --step; expected --model smollm2 or a GGUF file");
  if (kind == ModelKind::perceiver)
    check_perceiver_args(args);
  else
    check_seq2seq_args(args, kind);
}

Model open_trained(const std::string& path) {
  try {
    return open_model(path);
  } catch (const Error& e) {  // whatever is wrong with the file the user named is bad input
    throw Error(e.what(), Error::Kind::invalid_argument);
  }
}

explain::Input trained_input(const ExplainArgs& args, const Model& model) {
  return {.text = model.kind() == ModelKind::perceiver ? perceiver_input(args, model)
                                                       : seq2seq_source(args, model)};
}

explain::CausalReading lens_of_step(const ExplainArgs& args, Seq2Seq& model,
                                    const explain::Run& run, const explain::OnProgress& progress) {
  const int64_t step = args.step.value_or(1), steps = static_cast<int64_t>(run.output.steps.size());
  if (step > steps)
    throw Error("--step: output step " + std::to_string(step) + " of \"" + clip(run.text, 40) +
                "\"; its decoding has steps 1 to " + std::to_string(steps));
  if (!args.lens.corrupt.empty()) try {
      explain::check_source(model, args.lens.corrupt);
    } catch (const Error& e) {
      throw Error("--corrupt " + std::string(e.what()), Error::Kind::invalid_argument);
    }
  return explain::read_step(model, run.text, run.output.steps, step - 1, args.lens, progress);
}

int show_trained(const ExplainArgs& args, const explain::Run& run) {
  return run.model.family == "perceiver" ? show_perceiver(args, run) : show_seq2seq(args, run);
}

}  // namespace qkv::cli
