// What the model commands say about a broken model (issue 11). A NaN in the weights or a bad
// config.json is named at load — the file, the tensor or field, the value, what was expected — as
// a usage error (exit 2) when the user named the model, a runtime error with the repair (exit 1)
// when the default model is damaged; the same fault gives the same exit code in every command.
// A result that still comes out non-finite is refused, never printed as a number.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_expect.h"
#include "cli/cli_runner.h"
#include "core/safetensors.h"
#include "core/scratch_files.h"
#include "models/model_copy.h"
#include "models/tiny_llama_gguf.h"
#include "qkv/train.h"

namespace qkv {
namespace {

using testing::expect_one_line_error;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_qkv;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("qkv-model-faults-" + name)).string();
}

std::string corpus_file() {
  const std::string path = temp_path("corpus.txt");
  std::ofstream(path) << "The bank raised its rates.\nI sat on the river bank.\n";
  return path;
}

// Every command that loads a BERT model, on `dir`.
std::vector<std::vector<std::string>> model_commands(const std::string& dir) {
  return {{"similarity", "I sat on the bank", "The river bank", "--model", dir},
          {"embed", "The cat sat on the mat", "--model", dir},
          {"embed", "The cat sat on the mat", "--json", "--model", dir},
          {"search", "cash", "--corpus", corpus_file(), "--model", dir},
          {"explain", "The animal was tired", "--model", dir},
          {"explain", "The animal was tired", "--json", "--model", dir},
          {"bench", "model", "--quick", "--model", dir}};
}

TEST(ModelFaultsCli, NanInTheWeightsIsNamedAtLoadByEveryCommand) {
  const std::string dir =
      test::minilm_copy("nan", {}, {{"encoder.layer.2.attention.self.query.weight", NAN, 1}});
  for (const auto& args : model_commands(dir))
    expect_one_line_error(run_qkv(args), 2,
                          "--model " + dir +
                              "/model.safetensors: tensor "
                              "\"encoder.layer.2.attention.self.query.weight\" holds nan at [0, 0] "
                              "of [384, 384]; expected finite weights");
  const std::string inf_dir =
      test::minilm_copy("inf", {}, {{"embeddings.LayerNorm.bias", -INFINITY, 1}});
  expect_one_line_error(run_qkv({"similarity", "a", "b", "--model", inf_dir}), 2,
                        "\"embeddings.LayerNorm.bias\" holds -inf at [0] of [384]");
}

// layer_norm_eps -1 made similarity print "cos(a, b) = 0.0000" and embed a row of "nan"; 0,
// -1e-12 and a string were taken too. Each is now named at load, in every command.
TEST(ModelFaultsCli, BadLayerNormEpsIsNamedByEveryCommand) {
  const std::string expected = "; expected a small positive number (0 < eps ≤ 0.01), e.g. 1e-12";
  const std::string dir =
      test::minilm_copy("eps", [](nlohmann::json& c) { c["layer_norm_eps"] = -1; });
  for (const auto& args : model_commands(dir))
    expect_one_line_error(run_qkv(args), 2,
                          "--model " + dir + "/config.json: \"layer_norm_eps\" is -1" + expected);
  for (const nlohmann::json eps :
       {nlohmann::json(-1e-12), nlohmann::json(0.0), nlohmann::json("nan")}) {
    const std::string other =
        test::minilm_copy("eps-other", [&](nlohmann::json& c) { c["layer_norm_eps"] = eps; });
    expect_one_line_error(run_qkv({"similarity", "a", "b", "--model", other}), 2,
                          "\"layer_norm_eps\" is " + eps.dump() + expected);
  }
}

TEST(ModelFaultsCli, BadSizesInConfigAreNamed) {
  const std::string dir =
      test::minilm_copy("heads", [](nlohmann::json& c) { c["num_attention_heads"] = 0; });
  expect_one_line_error(run_qkv({"embed", "x", "--model", dir}), 2,
                        "\"num_attention_heads\" is 0; expected an integer from 1 to 384");
  const std::string vocab =
      test::minilm_copy("vocab", [](nlohmann::json& c) { c["vocab_size"] = 30000; });
  expect_one_line_error(run_qkv({"embed", "x", "--model", vocab}), 2,
                        "has shape [30522, 384]; expected [30000, 384] for this config "
                        "(config.json: vocab_size 30000, hidden_size 384)");
}

