// `qkv explain --model FILE.safetensors` for a Perceiver saved by `qkv train --model perceiver`:
// what each latent query gathers from the long input (its cross-attention weights), in the
// terminal and as an HTML heatmap of latents × positions.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "explain.h"
#include "finite.h"
#include "memory.h"
#include "output.h"
#include "qkv/files.h"
#include "qkv/perceiver.h"
#include "qkv/perceiver_report.h"
#include "text.h"

namespace qkv::cli {

namespace {

// A Perceiver reads at most 65,536 symbols: 1 MiB is far above any input, and far below what a
// FIFO, /dev/zero or a sparse 2 GB file would have it read (each was read whole, or forever).
constexpr InputSpec kInputFile{.expected = "a regular text file holding the input",
                               .max_bytes = uint64_t{1} << 20,
                               .noun = "the input"};

// --input TEXT, or --input @FILE for an input too long to type (one trailing newline dropped).
std::string read_input(const std::string& given) {
  if (given.empty() || given[0] != '@') return given;
  std::string text;
  try {
    text = read_input_file(given.substr(1), kInputFile);
  } catch (const Error& e) {
    throw Error("--input @" + std::string(e.what()), e.kind());
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

}  // namespace

int run_explain_perceiver(const ExplainArgs& args) {
  if (args.text)
    throw Error("the text \"" + clip(*args.text, 40) +
                "\" is given, but a Perceiver reads --input; expected --input TEXT or @FILE");
  // Each option a Perceiver does not read is refused, saying where it applies.
  if (args.text_b)
    throw Error("a second text \"" + clip(*args.text_b, 40) +
                "\" is given, but a Perceiver reads one --input; expected no second text");
  if (args.layer || args.head)
    throw Error(std::string(args.layer ? "--layer" : "--head") +
                " picks one head of a sentence model (the BERT model, smollm2) or of a model "
                "from qkv train; a Perceiver shows every latent's heads together; expected no " +
                (args.layer ? "--layer" : "--head"));
  if (!args.svg.empty() || !args.png.empty())
    throw Error(std::string(args.svg.empty() ? "--png" : "--svg") +
                " draws a sentence model's heatmap (the BERT model, smollm2); a Perceiver's "
                "latents × positions heatmap is in --html FILE");
  if (!args.token.empty())
    throw Error("--token '" + args.token +
                "' applies to qkv explain on a sentence (a BERT model or a decoder); a Perceiver "
                "shows what every latent gathers instead; expected no --token");
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
  require_memory(
      perceiver_explain_bytes(c) + (args.html.empty() ? 0 : explain::perceiver_html_bytes(c)),
      args.memory_limit, "explaining " + path + " (every latent's weight on every position kept)",
      "a smaller model");
  const PerceiverTask task = make_perceiver_task(c.task, c.length);
  const std::string input =
      args.input ? read_input(*args.input) : perceiver_test_set(task, 1).front().input;
  const PerceiverExplanation e = explain_perceiver(*model, task, input, args.top.value_or(3));
  // Before any file is written or anything printed: weights that overflow float32 made every
  // probability and latent weight NaN, shown as "p = nan" with exit 0 (issue 26's last sweep).
  for (std::size_t i = 0; i < e.probabilities.size(); ++i)
    require_finite(e.probabilities[i], "the probability of class " + std::to_string(i));
  for (std::size_t i = 0; i < e.weights.size(); ++i)
    if (!std::isfinite(e.weights[i]))
      require_finite(e.weights[i], "the cross-attention weights of the latents");

  if (!args.html.empty()) {
    const std::string html = explain::perceiver_html(
        e, "Perceiver latents: " + std::filesystem::path(path).filename().string());
    write_outputs({{{"--html", args.html}, html}});
    report_written(args.html, html.size());
  }
  if (args.json) {
    nlohmann::json latents = nlohmann::json::array();
    for (const LatentGather& g : e.gathers) {
      nlohmann::json top = nlohmann::json::array();
      for (const auto& [l, w] : g.top)
        top.push_back({{"position", l},
                       {"symbol", std::string(1, input[static_cast<std::size_t>(l)])},
                       {"weight", w}});
      latents.push_back({{"counted_share", g.counted_mean},
                         {"times_uniform", g.times_uniform ? nlohmann::json(*g.times_uniform)
                                                           : nlohmann::json(nullptr)},
                         {"counted_share_per_head", g.counted_share},
                         {"effective_positions", g.effective_positions},
                         {"top", top}});
    }
    std::cout << nlohmann::json{{"model", "perceiver"},
                                {"length", e.length},
                                {"count", e.count},
                                {"uniform_share", e.uniform_share},
                                {"predicted", e.predicted},
                                {"probabilities", e.probabilities},
                                {"latents", latents},
                                {"html", args.html.empty() ? nlohmann::json(nullptr)
                                                           : nlohmann::json(json_path(args.html))}}
                     .dump()
              << "\n";
    return 0;
  }
  std::vector<int64_t> where;
  for (int64_t l = 0; l < e.length; ++l)
    if (input[static_cast<std::size_t>(l)] == e.counted) where.push_back(l);
  std::string places;
  for (int64_t l : where) places += (places.empty() ? "" : ", ") + std::to_string(l);
  std::cout << "qkv explain: a Perceiver, " << e.latents << " latent queries × " << e.heads
            << " heads over " << grouped(e.length) << " symbols\n\n";
  std::cout << "  input       \"" << clip(input, 60) << "\"\n";
  std::cout << "              " << e.count << " '" << e.counted << "'"
            << (where.empty() ? "" : " at " + places) << "\n";
  // The numbers, formatted once for this table and the --html page alike.
  const explain::LatentTable table = explain::latent_table(e);
  std::cout << "  prediction  " << e.predicted << " (p = " << table.probability << "), "
            << (e.predicted == e.count ? "right" : "wrong: the count is " + std::to_string(e.count))
            << "\n\n";
  std::cout << "  What each latent gathers: its cross-attention weight on the '" << e.counted
            << "' (all heads' mean,\n  and how many times a uniform look's " << table.uniform_share
            << "; then per head), how many positions\n"
            << "  it spreads over (exp entropy), and the positions it weighs most:\n\n";
  explain::Table t;
  t.column_labels = {
      "on '" + std::string(1, e.counted) + "'", "× uniform", "", "per head", "spread", "top"};
  auto joined = [](const std::vector<std::string>& parts) {
    std::string s;
    for (const std::string& p : parts) s += (s.empty() ? "" : " ") + p;
    return s;
  };
  for (const explain::LatentRow& r : table.rows) {
    t.row_labels.push_back(r.label);
    t.cells.push_back(
        {r.counted, r.times_uniform, bar(r.bar, 10), joined(r.per_head), r.spread, joined(r.top)});
  }
  std::cout << render(t);
  return 0;
}

}  // namespace qkv::cli
