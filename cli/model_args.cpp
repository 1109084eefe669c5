#include "model_args.h"

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <iostream>

namespace qkv::cli {

void add_model_option(CLI::App& command, ModelArgs& args) {
  command
      .add_option("--model", args.dir,
                  "a BERT model directory (config.json, model.safetensors, vocab.txt); default: "
                  "all-MiniLM-L6-v2 in $QKV_HOME/models (installed by scripts/bootstrap)")
      ->option_text("DIR");
}

SentenceModel load_model(const ModelArgs& args, const SentenceModelOptions& options) {
  return SentenceModel::load(args.dir.empty() ? default_model_dir() : args.dir, options);
}

namespace {

std::vector<std::string> split_lines(std::istream& in) {
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

}  // namespace

std::vector<std::string> texts_or_stdin(const std::vector<std::string>& args, const char* what) {
  if (!args.empty()) return args;
  if (::isatty(STDIN_FILENO) == 1)
    throw Error(std::string("no ") + what +
                " given; pass them as arguments or one a line on stdin");
  std::vector<std::string> lines = split_lines(std::cin);
  if (lines.empty()) throw Error(std::string("stdin is empty; expected ") + what + ", one a line");
  return lines;
}

std::vector<std::string> read_lines(const std::string& option, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(option + " " + path + ": cannot open the file");
  std::vector<std::string> lines;
  for (std::string& line : split_lines(in))
    if (line.find_first_not_of(" \t") != std::string::npos) lines.push_back(std::move(line));
  if (lines.empty())
    throw Error(option + " " + path + " has no non-empty lines; expected one text a line");
  return lines;
}

}  // namespace qkv::cli