// Settings qkv's BERT would not honour were ignored (issue 26's last sweep): a cased model's
// tokenizer_config.json "do_lower_case": false still lowercased, "is_decoder": true ran without its
// causal mask. Each is named; the installed model's own tokenizer_config.json passes.
TEST(ModelFaultsCli, BertSettingsQkvWouldNotHonourAreNamed) {
  const std::string decoder =
      test::minilm_copy("is-decoder", [](nlohmann::json& c) { c["is_decoder"] = true; });
  expect_one_line_error(run_qkv({"embed", "x", "--model", decoder}), 2,
                        "--model " + decoder +
                            "/config.json: \"is_decoder\" is true; expected false (qkv runs BERT "
                            "as an encoder, without a causal mask)");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"do_lower_case": false})",
       "\"do_lower_case\" is false; expected true (qkv's BERT tokenizer lowercases, strips "
       "accents and splits CJK characters, as uncased models such as all-MiniLM-L6-v2 need)"},
      {R"({"strip_accents": false})", "\"strip_accents\" is false; expected true or null"},
      {R"({"cls_token": {"content": "<s>"}})",
       "\"cls_token\" is {\"content\":\"<s>\"}; expected \"[CLS]\", the token qkv's BERT uses"},
      {R"({"tokenizer_class": "RobertaTokenizer"})",
       "\"tokenizer_class\" is \"RobertaTokenizer\"; expected \"BertTokenizer\""},
      {"nope", "tokenizer_config.json: "}};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string dir = test::minilm_copy("tokenizer-config-" + std::to_string(i));
    std::ofstream(dir + "/tokenizer_config.json") << cases[i].first;
    expect_one_line_error(run_qkv({"embed", "x", "--model", dir}), 2, cases[i].second);
  }
  const std::string same = test::minilm_copy("tokenizer-config-installed");
  std::filesystem::copy_file(test::minilm_file("tokenizer_config.json"),
                             same + "/tokenizer_config.json");
  EXPECT_EQ(run_qkv({"embed", "x", "--model", same}).exit_code, 0);
}

// Weights that load (every one finite) but overflow float32 when multiplied out: the last line of
// defence turns the NaN into an error instead of "cos(a, b) = 0.0000" or a vector of nulls.
TEST(ModelFaultsCli, AResultThatComesOutNonFiniteIsAnErrorNotANumber) {
  const std::string dir =
      test::minilm_copy("huge", {}, {{"encoder.layer.5.output.LayerNorm.weight", 3e38f, -1}});
  const std::string why =
      "; the model computes non-finite numbers (its weights overflow float32 or are corrupt), so "
      "there is no result to show";
  expect_one_line_error(
      run_qkv({"similarity", "I sat on the bank", "The river bank", "--model", dir}), 1,
      "the embedding of text 1 (\"I sat on the bank\") came out NaN" + why);
  const std::string npy = temp_path("huge.npy");
  std::filesystem::remove(npy);
  expect_one_line_error(run_qkv({"embed", "one", "two", "--npy", npy, "--model", dir}), 1,
                        "the embedding of text 1 (\"one\") came out NaN");
  EXPECT_FALSE(std::filesystem::exists(npy)) << "a NaN embedding was written";
  expect_one_line_error(run_qkv({"embed", "one", "--json", "--model", dir}), 1, "came out NaN");
  expect_one_line_error(run_qkv({"search", "cash", "--corpus", corpus_file(), "--model", dir}), 1,
                        "the embedding of text 1 (\"cash\") came out NaN");
  expect_one_line_error(run_qkv({"explain", "The animal was tired", "--model", dir}), 1,
                        "layer 5's output came out +∞" + why);
}

// The same fault, the same exit code: a model the user named that does not load is bad input.
TEST(ModelFaultsCli, AMissingModelTheUserNamedIsExit2InEveryCommand) {
  const std::string dir = temp_path("no-such-model");
  std::filesystem::remove_all(dir);
  // A path that is not there is said to be missing (it read "has no config.json", issue 26's last
  // sweep); a folder without the file says which file it lacks.
  for (const auto& args : model_commands(dir))
    expect_one_line_error(run_qkv(args), 2,
                          "--model " + dir + " does not exist; expected a BERT model directory");
  // A missing path named like a GGUF file was called a decoder by its name alone.
  expect_one_line_error(run_qkv({"embed", "hi", "--model", dir + ".gguf"}), 2,
                        "--model " + dir + ".gguf does not exist; expected a BERT model directory");
  std::filesystem::create_directories(dir);
  for (const auto& args : model_commands(dir))
    expect_one_line_error(
        run_qkv(args), 2,
        "--model " + dir + " has no config.json; expected a BERT model directory");
  std::filesystem::remove_all(dir);
}

