// `qkv explain --model FILE.safetensors --input TEXT`: a model trained by `qkv train`, run on one
// source by greedy decoding, and the cross-attention of one decoder layer drawn as an alignment
// heatmap (Bahdanau et al. 2014, Figure 3: each output character lights up the source
// characters it was read from).
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "explain.h"
#include "explain_phonebook.h"
#include "finite.h"
#include "memory.h"
#include "output.h"
#include "qkv/explain.h"
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
    auto number = [&](const char* key, double lo, double hi) {
      const auto it = metadata.find(key);
      if (it == metadata.end()) return;
      double x = 0;
      const char* begin = it->second.data();
      const auto [end, ec] = std::from_chars(begin, begin + it->second.size(), x);
      if (ec != std::errc() || end != begin + it->second.size() || !(x >= lo && x <= hi))
        throw Error(path + ": the metadata's " + key + " is \"" + clip(it->second, 24) +
                    "\"; expected a number from " + short_number(lo) + " to " + short_number(hi));
    };
    number("qkv.steps", 0, 1e8);
    number("qkv.test_accuracy", 0, 1);
    return model;
  } catch (const Error& e) {
    throw Error(e.what(), Error::Kind::invalid_argument);
  }
}

}  // namespace

int run_explain_seq2seq(const ExplainArgs& args) {
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
  std::map<std::string, std::string> metadata;
  const std::unique_ptr<Seq2Seq> model = load_seq2seq(path, metadata);
  const Seq2SeqConfig& c = model->config();
  require_memory(seq2seq_capture_bytes(c), args.memory_limit,
                 "explaining " + path + " (every attention layer's weights kept)",
                 "a smaller model");
  std::string source;
  if (args.input || args.text) {
    source = args.input ? *args.input : *args.text;
  } else {
    source = test_set(make_task(c.task, c.task_options), 1).front().source;
  }
  if (source.empty()) throw Error("--input is empty; expected a source, e.g. \"march 3rd 2021\"");
  const std::string given = args.input ? "--input" : "the text";
  try {
    model->vocab().encode(source);
  } catch (const Error& e) {
    throw Error(given + " \"" + clip(source, 40) + "\": " + e.what());
  }
  if (static_cast<int64_t>(source.size()) > c.max_source)
    throw Error(given + " has " + std::to_string(source.size()) +
                " characters; the model reads at most " + std::to_string(c.max_source));
  check_index("--layer", args.layer, c.layers, "decoder layers");
  check_index("--head", args.head, c.heads, "heads");
  const int64_t layer = args.layer.value_or(c.layers - 1);

  const Seq2Seq::Decoded d = model->greedy_decode({source}, static_cast<int>(layer));
  const Tensor& heads = d.alignment.front();  // [H, steps, S]
  require_finite(heads, "the cross-attention weights of decoder layer " + std::to_string(layer));
  const int64_t h = heads.dim(0), steps = heads.dim(1), n = heads.dim(2);
  // Each head's mean entropy over the output steps (nats): the lowest is the sharpest alignment.
  std::vector<double> entropy(static_cast<std::size_t>(h), 0.0);
  for (int64_t k = 0; k < h; ++k) {
    for (int64_t t = 0; t < steps; ++t)
      for (int64_t j = 0; j < n; ++j) {
        const double w = heads.at<double>(k, t, j);
        if (w > 0) entropy[static_cast<std::size_t>(k)] -= w * std::log(w);
      }
    entropy[static_cast<std::size_t>(k)] /= static_cast<double>(std::max<int64_t>(steps, 1));
  }
  const int64_t head =
      args.head.value_or(std::min_element(entropy.begin(), entropy.end()) - entropy.begin());
  // The lookup task's model read as a phonebook: the binding, the key match, the value read back.
  std::vector<std::string> phonebook;
  std::optional<Seq2SeqCapture> captured;
  if (c.task == "lookup" || !args.html.empty()) captured = model->capture(source);
  if (c.task == "lookup") phonebook = phonebook_reading(*captured);
  if (!args.html.empty()) {
    // Opens on the cross-attention of the layer and head shown in the terminal.
    explain::Report report = explain::report_of(
        *captured, std::filesystem::path(path).filename().string() + " (" + c.task + " model)");
    for (const std::string& line : phonebook) report.texts.emplace_back("phonebook", line);
    report.layer = layer;
    report.head = head;
    const std::string html = explain::html_report(report);
    write_outputs({{{"--html", args.html}, html}});
    report_written(args.html, html.size());
  }
  Tensor shown(Shape{steps, n}, DType::f64);
  for (int64_t t = 0; t < steps; ++t)
    for (int64_t j = 0; j < n; ++j) shown.at<double>(t, j) = heads.at<double>(head, t, j);
  std::vector<std::string> labels;
  for (const int32_t id : d.ids.front()) labels.push_back(model->vocab().token(id));
  const std::string& output = d.outputs.front();

  if (args.json) {
    nlohmann::json rows = nlohmann::json::array(), per_head = nlohmann::json::array();
    for (int64_t t = 0; t < steps; ++t) {
      std::vector<double> r(shown.data<double>() + t * n, shown.data<double>() + (t + 1) * n);
      rows.push_back(r);
    }
    for (int64_t k = 0; k < h; ++k) {
      nlohmann::json m = nlohmann::json::array();
      for (int64_t t = 0; t < steps; ++t)
        m.push_back(std::vector<double>(heads.data<double>() + (k * steps + t) * n,
                                        heads.data<double>() + (k * steps + t + 1) * n));
      per_head.push_back(m);
    }
    nlohmann::json src = nlohmann::json::array();
    for (const char ch : source) src.push_back(std::string(1, ch));
    std::cout << nlohmann::json{{"model", json_path(path)},
                                {"architecture", std::string(to_string(c.architecture))},
                                {"task", c.task},
                                {"input", source},
                                {"output", output},
                                {"layer", layer},
                                {"head", head},
                                {"entropy", entropy},
                                {"source", src},
                                {"steps", labels},
                                {"alignment", rows},
                                {"heads", per_head}}
                     .dump()
              << "\n";
    return 0;
  }
  const bool color = args.color || (!args.no_color && ::isatty(STDOUT_FILENO) == 1 &&
                                    std::getenv("NO_COLOR") == nullptr);
  const bool rnn = c.architecture == Seq2SeqArchitecture::rnnsearch;
  if (rnn)
    std::cout << c.task << " model: RNNsearch (Bahdanau et al. 2014)\n  bidirectional GRU encoder "
              << c.d_model / 2 << " + " << c.d_model / 2 << " units, GRU decoder " << c.d_model
              << " units";
  else
    std::cout << c.task << " model: " << c.layers << " + " << c.layers << " layers, " << c.heads
              << " heads, d_model " << c.d_model;
  const auto steps_it = metadata.find("qkv.steps");
  const auto acc_it = metadata.find("qkv.test_accuracy");
  if (steps_it != metadata.end() && acc_it != metadata.end())
    std::cout << (rnn ? ";\n  trained " : "; trained ") << steps_it->second
              << " steps, held-out accuracy " << fixed(100 * std::atof(acc_it->second.c_str()), 1)
              << "%";
  std::cout << "\n\n  input   \"" << printable(source) << "\"\n  output  \"" << printable(output)
            << "\""
            << (d.ids.front().empty() || d.ids.front().back() != Vocabulary::kEos
                    ? " (no end token within the model's limit)"
                    : "")
            << "\n\n";
  if (rnn)
    std::cout << "Additive attention, the alignment of Bahdanau et al.'s Figure 3:\n";
  else
    std::cout << "Cross-attention of decoder layer " << layer << ", head " << head
              << (args.head ? ""
                            : ", the sharpest of its " + std::to_string(h) + " (lowest entropy)")
              << ":\n";
  std::cout << "where each output character looks in the input (row: output; column: input)\n\n";
  std::cout << explain::render_alignment(source, labels, shown, {.color = color});
  if (!phonebook.empty()) {
    std::cout << "\nThe phonebook, read off the attention:\n";
    for (const std::string& line : phonebook) std::cout << "  " << line << "\n";
  }
  if (rnn) {
    if (!captured) captured = model->capture(source);
    std::cout << "\n" << explain::render_rnnsearch(*captured);
    std::cout << "--json prints every weight; --html FILE the report.\n";
  } else if (!args.head) {
    std::cout << "\nentropy by head (nats; 0: all on one character):";
    for (int64_t k = 0; k < h; ++k)
      std::cout << "  h" << k << " " << fixed(entropy[static_cast<std::size_t>(k)], 2);
    std::cout << "\n--layer L --head H shows another; --json prints every weight.\n";
  }
  return 0;
}

}  // namespace qkv::cli
