// `qkv explain --model FILE.safetensors`: a model `qkv train` saved. A seq2seq model greedy-decodes
// one source (--input) and shows one decoder layer's cross-attention as an alignment heatmap
// (Bahdanau et al. 2014, Figure 3); a Perceiver shows what each latent query gathers from its long
// input (--input TEXT or @FILE).
#include <charconv>
#include <filesystem>
#include <iostream>

#include "explain/explain.h"
#include "finite.h"
#include "memory.h"
#include "output.h"
#include "qkv/files.h"
#include "qkv/train.h"
#include "text.h"

namespace qkv::cli {
namespace {

// The model file the user named, loaded and checked: whatever is wrong with it (its tensors, its
// qkv.config, the numbers qkv train adds to its metadata) is bad input, exit 2, like any other.
std::unique_ptr<Seq2Seq> load_seq2seq(const std::string& path,
                                      std::map<std::string, std::string>& metadata) {
  try {
    std::unique_ptr<Seq2Seq> model = Seq2Seq::load(path, &metadata);
    for (const auto& [key, hi] :
         {std::pair{"qkv.steps", 1e8}, std::pair{"qkv.test_accuracy", 1.0}}) {
      const auto it = metadata.find(key);
      if (it == metadata.end()) continue;
      double x = 0;
      const char* begin = it->second.data();
      const auto [end, ec] = std::from_chars(begin, begin + it->second.size(), x);
      if (ec != std::errc() || end != begin + it->second.size() || !(x >= 0 && x <= hi))
        throw Error(path + ": the metadata's " + key + " is \"" + clip(it->second, 24) +
                    "\"; expected a number from 0 to " + short_number(hi));
    }
    return model;
  } catch (const Error& e) {
    throw Error(e.what(), Error::Kind::invalid_argument);
  }
}

void check_seq2seq_args(const ExplainArgs& args) {
  const std::string& path = args.model.dir;
  if (model_kind(path) != ModelKind::seq2seq)
    throw Error(path.empty()
                    ? "--input needs --model FILE.safetensors, a model saved by qkv train, e.g. "
                      "qkv train --task dates --out dates.safetensors"
                    : "--input needs --model FILE.safetensors saved by qkv train; " + path +
                          " is not a .safetensors file");
  if (!args.token.empty())
    throw Error("--token '" + args.token +
                "' applies to qkv explain on a sentence (a BERT model or a decoder); a model "
                "from qkv train shows every output step's alignment instead; expected no --token");
  if (args.top)
    throw Error("--top " + std::to_string(*args.top) +
                " applies to qkv explain on a sentence (a BERT model or a decoder) and on a "
                "Perceiver; a model from qkv train shows each output step's whole alignment "
                "instead; expected no --top");
  if (args.input && args.text)
    throw Error("both --input \"" + *args.input + "\" and the text \"" + *args.text +
                "\" are given; expected one");
  if (!std::filesystem::exists(path))
    throw Error("--model " + path + ": no such file; train one with qkv train --task dates --out " +
                path);
  check_outputs({{"--html", args.html}}, {{"--model", path}});
}

// The source: --input or the text, checked against the model's vocabulary and length; else a
// held-out example.
std::string seq2seq_source(const ExplainArgs& args, const Seq2Seq& model) {
  const Seq2SeqConfig& c = model.config();
  if (!args.input && !args.text)
    return test_set(make_task(c.task, c.task_options), 1).front().source;
  const std::string source = args.input ? *args.input : *args.text;
  if (source.empty()) throw Error("--input is empty; expected a source, e.g. \"march 3rd 2021\"");
  const std::string given = args.input ? "--input" : "the text";
  try {
    model.vocab().encode(source);
  } catch (const Error& e) {
    throw Error(given + " \"" + clip(source, 40) + "\": " + e.what());
  }
  if (static_cast<int64_t>(source.size()) > c.max_source)
    throw Error(given + " has " + std::to_string(source.size()) +
                " characters; the model reads at most " + std::to_string(c.max_source));
  return source;
}

// --input TEXT, or --input @FILE for an input too long to type (one trailing newline dropped).
// A Perceiver reads at most 65,536 symbols: 1 MiB is far above any input, and far below what a
// FIFO, /dev/zero or a sparse 2 GB file would have it read (each was read whole, or forever).
std::string perceiver_input(const std::string& given) {
  if (given.empty() || given[0] != '@') return given;
  std::string text;
  try {
    text = read_input_file(given.substr(1), {.expected = "a regular text file holding the input",
                                             .max_bytes = uint64_t{1} << 20,
                                             .noun = "the input"});
  } catch (const Error& e) {
    throw Error("--input @" + std::string(e.what()), e.kind());
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

// Each option a Perceiver does not read is refused, saying where it applies.
void check_perceiver_args(const ExplainArgs& args) {
  const auto refuse = [](bool given, const std::string& message) {
    if (given) throw Error(message);
  };
  refuse(args.text.has_value(), "the text \"" + clip(args.text.value_or(""), 40) +
                                    "\" is given, but a Perceiver reads --input; expected --input "
                                    "TEXT or @FILE");
  refuse(args.text_b.has_value(), "a second text \"" + clip(args.text_b.value_or(""), 40) +
                                      "\" is given, but a Perceiver reads one --input; expected no "
                                      "second text");
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
                                  "decoder); a Perceiver shows what every latent gathers instead; "
                                  "expected no --token");
}

}  // namespace

int run_explain_seq2seq(const ExplainArgs& args) {
  check_seq2seq_args(args);
  const std::string& path = args.model.dir;
  std::map<std::string, std::string> metadata;
  const std::unique_ptr<Seq2Seq> model = load_seq2seq(path, metadata);
  const Seq2SeqConfig& c = model->config();
  require_memory(seq2seq_capture_bytes(c), args.memory_limit,
                 "explaining " + path + " (every attention layer's weights kept)",
                 "a smaller model");
  const std::string source = seq2seq_source(args, *model);
  check_index("--layer", args.layer, c.layers, "decoder layers");
  check_index("--head", args.head, c.heads, "heads");
  const int64_t layer = args.layer.value_or(c.layers - 1);
  const std::string name = std::filesystem::path(path).filename().string();
  const explain::Run run = explain::capture(*model, source, name, metadata);
  const Tensor alignment = explain::alignment(run, layer);
  require_finite(alignment,
                 "the cross-attention weights of decoder layer " + std::to_string(layer));
  const int64_t head = args.head.value_or(explain::sharpest_head(explain::head_entropy(alignment)));
  if (!args.html.empty()) {
    // Opens on the cross-attention of the layer and head shown in the terminal.
    explain::Report report = explain::report_of(name + " (" + c.task + " model)", run);
    report.layer = layer;
    report.head = head;
    const std::string html = explain::html_report(report);
    write_outputs({{{"--html", args.html}, html}});
    report_written(args.html, html.size());
  }
  if (args.json)
    std::cout << explain::json_of(run,
                                  {.layer = layer, .head = head, .model_path = json_path(path)})
              << "\n";
  else
    std::cout << explain::render_seq2seq(
        run, {.layer = layer, .head = args.head, .style = {.color = use_color(args)}});
  return 0;
}

int run_explain_perceiver(const ExplainArgs& args) {
  check_perceiver_args(args);
  const std::string& path = args.model.dir;
  const std::string input_file =
      args.input && !args.input->empty() && (*args.input)[0] == '@' ? args.input->substr(1) : "";
  check_outputs({{"--html", args.html}}, {{"--model", path}, {"--input", input_file}});
  std::map<std::string, std::string> metadata;
  std::unique_ptr<Perceiver> model;
  try {
    model = Perceiver::load(path, &metadata);
  } catch (const Error& e) {
    throw Error(e.what(), Error::Kind::invalid_argument);
  }
  const PerceiverConfig& c = model->config();
  require_memory(explain::run_bytes(c, !args.html.empty()), args.memory_limit,
                 "explaining " + path + " (every latent's weight on every position kept)",
                 "a smaller model");
  const PerceiverTask task = make_perceiver_task(c.task, c.length);
  const std::string input =
      args.input ? perceiver_input(*args.input) : perceiver_test_set(task, 1).front().input;
  const explain::Run run = explain::capture(*model, task, input);
  // Before any file is written or anything printed: weights that overflow float32 made every
  // probability and latent weight NaN, shown as "p = nan" with exit 0 (issue 26's last sweep).
  for (std::size_t i = 0; i < run.output.probabilities.size(); ++i)
    require_finite(run.output.probabilities[i], "the probability of class " + std::to_string(i));
  require_finite(run.blocks.front().layers.front().weights,
                 "the cross-attention weights of the latents");
  const int64_t top = args.top.value_or(3);
  const explain::Gathers gathers = explain::gathers(run, top);
  if (!args.html.empty()) {
    const std::string html = explain::perceiver_html(
        run, gathers, "Perceiver latents: " + std::filesystem::path(path).filename().string());
    write_outputs({{{"--html", args.html}, html}});
    report_written(args.html, html.size());
  }
  if (args.json)
    std::cout << explain::json_of(
                     run, {.top = top, .html_path = args.html.empty() ? "" : json_path(args.html)})
              << "\n";
  else
    std::cout << explain::render_perceiver(run, gathers);
  return 0;
}

}  // namespace qkv::cli
