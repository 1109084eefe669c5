// `qkv explain`: open the model (the registry), capture one run (explain::capture), show a view.
// This file: the options, the one path every model takes, and a sentence's (BERT, a decoder)
// checks and views — the overview or one head, the decoder's heads, JSON, the report and images.
#include "explain/explain.h"

#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "memory.h"
#include "options.h"
#include "output.h"
#include "qkv/explain_circuits.h"
#include "qkv/files.h"
#include "qkv/model_stores.h"
#include "qkv/terminal.h"

namespace qkv::cli {

CLI::App* add_explain_command(CLI::App& app, ExplainArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "explain",
      "a real model's attention on your sentence: which tokens each head's query "
      "finds, layer by layer");
  cmd->add_option("text", args.text,
                  "the sentence (default: \"" + std::string(explain::kDefaultSentence) + "\")")
      ->check(text("a sentence, e.g. qkv explain \"I sat on the bank\""));
  cmd->add_option("text_b", args.text_b,
                  "a second sentence: the model reads the pair as [CLS] A [SEP] B [SEP]")
      ->check(text("a second sentence, e.g. qkv explain \"A\" \"B\""));
  cmd->add_option("--token", args.token,
                  "the focus token: its text (\"it\", \"it:2\" for the second) or index; "
                  "default: a pronoun, else the last word")
      ->check(utf8_text())
      ->option_text("TOKEN");
  // The model's own range is checked once it is loaded ("this model has layers 0–5").
  const IntegerRange index{.lo = std::numeric_limits<int64_t>::min(),
                           .expected = "an index from 0 (0-based)"};
  cmd->add_option("--layer", args.layer, "zoom into this layer (0-based, with --head)")
      ->transform(integer(index))
      ->option_text("L");
  cmd->add_option("--head", args.head, "zoom into this head (0-based, with --layer)")
      ->transform(integer(index))
      ->option_text("H");
  cmd->add_option("--top", args.top,
                  "keys shown per head in the overview, 1 to 3 (default 3); a Perceiver's "
                  "positions shown per latent, 1 to 64")
      ->transform(integer({.lo = 1, .hi = 64}))
      ->option_text("K");
  cmd->add_option("--input", args.input,
                  "with --model FILE.safetensors from qkv train: the source to decode (a "
                  "Perceiver's: its input, or @FILE; default a held-out example)")
      ->check(text("a source to decode, e.g. \"march 3rd 2021\", or a Perceiver's input or @FILE"))
      ->option_text("TEXT");
  cmd->add_flag("--json", args.json,
                "print everything captured (tokens; per layer q, k, v, scores, weights, outputs, "
                "value norms, mixing, rollout); with --layer, that layer only and its W_O");
  cmd->add_option("--html", args.html,
                  "write one self-contained HTML report (every layer and head; offline)")
      ->option_text("FILE");
  cmd->add_option("--svg", args.svg,
                  "write an SVG image: the heatmap of --layer/--head, else the model grid")
      ->option_text("FILE");
  cmd->add_option("--png", args.png,
                  "write a PNG image: the heatmap of --layer/--head, else the model grid")
      ->option_text("FILE");
  cmd->add_option("--target", args.lens.target,
                  "a decoder: which heads carry this next token (one token, e.g. \" Paris\"; "
                  "default: the model's most likely) — every head ablated, its direct logit "
                  "attribution, the logit lens; a model qkv train made: this output character at "
                  "--step (default: the one it wrote)")
      ->check(utf8_text())
      ->option_text("TOKEN");
  cmd->add_option("--versus", args.lens.versus,
                  "with a decoder: measure the target's logit less this token's (\" Rome\")")
      ->check(utf8_text())
      ->option_text("TOKEN");
  cmd->add_option("--corrupt", args.lens.corrupt,
                  "with a decoder: activation patching from the text into this prompt of equal "
                  "token length (\"The capital of Italy is\"); a model qkv train made: from the "
                  "source into this source")
      ->check(utf8_text())
      ->option_text("TEXT");
  cmd->add_option("--knockout", args.lens.knockout,
                  "with a decoder: block edges LAYER.HEAD:QUERY>KEY (−∞ before the softmax; * "
                  "for all), e.g. 14.*:5>3")
      ->check(utf8_text())
      ->option_text("EDGES");
  cmd->add_option("--step", args.step,
                  "a model qkv train made: the output step the lens (--target) measures, from 1 "
                  "(default 1)")
      ->transform(integer({.lo = 1, .hi = 1 << 20}))
      ->option_text("N");
  cmd->add_option(
         "--circuit", args.circuit,
         "with a decoder: head L.H's circuits from its weights alone — the QK table (which "
         "tokens look for which), the OV table (what each token's value promotes) — and "
         "the induction heads' K-composers")
      ->check(utf8_text())
      ->option_text("L.H");
  cmd->add_option("--tokens", args.circuit_tokens,
                  "with --circuit: the tokens of its tables, comma-separated (default: the text's)")
      ->check(utf8_text())
      ->option_text("A,B,...");
  cmd->add_option("--offset", args.offset,
                  "with --circuit: the query's position after the key's in the QK table "
                  "(RoPE; default 0)")
      ->transform(integer({.lo = 0, .hi = 1 << 20}))
      ->option_text("N");
  cmd->add_flag("--no-color", args.no_color, "no ANSI colours (the default when not a terminal)");
  cmd->add_flag("--color", args.color, "ANSI colours even when not a terminal");
  add_model_option(*cmd, args.model, {.decoder = true, .trained = true});
  add_memory_limit_option(*cmd, args.memory_limit, "the captured run (every layer's weights)");
  cmd->footer(
      "\nLayers and heads count from 0, as in transformers' output_attentions.\n\n"
      "Examples:\n"
      "  qkv explain\n"
      "  qkv explain \"I sat on the river bank\" --token bank\n"
      "  qkv explain --layer 2 --head 5\n"
      "  qkv explain \"Hans said he was tired\" --json > capture.json\n"
      "  qkv explain \"The animal didn't cross the street.\" \"It was too tired.\" --html "
      "pair.html\n"
      "  qkv train --task dates --out dates.safetensors\n"
      "  qkv explain --model dates.safetensors --input \"march 3rd 2021\"\n"
      "  qkv explain --model dates.safetensors --input \"march 3rd 2021\" --step 9 --corrupt "
      "\"march 8th 2021\"\n"
      "  qkv explain --model count.safetensors --html latents.html   (qkv train --model "
      "perceiver)\n"
      "  qkv explain --model smollm2 \"The capital of France is\"   (a decoder: any GGUF file)\n"
      "  qkv explain --model smollm2 \"The capital of France is\" --target \" Paris\" --versus "
      "\" Rome\" --corrupt \"The capital of Italy is\"\n\n"
      "The lens (--target): head ablation sets a head's output (its slice of W_O's input) to zero\n"
      "at every position (mean: to its mean over the positions) and reruns the layers from there;\n"
      "knockout adds −∞ to the chosen edges' logits; patching copies a head's output (or the\n"
      "stream) from the text's run into the corrupted one's; direct logit attribution reads each\n"
      "head's output at the last position through W_O and the final norm (scale frozen) on the\n"
      "target's unembedding row; the logit lens reads the stream after each layer. A model qkv\n"
      "train made is lensed at one output step (--step): its decoder reads <s> and the outputs\n"
      "before the step, each block's self- and cross-attention a layer of the lens (L0 self,\n"
      "L0 cross, ...); --corrupt is another source, --knockout's keys in a cross layer are the\n"
      "source's characters.\n");
  return cmd;
}

