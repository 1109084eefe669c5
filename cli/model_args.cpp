#include "model_args.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "qkv/files.h"
#include "qkv/memory.h"

namespace qkv::cli {

namespace {

constexpr const char* kBertDirectory =
    "a BERT model directory (config.json, model.safetensors, vocab.txt)";

// "qkv bench model": the command's words, from the subcommand up to (not including) the program.
std::string command_name(const CLI::App& command) {
  std::string name = command.get_name();
  for (const CLI::App* p = command.get_parent(); p != nullptr && p->get_parent() != nullptr;
       p = p->get_parent())
    name = p->get_name() + " " + name;
  return "qkv " + name;
}

// What --model takes, for a message: "a BERT model directory (...), smollm2 or a GGUF file ...".
std::string what_model_takes(const ModelArgs& args) {
  std::string kinds = kBertDirectory;
  const ModelChoices& c = args.choices;
  if (c.decoder)
    kinds += std::string(c.trained ? ", " : " or ") + "smollm2 or a GGUF file of a decoder";
  if (c.trained) kinds += ", or a .safetensors model saved by qkv train";
  return kinds;
}

}  // namespace

void add_model_option(CLI::App& command, ModelArgs& args, ModelChoices choices) {
  args.command = command_name(command);
  args.choices = choices;
  std::string help =
      "a BERT model directory (config.json, model.safetensors, vocab.txt; default: "
      "all-MiniLM-L6-v2 in $QKV_HOME/models, installed by scripts/bootstrap)";
  if (choices.decoder)
    help += std::string(choices.trained ? ", " : ", or ") +
            "smollm2 or a GGUF file of a Llama-architecture decoder (known by its first bytes, "
            "whatever its name)";
  if (choices.trained)
    help += ", or a .safetensors model saved by qkv train (transformer, rnnsearch, perceiver)";
  command.add_option("--model", args.dir, help)
      ->option_text(choices.decoder || choices.trained ? "DIR|FILE" : "DIR");
}

InputPath model_input(const ModelArgs& args) {
  if (is_builtin_model(args.dir))
    return {"--model", model_kind(args.dir) == ModelKind::causal_lm ? default_causal_lm_path()
                                                                    : default_model_dir()};
  return {"--model", args.dir};
}

namespace {

// What load_model refuses before opening anything: a path that is missing, a decoder, a file, a
// FIFO or a device, each said with what this command's --model takes instead.
void refuse_non_encoder(const ModelArgs& args) {
  const std::string command = args.command.empty() ? "this command" : args.command;
  const std::string expected = "; expected " + what_model_takes(args);
  // Missing, a path is nothing yet: "x.gguf" was called a decoder by its name alone.
  std::error_code missing;
  if (!std::filesystem::exists(args.dir, missing))
    throw Error("--model " + args.dir + " does not exist" + expected,
                Error::Kind::invalid_argument);
  const ModelKind kind = model_kind(args.dir);
  if (kind == ModelKind::causal_lm)
    throw Error("--model " + args.dir + " is a decoder LLM (a GGUF file)" + expected +
                    "; qkv generate and qkv explain take decoders",
                Error::Kind::invalid_argument);
  std::error_code ec;
  if (std::filesystem::is_regular_file(args.dir, ec)) {
    // Known by its name alone: whether it really is a model qkv train saved is explain's to
    // check, and no concern of a command that does not take one.
    if (kind == ModelKind::seq2seq || kind == ModelKind::perceiver)
      throw Error("--model " + args.dir +
                      " is a .safetensors file, as qkv train saves its models, which " + command +
                      " does not take" + expected + "; qkv explain takes trained models",
                  Error::Kind::invalid_argument);
    throw Error(
        "--model " + args.dir + " is a file (" +
            bytes_str(static_cast<int64_t>(std::filesystem::file_size(args.dir, ec))) +
            "), not a model directory" +
            (args.choices.decoder ? ", nor a GGUF file (it does not start with \"GGUF\")" : "") +
            expected,
        Error::Kind::invalid_argument);
  }
  // A FIFO, a device: said as InputFile says it, without waiting on it or reading it.
  if (std::filesystem::exists(args.dir, ec) && !std::filesystem::is_directory(args.dir, ec)) {
    try {
      (void)InputFile(args.dir, {.expected = what_model_takes(args), .max_bytes = 0});
    } catch (const Error& e) {
      throw Error(std::string("--model ") + e.what(), Error::Kind::invalid_argument);
    }
  }
}

// The installed model's faults: the installation failed (exit 1), and the message says how to put
// it right (a missing one already says how to fetch it).
[[noreturn]] void rethrow_for_installed_encoder(const Error& e) {
  const std::string dir = default_model_dir();
  if (!std::filesystem::exists(dir)) throw Error(e.what(), Error::Kind::runtime);
  throw Error(std::string(e.what()) + "; the default model is damaged: delete " + dir +
                  " and run scripts/fetch_model",
              Error::Kind::runtime);
}

}  // namespace

Model open_model_option(const ModelArgs& args, const OpenOptions& options) {
  const bool installed = is_builtin_model(args.dir);
  if (model_kind(args.dir) == ModelKind::sentence_encoder && !installed) refuse_non_encoder(args);
  try {
    return open_model(args.dir, options);
  } catch (const Error& e) {
    if (model_kind(args.dir) == ModelKind::causal_lm) rethrow_for_causal_lm(args.dir, e);
    if (installed) rethrow_for_installed_encoder(e);
    // A model the user named is input like any other: missing or malformed, exit 2.
    throw Error("--model " + std::string(e.what()), Error::Kind::invalid_argument);
  }
}

SentenceModel load_model(const ModelArgs& args, const SentenceModelOptions& options) {
  const bool installed =
      is_builtin_model(args.dir) && model_kind(args.dir) == ModelKind::sentence_encoder;
  if (!installed) refuse_non_encoder(args);
  return open_model_option(args, {.sentence = options}).sentence_model();
}

void rethrow_for_causal_lm(const std::string& model, const Error& e) {
  // The installed model: a fault is the installation's (exit 1), with the repair. A missing one
  // already says how to fetch it.
  if (is_builtin_model(model)) {
    const std::string path = default_causal_lm_path();
    if (!std::filesystem::exists(path)) throw Error(e.what(), Error::Kind::runtime);
    throw Error(std::string(e.what()) + "; the installed model is damaged: delete " + path +
                    " and run scripts/fetch_model smollm2",
                Error::Kind::runtime);
  }
  // A file the user named that is not a model qkv runs is bad input (exit 2), whatever is wrong
  // with it: missing, not GGUF, another architecture, lying sizes, weights that are not finite.
  throw Error("--model " + std::string(e.what()), Error::Kind::invalid_argument);
}

CausalLM open_causal_lm(const std::string& model) {
  try {
    // The command asked for a decoder: whatever the path holds, it is read as one (a device or a
    // BERT directory is then said to be no GGUF file), not as what the registry would call it.
    return CausalLM::open(is_builtin_model(model) ? "smollm2" : model);
  } catch (const Error& e) {
    rethrow_for_causal_lm(model, e);
  }
}

void load_weights(CausalLM& lm, const std::string& model) {
  try {
    lm.load_weights();
  } catch (const Error& e) {
    rethrow_for_causal_lm(model, e);
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

// Every line UTF-8, checked here where the file and the line are known: the tokenizer, which
// would find a bad byte later, knows neither ("text is not valid UTF-8: byte 0xff at offset 6").
// `where` names the source: "--corpus docs.txt line", "stdin line", "text".
void check_utf8(const std::vector<std::string>& lines, const std::string& where) {
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::size_t at = invalid_utf8_at(lines[i]);
    if (at == std::string::npos) continue;
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(lines[i][at]));
    throw Error(where + " " + std::to_string(i + 1) + " is not valid UTF-8 (byte " +
                std::to_string(at + 1) + " of the line is " + byte + "); expected UTF-8 text");
  }
}

}  // namespace

