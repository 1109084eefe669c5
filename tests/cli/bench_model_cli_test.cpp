// tests/cli/bench_model_cli_test.cpp — `qkv bench model` as a smoke test: --quick checks the
// model against its float64 reference run, then reports latency and throughput under the keys
// bench/compare_torch.py reads; --corpus and --dump-corpus round-trip the texts; usage errors are
// one line with exit code 2. Needs all-MiniLM-L6-v2 (scripts/bootstrap installs it). Speed itself
// is never asserted: this machine may be shared.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_runner.h"
#include "core/scratch_files.h"
#include "models/tiny_llama_gguf.h"

namespace {

using qkv::testing::CliResult;
using qkv::testing::run_qkv;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::map<std::string, nlohmann::json> rows_by_case(const std::string& text) {
  std::map<std::string, nlohmann::json> rows;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const nlohmann::json row = nlohmann::json::parse(line);  // throws if not JSON
    rows[row.at("case").get<std::string>()] = row;
  }
  return rows;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A scratch folder of its own, removed afterwards.
class ScratchDir {
 public:
  ScratchDir()
      : path_(std::filesystem::temp_directory_path() /
              ("qkv-bench-model-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// One line on stderr, "qkv: error: ...", and nothing on stdout.
void expect_usage_error(const CliResult& r, const std::string& mentions) {
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, StartsWith("qkv: error: ")) << r.describe();
  EXPECT_THAT(r.err, HasSubstr(mentions)) << r.describe();
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.describe();
  EXPECT_EQ(r.out, "") << r.describe();
}

TEST(BenchModelCli, QuickJsonHasEveryCaseWithPositiveNumbers) {
  const CliResult r = run_qkv({"bench", "model", "--quick", "--json", "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::map<std::string, nlohmann::json> rows = rows_by_case(r.out);
  ASSERT_EQ(rows.size(), 3u) << r.describe();
  for (const char* name : {"latency-12", "latency-128", "throughput"}) {
    ASSERT_TRUE(rows.count(name)) << name << "\n" << r.describe();
    const nlohmann::json& row = rows.at(name);
    SCOPED_TRACE(std::string("case ") + name + ": " + row.dump());
    for (const char* key :
         {"sentences", "tokens", "padded_tokens", "batch_size", "runs", "validated_texts"}) {
      ASSERT_TRUE(row.at(key).is_number_integer()) << key;
      EXPECT_GE(row.at(key).get<int64_t>(), 1) << key;
    }
    for (const char* key : {"median_ms", "sentences_per_s", "tokens_per_s", "gflop", "gflops",
                            "sgemm_gflops", "sgemm_ratio", "cpu_share"}) {
      ASSERT_TRUE(row.at(key).is_number()) << key;
      EXPECT_GT(row.at(key).get<double>(), 0) << key;
    }
    EXPECT_EQ(row.at("threads"), 2);
    EXPECT_EQ(row.at("quick"), true);
    // Validated before timing: unit length, and the float64 reference within 1e-5.
    EXPECT_LE(row.at("max_error").get<double>(), 1e-5);
    EXPECT_LE(row.at("max_norm_error").get<double>(), 1e-5);
    EXPECT_GE(row.at("padded_tokens").get<int64_t>(), row.at("tokens").get<int64_t>());
  }
  // Token counts include [CLS] and [SEP]; the latency texts come with the row (compare_torch.py
  // feeds them to sentence-transformers).
  EXPECT_EQ(rows.at("latency-12").at("tokens"), 12);
  EXPECT_EQ(rows.at("latency-128").at("tokens"), 128);
  for (const char* name : {"latency-12", "latency-128"}) {
    EXPECT_EQ(rows.at(name).at("sentences"), 1);
    EXPECT_EQ(rows.at(name).at("batch_size"), 1);
    EXPECT_FALSE(rows.at(name).at("text").get<std::string>().empty());
  }
  EXPECT_EQ(rows.at("throughput").at("batch_size"), 32);
  EXPECT_EQ(rows.at("throughput").at("sentences"), 64);  // --quick's corpus
  EXPECT_GT(rows.at("throughput").at("tokenize_ms").get<double>(), 0);
}

TEST(BenchModelCli, CorpusAndDumpCorpusRoundTripAndTheTableNamesTheCases) {
  const ScratchDir dir;
  const std::vector<std::string> texts{"The cat sat on the mat.", "A dog slept on the rug.",
                                       "Attention is all you need, they said."};
  {
    std::ofstream out(dir.file("mine.txt"));
    for (const std::string& t : texts) out << t << "\n";
  }
  const CliResult r = run_qkv({"bench", "model", "--quick", "--threads", "2", "--corpus",
                               dir.file("mine.txt"), "--dump-corpus", dir.file("dumped.txt")});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(lines_of(dir.file("dumped.txt")), texts);
  for (const char* s : {"\nlatency-12 ", "\nlatency-128 ", "\nthroughput ", "float64 reference",
                        "n·2·(4·H² + 2·H·I) + 4·n²·H", "sgemm"})
    EXPECT_THAT(r.out, HasSubstr(s)) << r.describe();
  EXPECT_THAT(r.out, ContainsRegex("\nthroughput +3 ")) << r.describe();  // 3 texts
}

// The decoder (SmolLM2, which scripts/bootstrap also installs): validated against the float64
// reference attention, then the prompt and decode rows with the ids bench/compare_llm.py feeds
// to transformers.
TEST(BenchModelCli, DecoderQuickJsonHasThePromptAndDecodeRows) {
  const CliResult r =
      run_qkv({"bench", "model", "--model", "smollm2", "--quick", "--json", "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::map<std::string, nlohmann::json> rows = rows_by_case(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.describe();
  ASSERT_TRUE(rows.count("prompt-128") && rows.count("decode-32")) << r.describe();
  for (const auto& [name, row] : rows) {
    SCOPED_TRACE(name + ": " + row.dump());
    for (const char* key :
         {"median_ms", "tokens_per_s", "gflop", "gflops", "sgemm_gflops", "cpu_share"}) {
      ASSERT_TRUE(row.at(key).is_number()) << key;
      EXPECT_GT(row.at(key).get<double>(), 0) << key;
    }
    EXPECT_EQ(row.at("threads"), 2);
    EXPECT_EQ(row.at("validated_tokens"), 64);
    EXPECT_LE(row.at("max_error").get<double>(), 1e-4);
  }
  const nlohmann::json& prompt = rows.at("prompt-128");
  const nlohmann::json& decode = rows.at("decode-32");
  EXPECT_EQ(prompt.at("tokens"), 128);
  ASSERT_EQ(prompt.at("prompt_ids").size(), 128u);
  for (const nlohmann::json& id : prompt.at("prompt_ids")) {
    EXPECT_GE(id.get<int64_t>(), 0);
    EXPECT_LT(id.get<int64_t>(), 49152);
  }
  EXPECT_EQ(decode.at("tokens"), 32);
  EXPECT_EQ(decode.at("generated_ids").size(), 32u);
  // FLOPs: 2 per weight (≈ 134.5M of them with the tied output matrix) a token meets, plus
  // attention (4·576 per query–key pair a layer): 128 prompt tokens (the output matrix once)
  // 27.81 GFLOP, 32 steps after them 8.93 GFLOP.
  EXPECT_NEAR(prompt.at("gflop").get<double>(), 27.81, 0.01);
  EXPECT_NEAR(decode.at("gflop").get<double>(), 8.93, 0.01);
  // GB of weights read a token: the file's blocks (Q4_1, the output Q8_0: 96.6 MB), the default.
  EXPECT_EQ(decode.at("weights"), "file");
  EXPECT_NEAR(decode.at("weight_bytes").get<double>() / 1e9, 0.0966, 0.0005);
  EXPECT_NEAR(decode.at("weights_gb_per_s").get<double>() / decode.at("tokens_per_s").get<double>(),
              decode.at("weight_bytes").get<double>() / 1e9, 1e-6);
  // int8's decode against float32's: the same next token at nearly every step on the same tokens
  // (measured 32 of 33 and 33 of 33), the logits within a few % of the largest.
  const nlohmann::json& check = decode.at("int8_vs_float32");
  EXPECT_EQ(check.at("steps"), 33);
  EXPECT_GE(check.at("same_argmax_on_float32_tokens").get<int64_t>(), 30);
  EXPECT_GT(check.at("max_logit_diff").get<double>(), 0);
  EXPECT_LT(check.at("max_logit_diff").get<double>(), 0.1 * check.at("largest_logit").get<double>());
  expect_usage_error(
      run_qkv({"bench", "model", "--model", "smollm2", "--corpus", "x.txt", "--quick"}),
      "is a decoder");
}

// A model of zero weights is valid, and every logit it makes is 0: the validation divided the
// largest error by the largest logit, 0/0, and failed with "max |Δ logit| -nan of the largest",
// exit 1. Where there is no scale the error is absolute, and said so.
TEST(BenchModelCli, ZeroLogitsAreValidatedAbsolutelyNotAsNaN) {
  const qkv::test::ScratchDir dir("qkv-bench-model");
  const std::string file = qkv::test::zero_llama_gguf(2, 16, 4, 2, 24)
                               .set("llama.context_length", qkv::test::gguf_u32(1024))
                               .write(dir.path("zero.gguf"));
  const CliResult r = run_qkv({"bench", "model", "--quick", "--model", file, "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("logits on the fused kernel within 0.0e+00 absolute (every "
                               "reference logit is 0)"));
  EXPECT_THAT(r.out + r.err, ::testing::Not(HasSubstr("nan")));
  const CliResult json =
      run_qkv({"bench", "model", "--quick", "--json", "--model", file, "--threads", "1"});
  ASSERT_EQ(json.exit_code, 0) << json.describe();
  for (const auto& [name, row] : rows_by_case(json.out)) {
    EXPECT_EQ(row.at("max_error"), 0.0) << name;
    EXPECT_EQ(row.at("max_error_relative"), false) << name;
  }
}

TEST(BenchModelCli, HelpHasAnExample) {
  const CliResult r = run_qkv({"bench", "model", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  for (const char* s : {"--corpus", "--dump-corpus", "--threads", "--quick", "qkv bench model",
                        "--model smollm2", "compare_llm.py"})
    EXPECT_THAT(r.out, HasSubstr(s)) << r.describe();
  const CliResult b = run_qkv({"bench", "--help"});
  EXPECT_THAT(b.out, HasSubstr("qkv bench model")) << b.describe();
}

TEST(BenchModelCli, UsageErrorsAreOneLineWithExitCode2) {
  const ScratchDir dir;
  expect_usage_error(run_qkv({"bench", "model", "--threads", "0"}), "--threads");
  expect_usage_error(run_qkv({"bench", "model", "--repeats", "0"}), "--repeats");
  expect_usage_error(run_qkv({"bench", "model", "--bogus"}), "--bogus");
  expect_usage_error(run_qkv({"bench", "model", "--corpus", dir.file("none.txt")}),
                     "--corpus " + dir.file("none.txt") + ": cannot open the file");
  {
    std::ofstream(dir.file("blank.txt")) << "\n  \n";
    std::ofstream(dir.file("bad.txt")) << "fine\nbad \xff byte\n";
  }
  expect_usage_error(run_qkv({"bench", "model", "--corpus", dir.file("blank.txt")}),
                     "has no non-empty lines");
  expect_usage_error(run_qkv({"bench", "model", "--corpus", dir.file("bad.txt")}),
                     "--corpus " + dir.file("bad.txt") +
                         " line 2 is not valid UTF-8 (byte 5 of the line is 0xff); expected UTF-8 "
                         "text");
  expect_usage_error(run_qkv({"bench", "model", "--dump-corpus", dir.file("no/such/c.txt")}),
                     "does not exist");
  expect_usage_error(run_qkv({"bench", "--json", "model"}), "options go after the target");
  expect_usage_error(run_qkv({"bench", "matmul"}), "expected attention, model, perceiver or ring");
}

}  // namespace
