#include "model_args.h"

#include <filesystem>
#include <iostream>

#include "options.h"
#include "qkv/files.h"
#include "qkv/memory.h"
#include "qkv/model_stores.h"

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
            "smollm2 or a GGUF file of a decoder (llama, qwen2, qwen3 or gemma3; known by its "
            "first bytes, whatever its name), or its name in Ollama (llama3.2:1b), LM Studio "
            "(PUBLISHER/REPO) or the Hugging Face cache (ORG/REPO): qkv models lists them";
  if (choices.trained)
    help += ", or a .safetensors model saved by qkv train (transformer, rnnsearch, perceiver)";
  command.add_option("--model", args.dir, help)
      ->option_text(choices.decoder || choices.trained ? "DIR|FILE" : "DIR");
  if (choices.decoder) add_weights_option(command, args.weights);
}

void add_weights_option(CLI::App& command, std::string& weights) {
  command
      .add_option("--weights", weights,
                  "a decoder's matrices: file — as its GGUF file stores them (Q4_K, Q8_0, …), "
                  "multiplied on the blocks, about the file's size in memory (default); float32 — "
                  "dequantized at load, 8 bytes a parameter. Both give the same bits wherever a "
                  "pass runs in float32")
      ->check(one_of({"file", "float32"}))
      ->option_text("file|float32");
}

void add_decode_option(CLI::App& command, std::string& decode) {
  command
      .add_option("--decode", decode,
                  "how each new token's pass multiplies matrices kept as blocks: int8 — its "
                  "activations rounded to 8 bits, integer dot products, as llama.cpp (default, "
                  "fast); float32 — the blocks dequantized, the bits of --weights float32")
      ->check(one_of({"int8", "float32"}))
      ->option_text("int8|float32");
}

WeightFormat weight_format(const std::string& weights) {
  return weights == "float32" ? WeightFormat::float32 : WeightFormat::file;
}

DecodeProduct decode_product(const std::string& decode) {
  return decode == "float32" ? DecodeProduct::float32 : DecodeProduct::int8;
}

InputPath model_input(const ModelArgs& args) {
  if (is_builtin_model(args.dir))
    return {"--model", model_kind(args.dir) == ModelKind::causal_lm ? default_causal_lm_path()
                                                                    : default_model_dir()};
  return {"--model", resolve_model(args.dir)};  // a store's name: its file
}

namespace {

// What load_model refuses before opening anything: a path that is missing, a decoder, a file, a
// FIFO or a device, each said with what this command's --model takes instead.
void refuse_non_encoder(const ModelArgs& args) {
  const std::string command = args.command.empty() ? "this command" : args.command;
  const std::string expected = "; expected " + what_model_takes(args);
  // Missing, a path is nothing yet: "x.gguf" was called a decoder by its name alone.
  std::error_code missing;
  // A store's name ("llama3.2:1b") is its file; a name no store holds says where it looked.
  if (resolve_model(args.dir) == args.dir && !std::filesystem::exists(args.dir, missing))
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

CausalLM open_causal_lm(const std::string& model, WeightFormat format) {
  // An installed model of another kind (minilm) was read as the default decoder, unsaid.
  if (is_builtin_model(model) && model_kind(model) != ModelKind::causal_lm)
    throw Error("--model " + model +
                    " is a sentence encoder; expected a decoder LLM: smollm2 or a GGUF file of a "
                    "llama, qwen2, qwen3 or gemma3 model",
                Error::Kind::invalid_argument);
  // A store's name is its file; one no store holds says where it looked (exit 2).
  const std::string path = is_builtin_model(model) ? "smollm2" : resolve_model(model);
  try {
    // The command asked for a decoder: whatever the path holds, it is read as one (a device or a
    // BERT directory is then said to be no GGUF file), not as what the registry would call it.
    CausalLM lm = CausalLM::open(path);
    lm.set_weight_format(format);
    return lm;
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

std::string text_label(const std::vector<std::string>& texts, int64_t i) {
  return "text " + std::to_string(i + 1) + " (\"" + clip(texts[static_cast<std::size_t>(i)], 30) +
         "\")";
}

}  // namespace qkv::cli
