#include "model_args.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "qkv/files.h"

namespace qkv::cli {

void add_model_option(CLI::App& command, ModelArgs& args) {
  command
      .add_option("--model", args.dir,
                  "a BERT model directory (config.json, model.safetensors, vocab.txt); default: "
                  "all-MiniLM-L6-v2 in $QKV_HOME/models (installed by scripts/bootstrap)")
      ->option_text("DIR");
}

SentenceModel load_model(const ModelArgs& args, const SentenceModelOptions& options) {
  if (!args.dir.empty()) {
    // A model the user named is input like any other: missing or malformed, exit 2.
    try {
      return SentenceModel::load(args.dir, options);
    } catch (const Error& e) {
      throw Error(std::string("--model ") + e.what(), Error::Kind::invalid_argument);
    }
  }
  // The default model is scripts/bootstrap's to install: missing or damaged, the installation
  // failed (exit 1), and the message says how to put it right.
  const std::string dir = default_model_dir();
  try {
    return SentenceModel::load(dir, options);
  } catch (const Error& e) {
    if (!std::filesystem::exists(dir)) throw Error(e.what(), Error::Kind::runtime);  // has the hint
    throw Error(std::string(e.what()) + "; the default model is damaged: delete " + dir +
                    " and run scripts/fetch_model",
                Error::Kind::runtime);
  }
}

namespace {

// Texts on stdin: far more than a person pastes, and a bound for /dev/zero or an endless pipe.
constexpr uint64_t kMaxStdinBytes = uint64_t{64} << 20;
// A --corpus file: a million lines of text is about 100 MB.
constexpr InputSpec kTextInput{.expected = "a regular text file, one text a line",
                               .max_bytes = uint64_t{256} << 20,
                               .noun = "the file"};

// One entry a line: \n ends a line, a \r before it is dropped, a last line needs no \n.
std::vector<std::string> split_lines(const std::string& bytes) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < bytes.size()) {
    std::size_t end = bytes.find('\n', start);
    if (end == std::string::npos) end = bytes.size();
    std::string line = bytes.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

}  // namespace

std::vector<std::string> texts_or_stdin(const std::vector<std::string>& args, const char* what) {
  if (!args.empty()) return args;
  if (::isatty(STDIN_FILENO) == 1)
    throw Error(std::string("no ") + what +
                " given; pass them as arguments or one a line on stdin");
  std::vector<std::string> lines = split_lines(read_stream(STDIN_FILENO, "stdin", kMaxStdinBytes));
  if (lines.empty()) throw Error(std::string("stdin is empty; expected ") + what + ", one a line");
  return lines;
}

std::vector<std::string> read_lines(const std::string& option, const std::string& path) {
  std::string bytes;
  try {
    bytes = read_input_file(path, kTextInput);
  } catch (const Error& e) {
    throw Error(option + " " + e.what(), e.kind());
  }
  std::vector<std::string> lines;
  for (std::string& line : split_lines(bytes))
    if (line.find_first_not_of(" \t") != std::string::npos) lines.push_back(std::move(line));
  if (lines.empty())
    throw Error(option + " " + path + " has no non-empty lines; expected one text a line");
  return lines;
}

int64_t longest_text(const std::vector<std::string>& texts) {
  std::size_t longest = 0;
  for (const std::string& t : texts) longest = std::max(longest, t.size());
  return static_cast<int64_t>(longest);
}

int64_t texts_bytes(const std::vector<std::string>& texts) {
  int64_t bytes = 0;
  for (const std::string& t : texts) bytes += static_cast<int64_t>(sizeof(std::string) + t.size());
  return bytes;
}

}  // namespace qkv::cli