// A file given where a model directory is expected was "--model F has no config.json; expected a
// BERT model directory" (explain, on a 3 GB file that is no model), and any .safetensors file "a
// model saved by qkv train" to bench model, which does not take trained models: each is said for
// what it is, with what the command's --model takes.
TEST(ModelFaultsCli, AFileIsSaidToBeOneWithWhatTheCommandTakes) {
  const test::ScratchDir dir("qkv-model-faults");
  const std::string bert = "a BERT model directory (config.json, model.safetensors, vocab.txt)";
  const std::string data = dir.write("data.bin", std::string(512, 'x'));
  expect_one_line_error(run_qkv({"explain", "hi", "--model", data}), 2,
                        "--model " + data +
                            " is a file (512 bytes), not a model directory, nor a GGUF file (it "
                            "does not start with \"GGUF\"); expected " +
                            bert +
                            ", smollm2 or a GGUF file of a decoder, or a .safetensors model saved "
                            "by qkv train");
  expect_one_line_error(run_qkv({"bench", "model", "--quick", "--model", data}), 2,
                        "--model " + data +
                            " is a file (512 bytes), not a model directory, nor a GGUF file (it "
                            "does not start with \"GGUF\"); expected " +
                            bert + " or smollm2 or a GGUF file of a decoder");
  for (const char* command : {"embed", "similarity"})
    expect_one_line_error(run_qkv({command, "a", "b", "--model", data}), 2,
                          "--model " + data +
                              " is a file (512 bytes), not a model directory; "
                              "expected " +
                              bert);
  const std::string garbage = dir.write("garbage.safetensors", "{{{{");
  expect_one_line_error(run_qkv({"bench", "model", "--quick", "--model", garbage}), 2,
                        "--model " + garbage +
                            " is a .safetensors file, as qkv train saves its models, which qkv "
                            "bench model does not take; expected " +
                            bert +
                            " or smollm2 or a GGUF file of a decoder; qkv explain takes "
                            "trained models");
  expect_one_line_error(run_qkv({"embed", "a", "--model", "/dev/zero"}), 2,
                        "--model /dev/zero: is a character device; expected " + bert);
}

// JSON nested 100,000 deep (200 KB) killed every reader with SIGSEGV (issue 26): in the weights'
// header it is refused at its 65th level, in config.json too, by every command.
TEST(ModelFaultsCli, DeeplyNestedJsonIsRefusedByEveryCommandNotACrash) {
  constexpr std::size_t kDeep = 100'000;
  const std::string header_dir = test::minilm_copy("deep-header");
  std::filesystem::remove(header_dir + "/model.safetensors");
  std::string header = std::string(kDeep, '[') + std::string(kDeep, ']');
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  std::ofstream(header_dir + "/model.safetensors", std::ios::binary) << bytes + header;
  for (const auto& args : model_commands(header_dir))
    expect_one_line_error(run_qkv(args), 2,
                          "qkv: error: --model " + header_dir +
                              "/model.safetensors: the header nests arrays and objects more than "
                              "64 deep (at byte 64); expected at most 64 levels\n");
  const std::string config_dir = test::minilm_copy("deep-config");
  std::ofstream(config_dir + "/config.json", std::ios::trunc)
      << std::string(kDeep, '[') + std::string(kDeep, ']');
  for (const auto& args : model_commands(config_dir))
    expect_one_line_error(run_qkv(args), 2,
                          "qkv: error: --model " + config_dir +
                              "/config.json: nests arrays and objects more than 64 deep (at byte "
                              "64); expected at most 64 levels\n");
  // A file given as the model: a trained model's header.
  const std::string file = temp_path("deep.safetensors");
  std::ofstream(file, std::ios::binary) << bytes + header;
  expect_one_line_error(run_qkv({"explain", "--model", file}), 2,
                        "qkv: error: " + file +
                            ": the header nests arrays and objects more than 64 deep (at byte "
                            "64); expected at most 64 levels\n");
}

