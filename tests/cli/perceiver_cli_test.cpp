// `qkv train --model perceiver`, `qkv explain` on the Perceiver it saved, and `qkv bench
// perceiver`: errors (one line, exit 2), a tiny deterministic run with --json, what the latents
// gather in the terminal, as JSON and as HTML.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "cli/cli_expect.h"
#include "cli/cli_runner.h"
#include "qkv/perceiver.h"
#include "qkv/train.h"

namespace qkv {
namespace {

using testing::expect_one_line_error;
using ::testing::HasSubstr;
using testing::run_qkv;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("qkv-perceiver-cli-" + name)).string();
}

std::vector<std::string> tiny(std::vector<std::string> more) {
  std::vector<std::string> args = {
      "train", "--model", "perceiver", "--task",          "count", "--length",  "32", "--latents",
      "4",     "--steps", "20",        "--layers",        "1",     "--heads",   "2",  "--d-model",
      "16",    "--batch", "8",         "--test-examples", "20",    "--threads", "1"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(PerceiverCli, BadModelTaskAndSizesExit2) {
  expect_one_line_error(
      run_qkv({"train", "--model", "perceptron", "--task", "count"}), 2,
      "--model perceptron is not a model qkv trains; expected transformer, rnnsearch or perceiver");
  expect_one_line_error(run_qkv({"train", "--model", "perceiver", "--task", "reverse"}), 2,
                        "--task reverse is not a Perceiver task; expected count");
  expect_one_line_error(
      run_qkv({"train", "--model", "perceiver", "--task", "count", "--length", "4"}), 2,
      "--length: 4 is out of range; expected 16 to 65536");
  expect_one_line_error(
      run_qkv({"train", "--model", "perceiver", "--task", "count", "--latents", "0"}), 2,
      "--latents: 0 is out of range; expected 1 to 4096");
  expect_one_line_error(run_qkv({"train", "--model", "perceiver", "--task", "count", "--d-model",
                                 "30", "--heads", "4"}),
                        2, "--d-model 30 is not a multiple of --heads 4");
}

TEST(PerceiverCli, TinyRunIsDeterministicSavesAndExplains) {
  const std::string out = temp_path("count.safetensors");
  const auto a = run_qkv(tiny({"--json", "--out", out}));
  ASSERT_EQ(a.exit_code, 0) << a.describe();
  const auto b = run_qkv(tiny({"--json"}));
  ASSERT_EQ(b.exit_code, 0) << b.describe();
  const nlohmann::json ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(ja["model"], "perceiver");
  EXPECT_EQ(ja["config"]["length"], 32);
  EXPECT_EQ(ja["config"]["latents"], 4);
  EXPECT_EQ(ja["training"]["steps"], 20);
  EXPECT_DOUBLE_EQ(ja["chance"].get<double>(), 0.1);
  EXPECT_EQ(ja["training"]["final_loss"], jb["training"]["final_loss"]);  // same seed, same run
  EXPECT_EQ(ja["test_accuracy"], jb["test_accuracy"]);
  // Its progress (stderr, not a terminal): it may stop at --target, so the time shown is to the
  // step limit, and says so.
  EXPECT_TRUE(std::regex_search(
      a.err, std::regex("\nstep 20/20  loss [0-9.]+  batch [0-9.]+%  held-out [0-9.]+%  [0-9.]+ "
                        "steps/s  ≤ 0s to the 20-step limit; may stop early\n$")))
      << a.err;

  // The terminal view: one row a latent, the prediction and the true count.
  const auto text = run_qkv({"explain", "--model", out});
  ASSERT_EQ(text.exit_code, 0) << text.describe();
  EXPECT_THAT(text.out, HasSubstr("4 latent queries × 2 heads over 32 symbols"));
  EXPECT_THAT(text.out, HasSubstr("latent 3"));
  EXPECT_THAT(text.out, HasSubstr("prediction"));

  // A given input: its count is reported, and each latent's shares add up to at most 1.
  const std::string input = "abc#efghijklmnopqrstuvw#yzabcd#f";
  const std::string html = temp_path("latents.html");
  const auto j = run_qkv({"explain", "--model", out, "--input", input, "--json", "--html", html});
  ASSERT_EQ(j.exit_code, 0) << j.describe();
  // What it wrote, said as every kind of model says it (on stderr, out of --json's way): the
  // Perceiver said nothing with --json, and its own words at the end of the table without.
  EXPECT_TRUE(std::regex_match(j.err, std::regex("wrote " + html +
                                                 " \\([0-9]+ KB, self-contained: open it in any "
                                                 "browser, offline\\)\n")))
      << j.err;
  const nlohmann::json e = nlohmann::json::parse(j.out);
  EXPECT_EQ(e["count"], 3);
  ASSERT_EQ(e["latents"].size(), 4u);
  for (const auto& latent : e["latents"]) {
    EXPECT_GE(latent["counted_share"].get<double>(), 0.0);
    EXPECT_LE(latent["counted_share"].get<double>(), 1.0 + 1e-9);
    EXPECT_EQ(latent["top"].size(), 3u);  // --top's default
  }
  std::ifstream in(html);
  const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(page, HasSubstr("<canvas id=\"wmap\""));   // the report's heatmap of weights only
  EXPECT_THAT(page, ::testing::Not(HasSubstr("http")));  // offline: nothing fetched

  // One computation, two renderings: the page shows the terminal's p, the uniform look's share on
  // the '#' (3 of 32 symbols: 0.0938, not one position's 1/32) and each latent's share and
  // × uniform, to the same digits.
  const auto terminal = run_qkv({"explain", "--model", out, "--input", input, "--html", html});
  ASSERT_EQ(terminal.exit_code, 0) << terminal.describe();
  EXPECT_THAT(terminal.err, HasSubstr("wrote " + html + " ("));
  EXPECT_THAT(terminal.out, ::testing::Not(HasSubstr("wrote")));
  EXPECT_THAT(terminal.out, HasSubstr("how many times a uniform look's 0.0938;"));
  EXPECT_THAT(page, HasSubstr("how many times a uniform look's 0.0938;"));
  std::smatch p;
  ASSERT_TRUE(std::regex_search(terminal.out, p, std::regex(R"(\(p = [0-9.]+\))"))) << terminal.out;
  EXPECT_THAT(page, HasSubstr(p.str()));
  EXPECT_THAT(page, HasSubstr("<th>× uniform</th>"));
  const std::regex row(R"(\n  (latent \d+) +([0-9.]+) +([0-9.]+×|—))");
  int rows = 0;
  for (auto it = std::sregex_iterator(terminal.out.begin(), terminal.out.end(), row);
       it != std::sregex_iterator(); ++it, ++rows)
    EXPECT_THAT(page, HasSubstr("<th scope=row>" + (*it)[1].str() + "</th><td>" + (*it)[2].str() +
                                "</td><td>" + (*it)[3].str() + "</td>"));
  EXPECT_EQ(rows, 4) << terminal.out;
  EXPECT_EQ(e["uniform_share"].get<double>(), 3.0 / 32);
  EXPECT_NEAR(e["latents"][0]["times_uniform"].get<double>(),
              e["latents"][0]["counted_share"].get<double>() / (3.0 / 32), 1e-12);

  expect_one_line_error(run_qkv({"explain", "--model", out, "--input", "abc"}), 2,
                        "--input has 3 symbols; the model reads 32");
  expect_one_line_error(
      run_qkv({"explain", "--model", out, "--input", "ABC#efghijklmnopqrstuvw#yzabcd#f"}), 2,
      "--input has 'A' at position 0");
  // The library names the field (input), the command its option; a typed brace stays a brace.
  expect_one_line_error(
      run_qkv({"explain", "--model", out, "--input", "abc{input}ghijklmnopqrstuvw#yzab"}), 2,
      "--input has '{' at position 3");
  // Each option a Perceiver does not read is refused, saying where it applies; --top, which it
  // reads, takes up to 64 positions a latent (the option stopped at 3, a sentence's).
  expect_one_line_error(run_qkv({"explain", "--model", out, "--layer", "0", "--head", "0"}), 2,
                        "--layer picks one head of a sentence model (the BERT model, smollm2) or "
                        "of a model from qkv train; a Perceiver shows every latent's heads "
                        "together; expected no --layer");
  expect_one_line_error(run_qkv({"explain", "--model", out, "--svg", temp_path("x.svg")}), 2,
                        "--svg draws a sentence model's heatmap");
  expect_one_line_error(run_qkv({"explain", "--model", out, "--input", input, "b"}), 2,
                        "the text \"b\" is given, but a Perceiver reads --input");
  const auto top = run_qkv({"explain", "--model", out, "--input", input, "--top", "10", "--json"});
  ASSERT_EQ(top.exit_code, 0) << top.describe();
  EXPECT_EQ(nlohmann::json::parse(top.out)["latents"][0]["top"].size(), 10u);
  std::filesystem::remove(out);
  std::filesystem::remove(html);
}

// Options of one model given to another are refused with where they apply, not ignored (issue
// 26: --length with --task reverse trained at the task's own lengths; --task count without
// --model perceiver was an "unknown task").
TEST(PerceiverCli, OptionsOfOneModelAreRefusedWithAnother) {
  expect_one_line_error(run_qkv({"train", "--task", "count"}), 2,
                        "--task count is the Perceiver's task, not the transformer's; expected "
                        "--model perceiver --task count");
  expect_one_line_error(run_qkv({"train", "--task", "count", "--model", "rnnsearch"}), 2,
                        "--task count is the Perceiver's task, not the rnnsearch's");
  // (--steps 1: were --length ignored again, the run would not take minutes to fail.)
  expect_one_line_error(run_qkv({"train", "--task", "reverse", "--length", "100", "--steps", "1",
                                 "--test-examples", "1"}),
                        2,
                        "--length applies to --model perceiver only (the length of its input); "
                        "--model transformer takes its lengths from the task; expected no "
                        "--length");
  expect_one_line_error(
      run_qkv({"train", "--task", "dates", "--model", "rnnsearch", "--latents", "8", "--steps", "1",
               "--test-examples", "1"}),
      2,
      "--latents applies to --model perceiver only (its latent queries); --model rnnsearch has "
      "none; expected no --latents");
  expect_one_line_error(
      run_qkv({"train", "--model", "perceiver", "--task", "count", "--layers", "65"}), 2,
      "--layers: 65 is out of range; expected 0 to 64");
}

// --token picks the focus of a sentence's view; a trained model has no such view (issue 26: it
// was ignored).
TEST(PerceiverCli, TokenIsRefusedForTrainedModels) {
  const std::string perceiver = temp_path("token.safetensors");
  nn::Rng rng(1);
  Perceiver(PerceiverConfig{.length = 32, .latents = 4, .d_model = 16, .heads = 2, .blocks = 1},
            rng)
      .save(perceiver);
  expect_one_line_error(run_qkv({"explain", "--model", perceiver, "--token", "it"}), 2,
                        "--token 'it' applies to qkv explain on a sentence (a BERT model or a "
                        "decoder); a Perceiver shows what every latent gathers instead");
  const std::string seq2seq = temp_path("token-copy.safetensors");
  make_model(config_for(make_task("copy"), 1, 2, 8), 1)->save(seq2seq);
  expect_one_line_error(run_qkv({"explain", "--model", seq2seq, "--token", "3"}), 2,
                        "--token '3' applies to qkv explain on a sentence (a BERT model or a "
                        "decoder); a model from qkv train shows every output step's alignment");
  std::filesystem::remove(perceiver);
  std::filesystem::remove(seq2seq);
}

// Embedding weights of 3e38 overflow float32 in the first layer: the page and the terminal showed
// "prediction 0 (p = nan)" and every latent's weights as nan, exit 0 (issue 26's last sweep). As
// the other models' explain, it is a runtime error naming what came out non-finite.
TEST(PerceiverCli, WeightsThatOverflowAreAnErrorNotNan) {
  const std::string path = temp_path("overflow.safetensors");
  nn::Rng rng(1);
  Perceiver p(PerceiverConfig{.length = 32, .latents = 4, .d_model = 16, .heads = 2, .blocks = 1},
              rng);
  float* w = p.embedding.weight.value.data<float>();
  for (int64_t i = 0; i < p.embedding.weight.value.numel(); ++i) w[i] = 3e38f;
  p.save(path);
  for (const std::string& flag : {"", "--json"}) {
    std::vector<std::string> args = {"explain", "--model", path};
    if (!flag.empty()) args.push_back(flag);
    const auto r = run_qkv(args);
    expect_one_line_error(r, 1, "came out NaN; the model computes non-finite numbers");
    EXPECT_EQ(r.out, "");
  }
  std::filesystem::remove(path);
}

// A saved model's own length, out of its task's range, is named as the file's field — explain has
// no --length (issue 26: "--length 8 is out of range").
TEST(PerceiverCli, AModelsOwnLengthIsNamedAsItsFieldNotAFlag) {
  const std::string path = temp_path("length8.safetensors");
  nn::Rng rng(1);
  Perceiver(PerceiverConfig{.length = 8, .latents = 4, .d_model = 16, .heads = 2, .blocks = 1}, rng)
      .save(path);
  const auto r = run_qkv({"explain", "--model", path});
  expect_one_line_error(r, 2,
                        path +
                            ": the metadata's qkv.config: length 8 is out of range for the "
                            "task count; expected 16 to 65536");
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("--length")));
  std::filesystem::remove(path);
}

