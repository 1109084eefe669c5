// `qkv models` and --model's names, run as a user would: against fake Ollama, LM Studio and Hugging
// Face stores under a scratch $HOME (tests/models/fake_stores.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/cli_expect.h"
#include "cli/cli_runner.h"
#include "models/fake_stores.h"

namespace qkv::testing {
namespace {

using test::FakeStores;
using test::tiny_gguf;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

// Stores holding a model qkv runs in each (a llama, a qwen2), and a broken file.
struct Machine {
  FakeStores s;
  fs::path llama, lm, hf, qwen, broken;
  Machine() {
    llama =
        s.ollama_model("registry.ollama.ai", "library", "llama3.2", "1b", tiny_gguf("llama", 15));
    qwen =
        s.ollama_model("registry.ollama.ai", "library", "qwen2.5", "0.5b", tiny_gguf("qwen2", 7));
    lm = s.lm_studio_model("lmstudio-community", "Tiny-GGUF", "Tiny-Q8_0.gguf", tiny_gguf());
    hf = s.hugging_face_model(s.hugging_face(), "bartowski", "Tiny-GGUF", "r", "tiny.gguf",
                              tiny_gguf());
    broken = s.lm_studio_model("pub", "broken", "cut.gguf", tiny_gguf().substr(0, 64));
  }
  CliResult run(const std::vector<std::string>& args) const {
    return run_qkv(args, RunOptions{.timeout_s = 60, .env = s.env_list()});
  }
};

TEST(ModelsCli, ListsTheBuiltInModelsAndEachStoresFiles) {
  const Machine m;
  const CliResult r = m.run({"models"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(r.err.empty()) << r.describe();
  expect_fits_80_columns(r.out);
  EXPECT_THAT(r.out, HasSubstr("Built in\n  smollm2 "));
  EXPECT_THAT(r.out, HasSubstr("\n  minilm "));
  EXPECT_THAT(r.out, HasSubstr("\nOllama (~/.ollama/models)\n"));
  EXPECT_THAT(r.out, HasSubstr("\nLM Studio (~/.lmstudio/models, ~/.cache/lm-studio/models)\n"));
  EXPECT_THAT(r.out, HasSubstr("\nHugging Face (~/.cache/huggingface/hub)\n"));
  // Each row: the name to pass, architecture, quantization, parameters, size, whether it runs.
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\n  llama3\\.2:1b +llama +Q4_K_M +[0-9.]+K +[0-9.]+ "
                                              "KiB +yes\n"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\n  qwen2\\.5:0\\.5b +qwen2 +Q8_0 .* no\n"));
  EXPECT_THAT(r.out,
              ::testing::ContainsRegex("\n  lmstudio-community/Tiny-GGUF +llama +F32 .* yes\n"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\n  bartowski/Tiny-GGUF +llama +F32 .* yes\n"));
  // The broken file: listed, with its one-line error below it.
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\n  pub/broken .* no\n      it claims [0-9]+ "
                                              "tensors and [0-9]+ metadata entries in 64 bytes"));
  EXPECT_THAT(r.out, HasSubstr("GGUF architectures qkv runs: llama, qwen2, qwen3, gemma3"));
}

TEST(ModelsCli, JsonHoldsWhatTheTableShows) {
  const Machine m;
  const CliResult r = m.run({"models", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["supported_architectures"],
            nlohmann::json::array({"llama", "qwen2", "qwen3", "gemma3"}));
  std::vector<std::string> builtin;
  for (const auto& b : j["builtin"]) builtin.push_back(b["name"]);
  EXPECT_EQ(builtin, (std::vector<std::string>{"smollm2", "minilm"}));
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& x : j["models"]) by_name[x["name"]] = x;
  ASSERT_EQ(by_name.size(), 5u) << r.out;
  const nlohmann::json& llama = by_name.at("llama3.2:1b");
  EXPECT_EQ(llama["store"], "Ollama");
  EXPECT_EQ(llama["path"], m.llama.string());
  EXPECT_EQ(llama["bytes"], fs::file_size(m.llama));
  EXPECT_EQ(llama["architecture"], "llama");
  EXPECT_EQ(llama["quantization"], "Q4_K_M");
  EXPECT_EQ(llama["runs"], true);
  EXPECT_EQ(by_name.at("qwen2.5:0.5b")["runs"], true);
  EXPECT_EQ(by_name.at("qwen2.5:0.5b")["architecture"], "qwen2");
  EXPECT_EQ(by_name.at("bartowski/Tiny-GGUF")["store"], "Hugging Face");
  EXPECT_EQ(by_name.at("lmstudio-community/Tiny-GGUF")["store"], "LM Studio");
  const nlohmann::json& broken = by_name.at("pub/broken");
  EXPECT_EQ(broken["runs"], false);
  EXPECT_THAT(broken["error"].get<std::string>(), HasSubstr(m.broken.string()));
  EXPECT_FALSE(broken.contains("architecture"));
}

TEST(ModelsCli, AnEmptyMachineListsTheBuiltInOnes) {
  const FakeStores s;
  const CliResult r = run_qkv({"models"}, RunOptions{.timeout_s = 60, .env = s.env_list()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("smollm2"));
  EXPECT_THAT(r.out, HasSubstr("Ollama (~/.ollama/models)\n  (no GGUF files)\n"));
}

TEST(ModelsCli, HelpHasAnExample) {
  const CliResult r = run_qkv({"models", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("qkv models --json"));
  const CliResult explain = run_qkv({"explain", "--help"});
  EXPECT_THAT(explain.out, HasSubstr("qkv models lists them"));
}

// A store's name runs as its file's path does: the same tokens out.
TEST(ModelsCli, GenerateTakesAStoresName) {
  const Machine m;
  const CliResult by_name =
      m.run({"generate", "hello the", "--max-tokens", "3", "--model", "llama3.2:1b"});
  ASSERT_EQ(by_name.exit_code, 0) << by_name.describe();
  const CliResult by_path =
      m.run({"generate", "hello the", "--max-tokens", "3", "--model", m.llama.string()});
  ASSERT_EQ(by_path.exit_code, 0) << by_path.describe();
  EXPECT_EQ(by_name.out, by_path.out);
  EXPECT_FALSE(by_name.out.empty());
  const CliResult explain = m.run({"explain", "hello the", "--model", "bartowski/Tiny-GGUF"});
  EXPECT_EQ(explain.exit_code, 0) << explain.describe();
  // Titled by the name, not by its file's (an Ollama blob's is its hash).
  const CliResult ollama = m.run({"explain", "hello the", "--model", "llama3.2:1b"});
  EXPECT_THAT(ollama.out, HasSubstr("qkv explain · llama3.2:1b · 2 layers"));
  EXPECT_THAT(ollama.out, Not(HasSubstr("sha256-")));
}

TEST(ModelsCli, UnknownAndAmbiguousNamesAreUsageErrors) {
  Machine m;
  for (const std::string command : {"explain", "generate"})
    expect_one_line_error(m.run({command, "hello", "--model", "llama3.2:3b"}), 2,
                          "no model \"llama3.2:3b\": not a file, not a built-in name, not in "
                          "Ollama (~/.ollama/models), LM Studio (~/.lmstudio/models, "
                          "~/.cache/lm-studio/models), the Hugging Face cache "
                          "(~/.cache/huggingface/hub); `qkv models` lists what is here");
  m.s.hugging_face_model(m.s.hugging_face(), "lmstudio-community", "Tiny-GGUF", "r", "t.gguf",
                         tiny_gguf());
  expect_one_line_error(m.run({"explain", "hello", "--model", "lmstudio-community/Tiny-GGUF"}), 2,
                        "\"lmstudio-community/Tiny-GGUF\" names 2 models: ");
  // A sentence-encoder command given a store's decoder says what it is.
  expect_one_line_error(m.run({"embed", "hello", "--model", "llama3.2:1b"}), 2, "is a decoder LLM");
  // A missing path is still said to be missing, not looked up.
  const CliResult missing = m.run({"embed", "hi", "--model", "/no/such/model"});
  expect_one_line_error(missing, 2, "--model /no/such/model does not exist");
  EXPECT_THAT(missing.err, Not(HasSubstr("Ollama")));
}

}  // namespace
}  // namespace qkv::testing