// A corpus line or a line of stdin that is not UTF-8 was reported without the file or the line:
// "text is not valid UTF-8: byte 0xff at offset 6" (issue 26).
TEST(ModelFaultsCli, BadUtf8NamesTheFileAndTheLine) {
  const std::string corpus = temp_path("bad-utf8.txt");
  std::ofstream(corpus) << "The bank raised its rates.\n\nI sat \xff on the bank.\n";
  const std::string at_line_3 = "qkv: error: --corpus " + corpus +
                                " line 3 is not valid UTF-8 (byte 7 of the line is 0xff); "
                                "expected UTF-8 text\n";
  expect_one_line_error(run_qkv({"search", "cash", "--corpus", corpus}), 2, at_line_3);
  expect_one_line_error(run_qkv({"bench", "model", "--quick", "--corpus", corpus}), 2, at_line_3);
  expect_one_line_error(run_qkv({"embed"}, "first\nsecond \xfe\n"), 2,
                        "qkv: error: stdin line 2 is not valid UTF-8 (byte 8 of the line is "
                        "0xfe); expected UTF-8 text\n");
  // An argument: checked as the command line is parsed, quoted (tests/cli/options_cli_test.cpp).
  expect_one_line_error(run_qkv({"embed", "fine", "caf\xc3"}), 2,
                        "qkv: error: texts: 'caf\\xc3' is not valid UTF-8 (byte 4 is 0xc3); "
                        "expected UTF-8 text (see qkv --help)\n");
}

// The default model is scripts/bootstrap's: damaged, it is the installation that failed (exit 1),
// and the message says how to repair it.
TEST(ModelFaultsCli, ADamagedDefaultModelIsExit1WithTheRepair) {
  const std::string copy =
      test::minilm_copy("default", [](nlohmann::json& c) { c["layer_norm_eps"] = -1; });
  const std::string home = temp_path("home");
  std::filesystem::remove_all(home);
  std::filesystem::create_directories(home + "/models");
  std::filesystem::create_directory_symlink(copy, home + "/models/all-MiniLM-L6-v2");
  const char* old = std::getenv("QKV_HOME");
  const std::string saved = old ? old : "";
  ::setenv("QKV_HOME", home.c_str(), 1);
  const auto explain = run_qkv({"explain"});
  const auto similarity = run_qkv({"similarity", "a", "b"});
  if (old)
    ::setenv("QKV_HOME", saved.c_str(), 1);
  else
    ::unsetenv("QKV_HOME");
  const std::string model = home + "/models/all-MiniLM-L6-v2";
  for (const auto* r : {&explain, &similarity})
    expect_one_line_error(*r, 1,
                          model +
                              "/config.json: \"layer_norm_eps\" is -1; expected a small "
                              "positive number (0 < eps ≤ 0.01), e.g. 1e-12; the default model "
                              "is damaged: delete " +
                              model + " and run scripts/fetch_model");
}

// ---- a decoder's GGUF file ----

// Every command that loads a decoder, on `file`.
std::vector<std::vector<std::string>> decoder_commands(const std::string& file) {
  return {{"generate", "hello", "--model", file},
          {"generate", "--chat", "hello", "--model", file},
          {"explain", "hello", "--model", file},
          {"bench", "model", "--quick", "--model", file}};
}

