// `qkv search QUERY --corpus FILE`: the corpus lines ranked by cosine to the query — retrieval,
// the picture behind the words "query" and "key".
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "embed.h"
#include "memory.h"
#include "options.h"
#include "output.h"
#include "qkv/finite.h"
#include "qkv/json.h"
#include "qkv/terminal.h"

namespace qkv::cli {

CLI::App* add_search_command(CLI::App& app, SearchArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "search", "rank the lines of a corpus by similarity to a query: the query/key picture");
  cmd->add_option("query", args.query, "what to look for")
      ->required()
      ->check(text("a query, e.g. qkv search \"where can I get cash\" --corpus docs.txt"));
  cmd->add_option("--corpus", args.corpus, "a text file, one document (key) a line")
      ->required()
      ->option_text("FILE");
  cmd->add_option("--top", args.top, "how many results to show, 1 to 10^6 (default 10)")
      ->transform(integer({.lo = 1, .hi = 1'000'000}))
      ->option_text("N");
  cmd->add_option("--temperature", args.temperature,
                  "τ of the attention column softmax(cos/τ) (default 0.05)")
      ->check(finite_number({.lo = 1e-6, .hi = 1e6}))
      ->option_text("T");
  cmd->add_flag("--json", args.json, "print every line's cosine and weight as JSON");
  add_model_option(*cmd, args.model);
  add_memory_limit_option(*cmd, args.memory_limit, "the corpus, its embeddings and a batch");
  cmd->footer(
      "\nExample:\n"
      "  qkv search \"where can I get cash\" --corpus docs.txt --top 3\n");
  return cmd;
}

int run_search(const SearchArgs& args) {
  // texts[0] is the query, texts[1 + i] line i of the corpus (one copy of the corpus in memory).
  std::vector<std::string> texts = read_lines("--corpus", args.corpus);
  texts.insert(texts.begin(), args.query);
  const SentenceModel model = load_model(args.model);
  model.require_tokens(args.query, "the query");
  note(model.cut_note(
      {texts.data(), 1}, [](std::size_t) { return "the query"; }, "queries"));
  note(model.cut_note(
      {texts.data() + 1, texts.size() - 1},
      [&texts](std::size_t i) { return "the line \"" + clip(printable(texts[i + 1]), 24) + "\""; },
      "lines"));
  const std::size_t n = texts.size() - 1;
  // The corpus is in memory already; its ids, embeddings and a batch's activations, and a cosine,
  // a weight and a rank a line are to come.
  const int64_t in = texts_bytes(texts);
  require_memory(model.embed_bytes(static_cast<int64_t>(texts.size()), in, longest_text(texts)) +
                     in + 24 * static_cast<int64_t>(n),
                 args.memory_limit,
                 "searching " + grouped(static_cast<int64_t>(n)) + " lines (" + bytes_str(in) + ")",
                 "a smaller --corpus");
  CountProgress progress("embedding", "lines");
  // Counted in lines of the corpus: the query, embedded first, is not one of them (the log read
  // "1,000,001 lines" for a million, issue 26).
  const Tensor e = model.embed(texts, [&](std::size_t done, std::size_t all) {
    progress.update(static_cast<int64_t>(done) - (done > 0 ? 1 : 0), static_cast<int64_t>(all) - 1);
  });
  progress.clear();
  require_finite_rows(e, [&](int64_t i) { return text_label(texts, i); });
  const auto line = [&](std::size_t i) -> const std::string& { return texts[i + 1]; };
  const auto [cos, weight, order] = rank_by_cosine(e, args.temperature);
  const std::size_t shown = std::min(n, static_cast<std::size_t>(args.top));

  if (args.json) {
    // {"query": …, "results": [...], "temperature": τ}, written one result at a time: as one JSON
    // value a million lines would take gigabytes before the first byte is out.
    std::cout << "{\"query\":" << nlohmann::json(args.query).dump() << ",\"results\":[";
    for (std::size_t r = 0; r < n; ++r)
      std::cout << (r > 0 ? "," : "")
                << nlohmann::json{{"rank", r + 1},
                                  {"line", order[r] + 1},
                                  {"text", line(order[r])},
                                  {"cosine", number_json(cos[order[r]])},
                                  {"weight", number_json(weight[order[r]])}}
                       .dump();
    std::cout << "],\"temperature\":" << number_json(args.temperature).dump() << "}\n";
    return 0;
  }
  std::cout << "query: " << clip(printable(args.query), 72) << "\n"
            << "keys:  " << n << " lines of " << printable(args.corpus) << "\n\n"
            << "  rank   cos(q,k)  softmax(cos/" << short_number(args.temperature) << ")  text\n";
  for (std::size_t r = 0; r < shown; ++r) {
    const std::size_t i = order[r];
    std::cout << pad_left(std::to_string(r + 1), 6) << pad_left(fixed(cos[i], 3), 11) << "  "
              << pad_left(fixed(weight[i], 3), 6) << " " << pad_right(bar(weight[i], 8), 8) << "  "
              << clip(printable(line(i)), 44) << "\n";
  }
  if (shown < n) std::cout << "  … " << n - shown << " more (--top N, --json)\n";
  std::cout << "\nThe query and every line are embedded as unit vectors; cos(q, k) is their dot\n"
               "product. Attention does the same with a token's query against every token's key,\n"
               "then turns the scores into weights with a softmax, as the middle column does.\n";
  return 0;
}

}  // namespace qkv::cli
