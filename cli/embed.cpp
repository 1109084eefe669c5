// `qkv embed`: sentence embeddings, printed, as JSON, or written to a .npy file.
#include "embed.h"

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "memory.h"
#include "options.h"
#include "output.h"
#include "qkv/files.h"
#include "qkv/finite.h"
#include "qkv/json.h"
#include "qkv/npy.h"
#include "qkv/terminal.h"

namespace qkv::cli {

CLI::App* add_embed_command(CLI::App& app, EmbedArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "embed",
      "sentence embeddings from the model: unit vectors whose dot products are Q·K-style "
      "similarities");
  cmd->add_option("texts", args.texts, "texts to embed; none: one text per line of stdin")
      ->check(text("a text to embed, e.g. qkv embed \"The cat sat on the mat\""));
  cmd->add_option("--npy", args.npy, "write the embeddings [N, 384] (float32) to FILE")
      ->option_text("FILE");
  cmd->add_flag("--json", args.json, "print texts, tokens and vectors as JSON");
  cmd->add_option("--batch-size", args.batch_size, "texts per forward pass, 1 to 4096 (default 32)")
      ->transform(integer({.lo = 1, .hi = 4096}))
      ->option_text("N");
  cmd->add_option("--precision", args.precision,
                  "fp32 | bf16: bf16 rounds each dense layer's inputs and weights, and attention's "
                  "q, k, v, to bfloat16 before float32 products (default fp32), e.g. "
                  "--precision bf16 --compare-fp32")
      ->check(one_of({"fp32", "bf16"}))
      ->option_text("P");
  cmd->add_flag("--compare-fp32", args.compare_fp32,
                "with --precision bf16: embed the texts in fp32 too and report the largest "
                "cosine distance between the two (on stderr; in --json as \"compare_fp32\")");
  add_model_option(*cmd, args.model);
  add_memory_limit_option(*cmd, args.memory_limit, "the texts, their embeddings and a batch");
  cmd->footer(
      "\nExamples:\n"
      "  qkv embed \"The cat sat on the mat\" \"A dog slept on the rug\"\n"
      "  qkv embed --npy vectors.npy < sentences.txt\n"
      "  qkv embed --precision bf16 --compare-fp32 < sentences.txt\n"
      "  qkv embed --json \"river bank\" | jq '.embeddings[0].vector[:4]'\n");
  return cmd;
}

namespace {

// bf16 against fp32 on the same texts: 1 − cos of each pair of embeddings, the largest and the
// mean (both unit vectors, so 1 − cos is half their squared distance).
struct Fp32Comparison {
  double max_distance = 0, mean_distance = 0;
  int64_t worst = 0;  // the text of the largest
};

Fp32Comparison compare_to_fp32(const Tensor& bf16, const Tensor& fp32) {
  Fp32Comparison c;
  const int64_t n = bf16.dim(0);
  for (int64_t i = 0; i < n; ++i) {
    const double distance = 1 - cosine(bf16, i, fp32, i);
    c.mean_distance += distance / static_cast<double>(n);
    if (distance > c.max_distance) c.max_distance = distance, c.worst = i;
  }
  return c;
}

std::string sci(double x) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2e", x);
  return s;
}

}  // namespace