void check_index(const char* flag, const std::optional<int64_t>& index, int64_t count,
                 const std::string& what) {
  if (index && (*index < 0 || *index >= count))
    throw Error(std::string(flag) + " " + std::to_string(*index) +
                " is out of range; this model has " + what + " 0–" + std::to_string(count - 1));
}

bool use_color(const ExplainArgs& args) {
  return args.color ||
         (!args.no_color && ::isatty(STDOUT_FILENO) == 1 && std::getenv("NO_COLOR") == nullptr);
}

namespace {

// What a sentence's run refuses before anything is loaded.
void check_sentence_args(const ExplainArgs& args, const std::string& text) {
  if (args.top > 3)  // the option's 4 to 64 are a Perceiver's
    throw Error("--top " + std::to_string(*args.top) +
                " is out of range for a sentence's overview; expected 1 to 3 (up to 64 with a "
                "Perceiver model, for its latents)");
  if (args.layer.has_value() != args.head.has_value())
    throw Error(std::string(args.layer ? "--layer is given without --head"
                                       : "--head is given without --layer") +
                "; expected both, e.g. --layer 2 --head 5");
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw Error("the text is empty; expected a sentence, e.g. qkv explain \"I sat on the bank\"");
  // Every output can be written, and no two are one file, before the model runs.
  check_outputs({{"--html", args.html}, {"--svg", args.svg}, {"--png", args.png}},
                {model_input(args.model)});
  const bool decoder = model_kind(args.model.dir) == ModelKind::causal_lm;
  if (decoder && args.text_b)
    throw Error("a second text \"" + clip(*args.text_b, 40) +
                "\" is given, but a decoder reads one text; expected one");
  if (args.step)
    throw Error("--step " + std::to_string(*args.step) +
                " applies to a model qkv train made (its output steps); a decoder's lens reads "
                "the text's last position; expected no --step");
  if (!decoder && args.lens_asked())
    throw Error(std::string(!args.lens.target.empty()    ? "--target"
                            : !args.lens.versus.empty()  ? "--versus"
                            : !args.lens.corrupt.empty() ? "--corrupt"
                            : !args.circuit.empty()      ? "--circuit"
                                                         : "--knockout") +
                " needs a decoder, which predicts a next token; expected --model smollm2 or a "
                "GGUF file");
}

// A sentence encoder's text (or pair) checked against the model: its layers and heads, its tokens.
explain::Input sentence_input(const ExplainArgs& args, const Model& model, std::string text) {
  if (model.kind() == ModelKind::sentence_encoder) {
    check_index("--layer", args.layer, model.info().layers, "layers");
    check_index("--head", args.head, model.info().heads, "heads");
    if (args.text_b && args.text_b->find_first_not_of(" \t\r\n") == std::string::npos)
      throw Error("the second text is empty; expected a sentence, e.g. qkv explain \"A\" \"B\"");
    model.sentence_model().require_tokens(text, "the text");
    if (args.text_b) model.sentence_model().require_tokens(*args.text_b, "the second text");
  }
  // The terminal's views read a few rows: a long text's decoder keeps rows; the files read all.
  const bool every_weight =
      args.json || !args.html.empty() || !args.svg.empty() || !args.png.empty();
  return {.text = std::move(text), .text_b = args.text_b, .every_weight = every_weight};
}

// Every layer's scores, logits and weights are kept: tokens² a head and layer (a sentence), the
// whole model's attention (a trained model), said and bounded before the model runs.
void check_memory(const ExplainArgs& args, const Model& model, const explain::Input& input) {
  const explain::RunCost cost = explain::run_cost(model, input, args.json, !args.html.empty());
  const bool trained = model.kind() == ModelKind::seq2seq || model.kind() == ModelKind::perceiver;
  // A decoder whose weights alone pass the limit is too large whatever the text: said so.
  const int64_t alone =
      model.kind() == ModelKind::causal_lm ? model.causal_lm().load_bytes() : int64_t{0};
  require_memory(cost.bytes, args.memory_limit, cost.what,
                 trained || alone > memory_limit(args.memory_limit)
                     ? "a smaller model" +
                           too_large(alone, model.kind() != ModelKind::causal_lm ||
                                                model.causal_lm().weight_format() ==
                                                    WeightFormat::float32)
                 : args.json ? "a shorter text, or --html, which needs far less than --json"
                             : "a shorter text");
}

// The files, as one set (a failure in the last leaves none of them), then JSON or the terminal.
int show_sentence(const ExplainArgs& args, const Model& model, const explain::Run& run) {
  check_index("--layer", args.layer, run.model.layers, "layers");
  check_index("--head", args.head, run.model.heads, "heads");
  int64_t focus = 0;
  try {
    focus = explain::focus(run, args.token.empty() ? std::nullopt : std::optional(args.token));
  } catch (const Error& e) {
    throw Error("--token " + std::string(e.what()));
  }
  std::vector<std::pair<OutputPath, std::string>> outputs;
  if (!args.html.empty()) {
    explain::Report report = explain::report_of(model.info().name, run, focus);
    report.layer = args.layer.value_or(report.layer);
    report.head = args.head.value_or(report.head);
    outputs.push_back({{"--html", args.html}, explain::html_report(report)});
  }
  if (!args.svg.empty())
    outputs.push_back({{"--svg", args.svg},
                       args.layer ? explain::svg_heatmap(run, *args.layer, *args.head)
                                  : explain::svg_model_grid(run)});
  if (!args.png.empty())
    outputs.push_back({{"--png", args.png},
                       args.layer ? explain::png_heatmap(run, *args.layer, *args.head)
                                  : explain::png_model_grid(run)});
  write_and_say(outputs);
  if (args.json) {
    std::cout << explain::json_of(run, {.focus = focus, .layer = args.layer.value_or(-1)}) << "\n";
    return 0;
  }
  const explain::Style style{.color = use_color(args), .top = args.top.value_or(3)};
  std::cout << explain::render_tokens(run, focus, style);
  if (args.layer)
    std::cout << explain::render_head(run, *args.layer, *args.head, focus, style)
              << explain::render_head_values(run, *args.layer, *args.head, focus, style);
  else
    std::cout << explain::render_overview(run, focus, style);
  if (run.causal()) std::cout << explain::render_decoder(run, style);
  std::cout << explain::render_sinks(run, style);  // terminal/values.cpp
  std::cout << explain::render_lens(run, style);
  if (run.circuit) std::cout << "\n" << explain::circuit_text(*run.circuit);
  return 0;
}

// --circuit L.H: the head's circuits, its layer and head checked against the model.
std::shared_ptr<const explain::Circuit> circuit_of(const ExplainArgs& args, const Model& model,
                                                   const explain::Run& run) {
  const std::size_t dot = args.circuit.find('.');
  int64_t layer = -1, head = -1;
  const auto number = [](std::string_view s, int64_t& x) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
    return ec == std::errc() && end == s.data() + s.size();
  };
  const std::string_view spec(args.circuit);
  if (dot == std::string::npos || !number(spec.substr(0, dot), layer) ||
      !number(spec.substr(dot + 1), head))
    throw Error("--circuit \"" + clip(args.circuit, 20) + "\"; expected LAYER.HEAD, e.g. 18.6");
  check_index("--circuit's layer", layer, run.model.layers, "layers");
  check_index("--circuit's head", head, run.model.heads, "heads");
  return std::make_shared<explain::Circuit>(explain::read_circuit(
      *model.causal_lm().residual(), run,
      {.layer = layer, .head = head, .tokens = args.circuit_tokens, .offset = args.offset}));
}

}  // namespace