std::vector<std::string> texts_or_stdin(const std::vector<std::string>& args, const char* what) {
  if (!args.empty()) {
    check_utf8(args, "text");
    return args;
  }
  if (::isatty(STDIN_FILENO) == 1)
    throw Error(std::string("no ") + what +
                " given; pass them as arguments or one a line on stdin");
  std::vector<std::string> lines = split_lines(read_stream(STDIN_FILENO, "stdin", kMaxStdinBytes));
  if (lines.empty()) throw Error(std::string("stdin is empty; expected ") + what + ", one a line");
  check_utf8(lines, "stdin line");
  // A blank line is no text, refused as a blank argument is; not skipped, which would shift every
  // later row of the output away from its line.
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (lines[i].find_first_not_of(" \t\f\v") == std::string::npos)
      throw Error("stdin line " + std::to_string(i + 1) + " is " +
                  (lines[i].empty() ? "empty" : "only white space") + "; expected " + what +
                  ", one a line");
  return lines;
}

std::vector<std::string> read_lines(const std::string& option, const std::string& path) {
  std::string bytes;
  try {
    bytes = read_input_file(path, kTextInput);
  } catch (const Error& e) {
    throw Error(option + " " + e.what(), e.kind());
  }
  std::vector<std::string> all = split_lines(bytes);
  check_utf8(all, option + " " + path + " line");
  std::vector<std::string> lines;
  for (std::string& line : all)
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

void require_tokens(const SentenceModel& model, const std::string& text, const std::string& what) {
  if (model.tokenize(text).tokens.size() > 2) return;
  // The characters by code point: U+200B shows as nothing on a terminal. (Valid UTF-8 here:
  // tokenize refused anything else.)
  std::string points;
  for (std::size_t i = 0, shown = 0; i < text.size() && shown < 4; ++shown) {
    const auto b = static_cast<unsigned char>(text[i]);
    const int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    char32_t c = n == 1 ? b : b & (0x7F >> n);
    for (int k = 1; k < n && i + k < text.size(); ++k)
      c = (c << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    char buf[16];
    std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(c));
    points += (points.empty() ? "" : " ") + std::string(buf);
    i += static_cast<std::size_t>(n);
    if (shown == 3 && i < text.size()) points += " …";
  }
  throw Error(what + " (" + points +
              ") has no tokens: the model drops every character in it (zero-width or control "
              "characters), so it would embed as a blank text; expected a text with words");
}

void note_cut_texts(const SentenceModel& model, std::span<const std::string> texts,
                    const std::function<std::string(std::size_t)>& label, const std::string& kind) {
  // A token covers at least one byte, so only texts of more bytes than the tokens that fit between
  // [CLS] and [SEP] need tokenizing here.
  const std::size_t fit = model.options().max_length - 2;
  std::size_t cut = 0, first = 0;
  for (std::size_t i = 0; i < texts.size(); ++i)
    if (texts[i].size() > fit && model.tokenize(texts[i]).truncated && cut++ == 0) first = i;
  if (cut == 0) return;
  const std::string limit = std::to_string(model.options().max_length) + " tokens";
  if (texts.size() == 1 || cut == 1)
    std::cerr << "qkv: note: " << label(first) << " is longer than the model's " << limit
              << " and was cut to them; the rest of it is not in its embedding\n";
  else
    std::cerr << "qkv: note: " << grouped(static_cast<int64_t>(cut)) << " of "
              << grouped(static_cast<int64_t>(texts.size())) << " " << kind
              << " are longer than the model's " << limit
              << " and were cut to them (the first: " << label(first)
              << "); the rest of each is not in its embedding\n";
}

int64_t texts_bytes(const std::vector<std::string>& texts) {
  int64_t bytes = 0;
  for (const std::string& t : texts) bytes += static_cast<int64_t>(sizeof(std::string) + t.size());
  return bytes;
}

}  // namespace qkv::cli