int run_embed(const EmbedArgs& args) {
  // The comparison is opt-in, not part of every bf16 run: it embeds every text twice, and a user
  // who chose bf16 for speed wants its figure once, when deciding, not on every run.
  if (args.compare_fp32 && args.precision != "bf16")
    throw Error(
        "--compare-fp32 compares bf16 embeddings with fp32 ones; expected it with "
        "--precision bf16");
  const Precision precision = *parse_precision(args.precision);  // checked by one_of
  const std::vector<std::string> texts = texts_or_stdin(args.texts, "texts");
  std::vector<InputPath> inputs = {model_input(args.model)};
  if (args.texts.empty()) inputs.push_back({"stdin", "/dev/stdin"});  // `< x.npy` with --npy x.npy
  check_outputs({{"--npy", args.npy}}, inputs);
  const SentenceModel model =
      load_model(args.model, {.batch_size = args.batch_size, .precision = precision});
  for (std::size_t i = 0; i < texts.size(); ++i)  // bad UTF-8, or no tokens → error
    model.require_tokens(texts[i], "text " + std::to_string(i + 1));
  note(model.cut_note(
      texts, [](std::size_t i) { return "text " + std::to_string(i + 1); }, "texts"));
  // The texts are in memory already; their ids, the embeddings (twice with --npy: the file's
  // bytes are built whole) and a batch's activations are to come.
  const int64_t n_texts = static_cast<int64_t>(texts.size()), in = texts_bytes(texts);
  const int64_t npy = args.npy.empty() ? 0 : n_texts * model.config().hidden_size * 4;
  const int64_t fp32 = args.compare_fp32 ? n_texts * model.config().hidden_size * 4 : 0;
  require_memory(
      model.embed_bytes(n_texts, in, longest_text(texts)) + in + npy + fp32, args.memory_limit,
      "embedding " + grouped(n_texts) + " texts (" + bytes_str(in) + ")", "fewer texts a run");
  CountProgress progress("embedding", "texts");
  const Tensor e = model.embed(texts, [&](std::size_t done, std::size_t all) {
    progress.update(static_cast<int64_t>(done), static_cast<int64_t>(all));
  });
  progress.clear();
  require_finite_rows(e, [&](int64_t i) {
    return text_label(texts, i);
  });  // before --npy is written or anything printed
  Fp32Comparison compared;
  if (args.compare_fp32) {
    CountProgress again("embedding in fp32 to compare", "texts");
    const Tensor fp32_e =
        model.with_precision(Precision::fp32).embed(texts, [&](std::size_t done, std::size_t all) {
          again.update(static_cast<int64_t>(done), static_cast<int64_t>(all));
        });
    again.clear();
    compared = compare_to_fp32(e, fp32_e);
    note("bf16 against fp32: largest cosine distance (1 − cos) " + sci(compared.max_distance) +
         " (" + text_label(texts, compared.worst) + "), mean " + sci(compared.mean_distance) +
         " over " + grouped(n_texts) + " texts");
  }
  const int64_t n = e.dim(0), d = e.dim(1);
  if (!args.npy.empty()) write_outputs({{{"--npy", args.npy}, encode_npy(e)}});
  if (args.json) {
    // {"dim": d, "embeddings": [...], "model": dir}, written one embedding at a time: as one
    // JSON value a million texts' vectors would take gigabytes before the first byte is out.
    std::cout << "{\"dim\":" << d << ",\"embeddings\":[";
    for (int64_t i = 0; i < n; ++i) {
      nlohmann::json tokens = nlohmann::json::array();
      for (const Token& t : model.tokenize(texts[static_cast<std::size_t>(i)]).tokens)
        tokens.push_back(t.text);
      nlohmann::json v = nlohmann::json::array();
      for (int64_t j = 0; j < d; ++j) v.push_back(number_json(e.data<float>()[i * d + j]));
      std::cout << (i > 0 ? "," : "")
                << nlohmann::json{{"text", texts[static_cast<std::size_t>(i)]},
                                  {"tokens", tokens},
                                  {"vector", v}}
                       .dump();
    }
    std::cout << "]";
    // Only with bf16, so that the default's JSON stays what it was.
    if (precision != Precision::fp32) std::cout << ",\"precision\":\"" << args.precision << "\"";
    if (args.compare_fp32)
      std::cout << ",\"compare_fp32\":"
                << nlohmann::json{{"max_cosine_distance", number_json(compared.max_distance)},
                                  {"text", compared.worst},
                                  {"mean_cosine_distance", number_json(compared.mean_distance)}}
                       .dump();
    std::cout << ",\"model\":" << nlohmann::json(path_json(model.dir())).dump() << "}\n";
    return 0;
  }
  if (!args.npy.empty()) {
    std::cout << "wrote " << printable(args.npy) << ": " << n << " × " << d
              << " float32, one unit-length embedding a row\n";
    return 0;
  }
  std::cout << "all-MiniLM-L6-v2: " << d
            << "-dimensional unit vectors: the mean of the last layer's\n"
               "token states, scaled to length 1\n\n";
  for (int64_t i = 0; i < n; ++i) {
    const std::string& text = texts[static_cast<std::size_t>(i)];
    std::string head;
    for (int64_t j = 0; j < 5; ++j) head += pad_left(fixed(e.at<float>(i, j), 3), 7);
    std::cout << "  " << pad_right(clip("\"" + printable(text) + "\"", 26), 26) << " "
              << pad_left(std::to_string(model.tokenize(text).tokens.size()), 3) << " tokens ["
              << head << " …]\n";
  }
  std::cout << "\n--json prints every number, --npy FILE writes them, and qkv similarity A B\n"
               "compares two.\n";
  return 0;
}

}  // namespace qkv::cli