int run_explain(const ExplainArgs& args) {
  const ModelKind kind = model_kind(args.model.dir);
  const bool trained = kind == ModelKind::perceiver || kind == ModelKind::seq2seq || args.input;
  const std::string text = args.text.value_or(explain::kDefaultSentence);
  if (trained)
    check_trained_args(args, kind);
  else
    check_sentence_args(args, text);
  const Model model = trained ? open_trained(args.model.dir)
                              : open_model_option(args.model, {.load_weights = false});
  if (kind == ModelKind::causal_lm)  // before it is sized: the estimates follow the format
    model.causal_lm().set_weight_format(weight_format(args.model.weights));
  else if (args.model.weights != "file")
    throw Error("--weights " + args.model.weights +
                    " is for a decoder's GGUF file; expected --model smollm2 or a GGUF file",
                Error::Kind::invalid_argument);
  explain::Input input;
  if (!trained) input = sentence_input(args, model, text);
  check_memory(args, model, input);
  if (trained) input = trained_input(args, model);
  if (kind == ModelKind::causal_lm) load_weights(model.causal_lm(), args.model.dir);
  explain::Run run = explain::capture(model, input);
  // A store's name ("llama3.2:1b") titles the model, not its file's (an Ollama blob's hash).
  if (!is_builtin_model(args.model.dir) && resolve_model(args.model.dir) != args.model.dir)
    run.model.name = run.model.argument = args.model.dir;
  if (!args.circuit.empty()) run.circuit = circuit_of(args, model, run);
  if (args.lens_wanted()) {
    CountProgress progress("lens: ablating and patching heads", "reruns");
    const auto on = [&](int64_t done, int64_t all) { progress.update(done, all); };
    run.lens = kind == ModelKind::seq2seq
                   ? lens_of_step(args, model.seq2seq(), run, on)
                   : explain::read_causal(model.causal_lm().residual(),
                                          model.causal_lm().tokenize(input.text), args.lens, on);
  }
  explain::require_finite(run);  // before any file is written or anything printed
  return trained ? show_trained(args, run) : show_sentence(args, model, run);
}

}  // namespace qkv::cli