// A decoder the user named that qkv cannot run is bad input (exit 2) in every command, the file
// and the fault named. An unknown architecture was exit 1; the lies below were run (exit 0).
TEST(ModelFaultsCli, ABadGgufTheUserNamedIsExit2InEveryCommand) {
  const test::ScratchDir dir("qkv-model-faults");
  using test::gguf_u32;
  const std::vector<std::pair<test::TinyLlamaGguf, std::string>> faults = {
      {test::tiny_llama_gguf().set("general.architecture", test::gguf_str("mamba")),
       ": architecture \"mamba\", which qkv does not run; expected one of llama, qwen2, qwen3, "
       "gemma3"},
      {test::tiny_llama_gguf().set("llama.rope.dimension_count", gguf_u32(0)),
       ": metadata \"llama.rope.dimension_count\" is 0; expected a positive integer"},
      {test::tiny_llama_gguf().set("llama.block_count", gguf_u32(2000000000)),
       ": metadata \"llama.block_count\" is 2000000000, too large: the file's tensors hold 2 "
       "blocks (blk.0 … blk.1); expected 2"},
      {test::tiny_llama_gguf().set("llama.rope.freq_base", test::gguf_f32(NAN)),
       ": metadata \"llama.rope.freq_base\" is NaN; expected a positive number"},
      {test::tiny_llama_gguf().erase("tokenizer.ggml.merges"),
       ": no metadata \"tokenizer.ggml.merges\"; a BPE vocabulary (tokenizer.ggml.model "
       "\"gpt2\") needs its merges"},
      {test::tiny_llama_gguf().set("tokenizer.ggml.eos_token_id", gguf_u32(1000000)),
       ": metadata \"tokenizer.ggml.eos_token_id\" is 1000000; expected a token id from 0 to 39 "
       "(the vocabulary holds 40 tokens)"},
  };
  for (std::size_t i = 0; i < faults.size(); ++i) {
    const std::string file = faults[i].first.write(dir.path("bad" + std::to_string(i) + ".gguf"));
    for (const auto& args : decoder_commands(file))
      expect_one_line_error(run_qkv(args), 2, "--model " + file + faults[i].second);
  }
}

// The installed SmolLM2 is scripts/fetch_model's: damaged, the installation failed (exit 1), and
// the message says how to repair it.
TEST(ModelFaultsCli, ADamagedInstalledDecoderIsExit1WithTheRepair) {
  const test::ScratchDir home("qkv-model-faults-home");
  const std::string folder = home.path("models/SmolLM2-135M-Instruct");
  std::filesystem::create_directories(folder);
  const std::string file = folder + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  test::tiny_llama_gguf().set("llama.rope.dimension_count", test::gguf_u32(0)).write(file);
  const testing::RunOptions options{.env = {"QKV_HOME=" + home.root().string()}};
  for (const auto& args : {std::vector<std::string>{"generate", "hello"},
                           std::vector<std::string>{"explain", "hello", "--model", "smollm2"}})
    expect_one_line_error(run_qkv(args, options), 1,
                          file +
                              ": metadata \"llama.rope.dimension_count\" is 0; expected a positive "
                              "integer; the installed model is damaged: delete " +
                              file + " and run scripts/fetch_model smollm2");
}

// ---- a model saved by qkv train ----

enum class Damage { none, nan, missing };

// A tiny copy model saved by the library, then its metadata or its last tensor changed.
std::string trained_model(const std::string& name,
                          const std::function<void(std::map<std::string, std::string>&)>& metadata,
                          Damage damage = Damage::none) {
  const std::string path = temp_path(name + ".safetensors");
  make_model(config_for(make_task("copy"), 1, 2, 8), 1)
      ->save(path, {{"qkv.steps", "20"}, {"qkv.test_accuracy", "0.5"}});
  SafetensorsFile file = read_safetensors(path);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& n : file.names) tensors.emplace_back(n, file.tensors.at(n).clone());
  if (damage == Damage::nan) tensors.back().second.data<float>()[0] = NAN;
  if (damage == Damage::missing) tensors.pop_back();
  metadata(file.metadata);
  write_safetensors(path, tensors, file.metadata);
  return path;
}

void set_config(std::map<std::string, std::string>& m, const std::string& key,
                const nlohmann::json& value) {
  nlohmann::json c = nlohmann::json::parse(m.at("qkv.config"));
  c[key] = value;
  m["qkv.config"] = c.dump();
}

