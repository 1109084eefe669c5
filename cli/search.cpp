// `qkv search QUERY --corpus FILE`: the corpus lines ranked by cosine to the query — retrieval,
// the picture behind the words "query" and "key".
#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "embed.h"
#include "finite.h"
#include "options.h"
#include "progress.h"
#include "text.h"

namespace qkv::cli {

CLI::App* add_search_command(CLI::App& app, SearchArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "search", "rank the lines of a corpus by similarity to a query: the query/key picture");
  cmd->add_option("query", args.query, "what to look for")->required();
  cmd->add_option("--corpus", args.corpus, "a text file, one document (key) a line")
      ->required()
      ->option_text("FILE");
  cmd->add_option("--top", args.top, "how many results to show (default 10)")
      ->check(CLI::Range(1, 1000000))
      ->option_text("N");
  cmd->add_option("--temperature", args.temperature,
                  "τ of the attention column softmax(cos/τ) (default 0.05)")
      ->check(finite_number({.lo = 1e-6, .hi = 1e6}))
      ->option_text("T");
  cmd->add_flag("--json", args.json, "print every line's cosine and weight as JSON");
  add_model_option(*cmd, args.model);
  cmd->footer(
      "\nExample:\n"
      "  qkv search \"where can I get cash\" --corpus docs.txt --top 3\n");
  return cmd;
}

int run_search(const SearchArgs& args) {
  const std::vector<std::string> corpus = read_lines("--corpus", args.corpus);
  const SentenceModel model = load_model(args.model);
  model.tokenize(args.query);
  std::vector<std::string> texts = {args.query};
  texts.insert(texts.end(), corpus.begin(), corpus.end());
  Progress progress;
  const Tensor e = model.embed(texts, [&](std::size_t done, std::size_t all) {
    if (all > 64) progress.show("embedding " + std::to_string(done) + "/" + std::to_string(all));
  });
  progress.clear();
  require_finite_embeddings(e, texts);
  const std::size_t n = corpus.size();
  std::vector<double> cos(n), weight(n);
  for (std::size_t i = 0; i < n; ++i) cos[i] = cosine(e, 0, e, static_cast<int64_t>(i + 1));
  // softmax(cos/τ), computed stably: attention's weights if these lines were its keys.
  const double top_cos = *std::max_element(cos.begin(), cos.end());
  double total = 0;
  for (std::size_t i = 0; i < n; ++i)
    total += weight[i] = std::exp((cos[i] - top_cos) / args.temperature);
  for (double& w : weight) w /= total;
  for (std::size_t i = 0; i < n; ++i) {
    require_finite(cos[i], "cos(q, k) of line " + std::to_string(i + 1));
    require_finite(weight[i], "the softmax weight of line " + std::to_string(i + 1));
  }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return cos[a] > cos[b]; });
  const std::size_t shown = std::min(n, static_cast<std::size_t>(args.top));

  if (args.json) {
    nlohmann::json results = nlohmann::json::array();
    for (std::size_t r = 0; r < n; ++r)
      results.push_back({{"rank", r + 1},
                         {"line", order[r] + 1},
                         {"text", corpus[order[r]]},
                         {"cosine", cos[order[r]]},
                         {"weight", weight[order[r]]}});
    std::cout << nlohmann::json{{"query", args.query},
                                {"temperature", args.temperature},
                                {"results", results}}
                     .dump()
              << "\n";
    return 0;
  }
  std::cout << "query: " << clip(printable(args.query), 72) << "\n"
            << "keys:  " << n << " lines of " << printable(args.corpus) << "\n\n"
            << "  rank   cos(q,k)  softmax(cos/" << short_number(args.temperature) << ")  text\n";
  for (std::size_t r = 0; r < shown; ++r) {
    const std::size_t i = order[r];
    std::cout << pad_left(std::to_string(r + 1), 6) << pad_left(fixed(cos[i], 3), 11) << "  "
              << pad_left(fixed(weight[i], 3), 6) << " " << pad_right(bar(weight[i], 8), 8) << "  "
              << clip(printable(corpus[i]), 44) << "\n";
  }
  if (shown < n) std::cout << "  … " << n - shown << " more (--top N, --json)\n";
  std::cout << "\nThe query and every line are embedded as unit vectors; cos(q, k) is their dot\n"
               "product. Attention does the same with a token's query against every token's key,\n"
               "then turns the scores into weights with a softmax, as the middle column does.\n";
  return 0;
}

}  // namespace qkv::cli
