// `qkv explain --model FILE.safetensors` for a Perceiver saved by `qkv train --model perceiver`:
// what each latent query gathers from the long input (its cross-attention weights), in the
// terminal and as an HTML heatmap of latents × positions.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "explain.h"
#include "memory.h"
#include "qkv/files.h"
#include "qkv/perceiver.h"
#include "qkv/perceiver_report.h"
#include "text.h"

namespace qkv::cli {

namespace {

// --input TEXT, or --input @FILE for an input too long to type (one trailing newline dropped).
std::string read_input(const std::string& given) {
  if (given.empty() || given[0] != '@') return given;
  std::ifstream in(given.substr(1), std::ios::binary);
  if (!in) throw Error("--input " + given + ": cannot read " + given.substr(1));
  std::ostringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

std::string share(double x) { return fixed(x, 3); }

}  // namespace

int run_explain_perceiver(const ExplainArgs& args) {
  if (args.text)
    throw Error("the text \"" + clip(*args.text, 40) +
                "\" is given, but a Perceiver reads --input; expected --input TEXT or @FILE");
  if (args.text_b || args.layer || args.head || !args.svg.empty() || !args.png.empty())
    throw Error(
        "--layer, --head, --svg, --png and a second text are not available for a Perceiver; use "
        "--input, --top, --json and --html");
  if (!args.token.empty())
    throw Error("--token '" + args.token +
                "' applies to qkv explain on a sentence (the BERT model or smollm2); a Perceiver "
                "shows what every latent gathers instead; expected no --token");
  const std::string& path = args.model.dir;
  check_outputs({{"--html", args.html}});
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
  if (args.top < 1 || args.top > 64)
    throw Error("--top " + std::to_string(args.top) + " is out of range; expected 1 to 64");
  const PerceiverExplanation e = explain_perceiver(*model, task, input, args.top);

  if (!args.html.empty())
    write_outputs(
        {{{"--html", args.html},
          explain::perceiver_html(
              e, "Perceiver latents: " + std::filesystem::path(path).filename().string())}});
  if (args.json) {
    nlohmann::json latents = nlohmann::json::array();
    for (const LatentGather& g : e.gathers) {
      nlohmann::json top = nlohmann::json::array();
      for (const auto& [l, w] : g.top)
        top.push_back({{"position", l},
                       {"symbol", std::string(1, input[static_cast<std::size_t>(l)])},
                       {"weight", w}});
      latents.push_back({{"counted_share", g.counted_mean},
                         {"counted_share_per_head", g.counted_share},
                         {"effective_positions", g.effective_positions},
                         {"top", top}});
    }
    std::cout << nlohmann::json{{"model", "perceiver"},
                                {"length", e.length},
                                {"count", e.count},
                                {"predicted", e.predicted},
                                {"probabilities", e.probabilities},
                                {"latents", latents},
                                {"html", args.html.empty() ? nlohmann::json(nullptr)
                                                           : nlohmann::json(args.html)}}
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
  std::cout << "  prediction  " << e.predicted
            << " (p = " << fixed(e.probabilities[static_cast<std::size_t>(e.predicted)], 3) << "), "
            << (e.predicted == e.count ? "right" : "wrong: the count is " + std::to_string(e.count))
            << "\n\n";
  const double uniform = static_cast<double>(e.count) / static_cast<double>(e.length);
  std::cout << "  What each latent gathers: its cross-attention weight on the '" << e.counted
            << "' (all heads' mean,\n  and how many times a uniform look's " << fixed(uniform, 4)
            << "; then per head), how many positions\n"
            << "  it spreads over (exp entropy), and the positions it weighs most:\n\n";
  explain::Table t;
  t.column_labels = {
      "on '" + std::string(1, e.counted) + "'", "× uniform", "", "per head", "spread", "top"};
  double most = 0;  // the bars are drawn against the latent that gathers the most
  for (const LatentGather& g : e.gathers) most = std::max(most, g.counted_mean);
  for (std::size_t n = 0; n < e.gathers.size(); ++n) {
    const LatentGather& g = e.gathers[n];
    std::string heads, top;
    for (double s : g.counted_share) heads += (heads.empty() ? "" : " ") + fixed(s, 2);
    for (const auto& [l, w] : g.top)
      top += (top.empty() ? "" : " ") + std::string(1, input[static_cast<std::size_t>(l)]) + "@" +
             std::to_string(l);
    t.row_labels.push_back("latent " + std::to_string(n));
    const std::string times =
        uniform > 0 ? fixed(g.counted_mean / uniform, 1) + "×" : std::string("—");
    t.cells.push_back({share(g.counted_mean), times, bar(most > 0 ? g.counted_mean / most : 0, 10),
                       heads, grouped(std::llround(g.effective_positions)), top});
  }
  std::cout << render(t);
  if (!args.html.empty())
    std::cout << "\nwrote " << printable(args.html) << " (latents × positions heatmap)\n";
  return 0;
}

}  // namespace qkv::cli