// With more latents than inputs the ratios are below 1: the table printed them rounded to whole
// numbers, "0" (issue 26, round 2). They are shown to three significant digits, as the JSON has
// them.
TEST(PerceiverCli, BenchRatiosBelowOneAreNotRoundedToZero) {
  const auto r = run_qkv({"bench", "perceiver", "--quick", "--threads", "1", "--latents", "4096"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  // L, N, cross ms, self ms, cross GFLOP, self GFLOP, FLOP × (= L / N), time ×, ...
  const std::regex row(R"(\n *(256|512|1024) +4096 +[0-9.]+ +[0-9.]+ +([0-9.]+) +([0-9.]+) +)"
                       R"(([0-9.]+) +([0-9.]+) )");
  std::map<std::string, std::string> flop_ratio;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), row);
       it != std::sregex_iterator(); ++it) {
    flop_ratio[(*it)[1]] = (*it)[4];
    EXPECT_GT(std::stod((*it)[5]), 0) << "time ×: " << r.out;
    EXPECT_GT(std::stod((*it)[2]), 0) << "cross GFLOP: " << r.out;
  }
  EXPECT_EQ(flop_ratio["256"], "0.0625") << r.out;
  EXPECT_EQ(flop_ratio["512"], "0.125") << r.out;
  EXPECT_EQ(flop_ratio["1024"], "0.250") << r.out;
}

TEST(PerceiverCli, BenchQuickPrintsCrossAndSelfCosts) {
  const auto r = run_qkv({"bench", "perceiver", "--quick", "--json", "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::istringstream lines(r.out);
  std::string line;
  int rows = 0;
  while (std::getline(lines, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    const double l = j["L"].get<double>(), n = j["N"].get<double>();
    EXPECT_DOUBLE_EQ(j["flop_ratio"].get<double>(), l / n);  // 4·L²·d / 4·N·L·d
    EXPECT_DOUBLE_EQ(j["self_gflop"].get<double>(), 4 * l * l * 64 / 1e9);
    EXPECT_DOUBLE_EQ(j["cross_gflop"].get<double>(), 4 * n * l * 64 / 1e9);
    // Times are not compared: on a shared machine one time slice outweighs a 0.2 ms run.
    EXPECT_GT(j["cross_ms"].get<double>(), 0.0);
    EXPECT_GT(j["self_ms"].get<double>(), 0.0);
    ++rows;
  }
  EXPECT_EQ(rows, 3);
}

}  // namespace
}  // namespace qkv
