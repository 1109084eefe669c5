// `qkv similarity A B`: the cosine of two sentence embeddings.
#include <iostream>
#include <nlohmann/json.hpp>

#include "embed.h"
#include "options.h"
#include "output.h"
#include "qkv/finite.h"
#include "qkv/json.h"
#include "qkv/terminal.h"

namespace qkv::cli {

CLI::App* add_similarity_command(CLI::App& app, SimilarityArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "similarity", "cosine similarity of two texts' embeddings (1: same meaning, ~0: unrelated)");
  cmd->add_option("a", args.a, "the first text")
      ->required()
      ->check(text("a first text to compare"));
  cmd->add_option("b", args.b, "the second text")
      ->required()
      ->check(text("a second text to compare"));
  cmd->add_flag("--json", args.json, "print {\"a\", \"b\", \"cosine\"} as JSON");
  add_model_option(*cmd, args.model);
  cmd->footer(
      "\nExample:\n"
      "  qkv similarity \"I sat on the river bank\" \"I deposited money at the bank\"\n");
  return cmd;
}

int run_similarity(const SimilarityArgs& args) {
  const SentenceModel model = load_model(args.model);
  model.require_tokens(args.a, "text a");
  model.require_tokens(args.b, "text b");
  const std::vector<std::string> texts = {args.a, args.b};
  note(model.cut_note(
      texts, [](std::size_t i) { return i == 0 ? "text a" : "text b"; }, "texts"));
  const Tensor e = model.embed(texts);
  require_finite_rows(e, [&](int64_t i) { return text_label(texts, i); });
  const double c = cosine(e, 0, e, 1);
  require_finite(c, "cos(a, b)");
  if (args.json) {
    std::cout << nlohmann::json{{"a", args.a}, {"b", args.b}, {"cosine", number_json(c)}}.dump()
              << "\n";
    return 0;
  }
  std::cout << "cos(a, b) = " << fixed(c, 4) << "  " << bar(c, 20) << "\n"
            << "  a: " << clip(printable(args.a), 72) << "\n"
            << "  b: " << clip(printable(args.b), 72) << "\n"
            << "Both are unit vectors, so this is their dot product: the same q·k that attention\n"
               "scores with, here between whole sentences (1 = same direction, 0 = unrelated).\n";
  return 0;
}

}  // namespace qkv::cli