TEST(ExplainTrainedCli, CorruptMetadataNamesTheFileAndTheFieldNotAFlag) {
  const std::string layers = trained_model("layers", [](auto& m) { set_config(m, "layers", 0); });
  const auto r = run_qkv({"explain", "--model", layers, "--input", "abc"});
  expect_one_line_error(r, 2,
                        layers + ": the metadata's qkv.config \"layers\" is 0; expected 1 to 64");
  EXPECT_THAT(r.err, Not(HasSubstr("--layers")));
  const std::string task = trained_model("task", [](auto& m) { set_config(m, "task", "poems"); });
  expect_one_line_error(run_qkv({"explain", "--model", task}), 2,
                        task +
                            ": the metadata's qkv.config \"task\" is \"poems\"; expected one of "
                            "reverse, sort, copy, dates, lookup, follow");
  const std::string heads = trained_model("heads", [](auto& m) { set_config(m, "heads", 3); });
  expect_one_line_error(run_qkv({"explain", "--model", heads, "--input", "abc"}), 2,
                        heads +
                            ": the metadata's qkv.config \"d_model\" is 8, not a multiple of "
                            "\"heads\" 3");
  const std::string accuracy =
      trained_model("accuracy", [](auto& m) { m["qkv.test_accuracy"] = "nan"; });
  expect_one_line_error(run_qkv({"explain", "--model", accuracy, "--input", "abc"}), 2,
                        accuracy +
                            ": the metadata's qkv.test_accuracy is \"nan\"; expected a "
                            "number from 0 to 1");
}

// A file whose "format" is not qkv's was reported as "its metadata has no qkv.config" (issue 26):
// the message says what the format is and what was expected.
TEST(ExplainTrainedCli, AnUnknownFormatIsNamedWithTheExpectedOnes) {
  const std::string other =
      trained_model("format", [](auto& m) { m["format"] = "qkv-seq2seq-v9"; });
  const std::string expected =
      "; expected \"qkv-seq2seq\" (a model saved by qkv train), or \"qkv-perceiver\" (qkv train "
      "--model perceiver)\n";
  expect_one_line_error(run_qkv({"explain", "--model", other}), 2,
                        "qkv: error: " + other +
                            " is not a model saved by qkv train: its metadata's format is "
                            "\"qkv-seq2seq-v9\"" +
                            expected);
  // A NUL in it ended the message there, mid-quote (issue 26's last sweep): it is spelled \x00.
  const std::string nul = trained_model(
      "nul-format", [](auto& m) { m["format"] = std::string("qkv-seq2seq\0evil", 16); });
  expect_one_line_error(run_qkv({"explain", "--model", nul}), 2,
                        "qkv: error: " + nul +
                            " is not a model saved by qkv train: its metadata's format is "
                            "\"qkv-seq2seq\\x00evil\"" +
                            expected);
  const std::string none = trained_model("no-format", [](auto& m) { m.erase("format"); });
  expect_one_line_error(run_qkv({"explain", "--model", none}), 2,
                        "qkv: error: " + none +
                            " is not a model saved by qkv train: its metadata has no \"format\"" +
                            expected);
  const std::string no_config = trained_model("no-config", [](auto& m) { m.erase("qkv.config"); });
  expect_one_line_error(run_qkv({"explain", "--model", no_config}), 2,
                        "qkv: error: " + no_config +
                            ": its metadata has format \"qkv-seq2seq\" but no qkv.config; "
                            "expected the model's config, as qkv train saves it\n");
  // The config itself, JSON in a metadata string, is bounded like any other JSON.
  const std::string deep = trained_model("deep-config", [](auto& m) {
    m["qkv.config"] = std::string(100'000, '[') + std::string(100'000, ']');
  });
  expect_one_line_error(run_qkv({"explain", "--model", deep}), 2,
                        "qkv: error: " + deep +
                            ": the metadata's qkv.config nests arrays and objects more than 64 "
                            "deep (at byte 64); expected at most 64 levels\n");
}

// A broken trained model is bad input like any other (a missing tensor used to be exit 1 while a
// bad config was exit 2; a NaN was not noticed at all).
TEST(ExplainTrainedCli, BrokenTensorsAreExit2NamingTheTensor) {
  const std::string missing = trained_model(
      "missing", [](auto&) {}, Damage::missing);
  expect_one_line_error(run_qkv({"explain", "--model", missing, "--input", "abc"}), 2,
                        missing + ": parameter 'output.bias' is missing");
  const std::string path = trained_model(
      "nan", [](auto&) {}, Damage::nan);
  expect_one_line_error(run_qkv({"explain", "--model", path, "--input", "abc"}), 2,
                        path + ": tensor \"output.bias\" holds nan at [0] of ");
  const std::string fine = trained_model("fine", [](auto&) {});
  const auto r = run_qkv({"explain", "--model", fine, "--input", "abc"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("trained 20 steps, held-out accuracy 50.0%"));
}

}  // namespace
}  // namespace qkv
