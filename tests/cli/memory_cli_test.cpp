// The commands whose memory grows with their input say what the work needs and refuse past
// --memory-limit before it starts (issue 26: `qkv explain --model smollm2` on 1,500 words, `qkv
// train --layers 64 --d-model 4096 --heads 64 --batch 4096` and `qkv bench ring --length
// 16777216` ended in std::bad_alloc or the OOM killer). Each estimate comes from the library,
// beside the model it sizes; here it is checked against the measured peak resident memory (wait4's
// ru_maxrss) of the same command: it must not undercount, nor overcount wildly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>

#include "cli/cli_expect.h"
#include "cli/cli_runner.h"
#include "cli/peak_memory.h"
#include "qkv/perceiver.h"

namespace qkv {
namespace {

using testing::CliResult;
using testing::expect_one_line_error;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_qkv;

#if defined(__SANITIZE_ADDRESS__)
// AddressSanitizer's shadow memory and quarantine add hundreds of MiB that no estimate counts.
constexpr bool kMeasuredPeaksMeanSomething = false;
#else
constexpr bool kMeasuredPeaksMeanSomething = true;
#endif

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("qkv-memory-cli-" + name)).string();
}

// "… needs about 1.3 GiB of memory, over the limit of …" → bytes (bytes_str's precision: two or
// three significant digits).
double need_of(const CliResult& r) {
  static const std::regex need(
      R"(needs about ([0-9.]+) (bytes|KiB|MiB|GiB|TiB|PiB|EiB) of memory)");
  std::smatch m;
  if (!std::regex_search(r.err, m, need)) {
    ADD_FAILURE() << "no \"needs about\" in: " << r.describe();
    return 0;
  }
  const std::string units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double x = std::stod(m[1].str());
  for (const std::string& u : units) {
    if (u == m[2].str()) break;
    x *= 1024;
  }
  return x;
}

// The refusal: one line, exit 2, naming the work, what it needs, the limit and its flag.
void expect_refused(const CliResult& r, const std::string& work) {
  expect_one_line_error(r, 2, work);
  EXPECT_THAT(r.err, HasSubstr(" of memory, over the limit of "));
  // "(--memory-limit)", or with the option left out under a cgroup or ulimit -v, what bounds it.
  EXPECT_THAT(r.err, HasSubstr(" (--memory-limit"));
  EXPECT_THAT(r.err, HasSubstr("); expected "));
}

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// The peak resident memory of `qkv args` in KiB (cli/peak_memory.h); 0 where it cannot be
// measured.
long peak_kib(const std::vector<std::string>& args) {
  const testing::MeasuredRun m = testing::run_qkv_measured(args);
  EXPECT_EQ(m.result.exit_code, 0) << m.result.describe();
  return m.peak_kib;
}

// Runs `args` once with a limit nothing fits in (the refusal says the estimate) and once without
// (measured): the estimate must cover the measured peak, and not exceed it by more than `slack`
// times (an estimate that refuses what fits easily is as wrong as one that undercounts).
void expect_estimate_holds(const std::vector<std::string>& args, const std::string& work,
                           double slack) {
  const CliResult refused = run_qkv(with(args, {"--memory-limit", "1K"}));
  expect_refused(refused, work);
  const double need = need_of(refused);
  const long kib = peak_kib(args);
  if (kib == 0) GTEST_SKIP() << "no /usr/bin/python3 to measure the peak with";
  const double peak = 1024.0 * static_cast<double>(kib);
  ::testing::Test::RecordProperty("estimate_mib", std::to_string(need / (1 << 20)));
  ::testing::Test::RecordProperty("peak_mib", std::to_string(peak / (1 << 20)));
  if (!kMeasuredPeaksMeanSomething) return;
  // bytes_str prints two digits below 10 ("1.1 GiB"): up to 5% either way.
  EXPECT_GE(need * 1.05, peak) << "the estimate undercounts: " << need / (1 << 20)
                               << " MiB estimated, " << peak / (1 << 20) << " MiB measured for "
                               << refused.command;
  EXPECT_LE(need, slack * peak) << "the estimate overcounts: " << need / (1 << 20)
                                << " MiB estimated, " << peak / (1 << 20) << " MiB measured for "
                                << refused.command;
}

// `words` words of English-like text (one token each to SmolLM2, with their spaces).
std::string words(int n) {
  static const char* pool[] = {"the",  "cat", "sat",  "on",    "a",    "mat", "while",
                               "dogs", "ran", "far",  "from",  "home", "and", "birds",
                               "sang", "in",  "tall", "trees", "near", "the", "river"};
  std::mt19937 rng(7);
  std::string text;
  for (int i = 0; i < n; ++i)
    text += (i > 0 ? " " : "") + std::string(pool[rng() % (sizeof pool / sizeof pool[0])]);
  return text;
}

// ---- explain: every layer's scores, logits and weights, tokens² a head ----

TEST(MemoryCli, ExplainDecoderSaysWhatItNeedsAndRefusesPastTheLimit) {
  // 1,500 words: 30 layers × 9 heads × 1,500² kept (about 10 GiB) for an image, which reads every
  // weight: refused, not bad_alloc. (The terminal's views keep rows: the test below.)
  const auto r = run_qkv({"explain", "--model", "smollm2", words(1500), "--memory-limit", "4G",
                          "--png", temp_path("refused.png")});
  expect_refused(r, "explaining 1,500 tokens (every layer's scores, logits and weights kept)");
  EXPECT_THAT(r.err, HasSubstr("over the limit of 4.0 GiB (--memory-limit); expected a shorter "
                               "text"));
  EXPECT_GT(need_of(r), 8.0 * (int64_t{1} << 30));
  const auto bad = run_qkv({"explain", "--memory-limit", "lots"});
  expect_one_line_error(bad, 2, "--memory-limit: lots is not a size");
}

TEST(MemoryCli, ExplainDecoderEstimateCoversTheMeasuredPeak) {
  for (const int n : {60, 300})
    expect_estimate_holds({"explain", "--model", "smollm2", words(n)},
                          "explaining " + std::to_string(n) + " tokens", 1.5);
}

// Past explain::kRowsAbove tokens the terminal's views read a decoder's rows: q, k, v and each
// row's softmax a layer, O(n·d) where every weight was n² (qkv/explain_run.h).
TEST(MemoryCli, ExplainDecoderRowsEstimateCoversTheMeasuredPeak) {
  expect_estimate_holds({"explain", "--model", "smollm2", words(1500)},
                        "explaining 1,500 tokens (each layer's q, k, v and row softmax kept; the "
                        "weights shown recomputed from them)",
                        1.5);
}

TEST(MemoryCli, ExplainSentenceEncoderEstimateCoversTheMeasuredPeak) {
  expect_estimate_holds({"explain", words(200)}, "explaining 202 tokens", 1.6);
  // --json holds every number twice more (the tree, its text): 11 million numbers here.
  expect_estimate_holds({"explain", words(200), "--json"},
                        "explaining 202 tokens (every layer's scores, logits and weights kept, "
                        "and written as JSON)",
                        2.0);
}

TEST(MemoryCli, ExplainPerceiverEstimateCoversTheMeasuredPeak) {
  // Every weight of 4 heads × 16 latents × 8,192 positions, and the page that holds them all.
  const std::string path = temp_path("perceiver-8k.safetensors");
  nn::Rng rng(1);
  Perceiver(PerceiverConfig{.length = 8192}, rng).save(path);
  const std::string html = temp_path("perceiver-8k.html");
  expect_estimate_holds({"explain", "--model", path}, "explaining " + path, 2.0);
  expect_estimate_holds({"explain", "--model", path, "--html", html}, "explaining " + path, 2.0);
  std::filesystem::remove(path);
  std::filesystem::remove(html);
}

// ---- train: parameters, AdamW's moments, a batch's activations ----

TEST(MemoryCli, TrainRefusesAModelItCannotHoldBeforeAllocatingIt) {
  // The issue's: 64 + 64 blocks of d_model 4096 are ~29 billion parameters (~430 GiB with their
  // gradients and moments). Refused at once, never allocated.
  const auto r = run_qkv({"train", "--task", "reverse", "--layers", "64", "--d-model", "4096",
                          "--heads", "64", "--batch", "4096", "--memory-limit", "8G"},
                         {.timeout_s = 60});
  expect_refused(r, "training this transformer (64 layers, d_model 4,096, batch 4,096)");
  EXPECT_THAT(r.err, HasSubstr("expected a smaller --layers, --d-model or --batch"));
  EXPECT_GT(need_of(r), 400.0 * (int64_t{1} << 30));
  // The default limit is half the machine's memory: this machine's half, whatever it is, is less.
  const auto by_default = run_qkv({"train", "--task", "reverse", "--layers", "64", "--d-model",
                                   "4096", "--heads", "64", "--batch", "4096"},
                                  {.timeout_s = 60});
  expect_refused(by_default, "training this transformer");
  // It says the limit was not given, and what the default is ("(--memory-limit)" read as if the
  // user had set 12 GiB).
  EXPECT_THAT(by_default.err, HasSubstr(" (--memory-limit not given: "));
  // A Perceiver's 4,096 latents over 16 symbols: what makes it large is the latents, and the
  // refusal said "expected a smaller --length, --d-model or --batch" (issue 26's last sweep).
  const auto latents = run_qkv({"train", "--model", "perceiver", "--task", "count", "--latents",
                                "4096", "--length", "16", "--memory-limit", "1G"},
                               {.timeout_s = 60});
  expect_refused(latents,
                 "training this Perceiver (length 16, latents 4,096, d_model 64, batch 64)");
  EXPECT_THAT(latents.err,
              HasSubstr("expected a smaller --length, --latents, --layers, --d-model or --batch"));
}

// Under `ulimit -v` the default limit was still half the machine's memory, so work that fit it but
// not the address space ran into std::bad_alloc (exit 1, after the allocation started): 10 GiB of
// training under a 1.9 GiB address space (issue 26). The default is now bounded by the room
// ulimit -v leaves, and the refusal says so.
TEST(MemoryCli, TheDefaultLimitIsBoundedByTheAddressSpaceUlimitLeaves) {
  const testing::CliResult r = testing::run_program(
      "/bin/sh",
      {"-c", "ulimit -v 2000000 && exec \"$0\" \"$@\"", testing::qkv_binary(), "train", "--task",
       "reverse", "--layers", "4", "--d-model", "512", "--batch", "1024", "--steps", "1"},
      testing::RunOptions{.timeout_s = 60});
  expect_one_line_error(r, 2, "training this transformer (4 layers, d_model 512, batch 1,024)");
  EXPECT_THAT(r.err, HasSubstr(" of memory, over the limit of "));
  EXPECT_THAT(r.err, HasSubstr(" (--memory-limit not given: 3/4 of the "));
  EXPECT_THAT(r.err, HasSubstr(" of address space ulimit -v leaves); expected a smaller "));
  EXPECT_THAT(r.err, Not(HasSubstr("bad_alloc")));
}

TEST(MemoryCli, TrainEstimateCoversTheMeasuredPeak) {
  const std::vector<std::string> common = {"--steps",   "2", "--test-examples", "4",
                                           "--threads", "1", "--target",        "2"};
  expect_estimate_holds(
      with({"train", "--task", "dates", "--d-model", "256", "--batch", "512"}, common),
      "training this transformer (2 layers, d_model 256, batch 512)", 3.0);
  expect_estimate_holds(
      with({"train", "--task", "reverse", "--model", "rnnsearch", "--d-model", "128"}, common),
      "training this rnnsearch", 3.0);
  expect_estimate_holds(with({"train", "--model", "perceiver", "--task", "count", "--length",
                              "4096", "--batch", "32", "--d-model", "64"},
                             common),
                        "training this Perceiver (length 4,096, latents 16, d_model 64, batch 32)", 3.0);
}

// Past every estimate, an allocation can still fail (a ulimit, other processes): one line that
// names the command and the address-space limit, exit 1 (was "qkv: error: std::bad_alloc").
TEST(MemoryCli, AnAllocationThatStillFailsSaysWhichCommand) {
  if (!kMeasuredPeaksMeanSomething) GTEST_SKIP() << "AddressSanitizer reserves more than a ulimit";
  // 8 + 8 blocks of d_model 4096: ~3.5 billion parameters, within a 1T limit, not within 3 GB.
  const auto r = testing::run_program(
      "/bin/sh",
      {"-c", "ulimit -v 3000000 && exec \"$0\" \"$@\"", testing::qkv_binary(), "train", "--task",
       "reverse", "--d-model", "4096", "--layers", "8", "--heads", "8", "--memory-limit", "1T",
       "--threads", "1", "--steps", "1"},
      {.timeout_s = 120, .env = {"OPENBLAS_NUM_THREADS=1"}});
  // Work of a GiB or more is announced before it starts; then the one error line.
  const std::string note =
      "qkv: note: training this transformer (8 layers, d_model 4,096, batch 64) needs about ";
  ASSERT_EQ(r.err.substr(0, note.size()), note) << r.describe();
  const testing::CliResult after_note{
      .exit_code = r.exit_code, .out = r.out, .err = r.err.substr(r.err.find('\n') + 1)};
  expect_one_line_error(after_note, 1,
                        "qkv train ran out of memory (std::bad_alloc): the memory it could get "
                        "(ulimit -v limits the address space to 2.9 GiB) was less than this "
                        "work needs");
}

// ---- embed and search: the texts, their ids and embeddings, a batch ----

std::string corpus_of(int lines) {
  const std::string path = temp_path("corpus-" + std::to_string(lines) + ".txt");
  std::ofstream out(path);
  std::mt19937 rng(3);
  for (int i = 0; i < lines; ++i)
    out << words(5 + static_cast<int>(rng() % 20)) << " " << i << "\n";
  return path;
}

TEST(MemoryCli, EmbedAndSearchSayWhatTheyNeed) {
  const std::string corpus = corpus_of(200);
  std::ifstream in(corpus);
  std::stringstream text;
  text << in.rdbuf();
  const auto embed = run_qkv({"embed", "--memory-limit", "1M"}, text.str());
  expect_refused(embed, "embedding 200 texts (");
  EXPECT_THAT(embed.err, HasSubstr("expected fewer texts a run"));
  const auto search = run_qkv({"search", "river", "--corpus", corpus, "--memory-limit", "1M"});
  expect_refused(search, "searching 200 lines (");
  // A line has at most as many tokens as bytes: the batch is counted at its longest line's bytes.
  expect_estimate_holds({"search", "river", "--corpus", corpus}, "searching 200 lines", 2.0);
}

// ---- generate: the model and its KV cache ----

TEST(MemoryCli, GenerateSaysWhatItNeeds) {
  expect_estimate_holds({"generate", "The capital of France is", "--max-tokens", "4"},
                        "generating 4 tokens after a prompt of 5 (the model and its KV cache)",
                        1.6);
}

// ---- bench ring: every rank holds the whole problem ----

TEST(MemoryCli, BenchRingRefusesTheDocumentedMaximumItCannotHold) {
  // N = 2²⁴ tokens: q, k, v, dout and the results, 80 GiB a set, on every rank.
  const auto r = run_qkv({"bench", "ring", "--quick", "--length", "16777216"}, {.timeout_s = 60});
  if (r.err.find("built without MPI") != std::string::npos) GTEST_SKIP() << r.err;
  expect_refused(r, "qkv bench ring: N = 16,777,216 tokens on 1 rank of this machine");
  EXPECT_GT(need_of(r), 200.0 * (int64_t{1} << 30));
}

TEST(MemoryCli, BenchRingEstimateCoversTheMeasuredPeak) {
  const auto probe = run_qkv({"bench", "ring", "--quick", "--length", "1", "--json"});
  if (probe.err.find("built without MPI") != std::string::npos) GTEST_SKIP() << probe.err;
  expect_estimate_holds({"bench", "ring", "--quick", "--length", "4096"},
                        "qkv bench ring: N = 4,096 tokens on 1 rank", 1.6);
}

TEST(MemoryCli, BenchModelSaysWhatItNeeds) {
  expect_refused(run_qkv({"bench", "model", "--quick", "--memory-limit", "1M"}),
                 "qkv bench model: 64 sentences (");
  expect_refused(
      run_qkv({"bench", "model", "--model", "smollm2", "--quick", "--memory-limit", "1M"}),
      "qkv bench model: smollm2 (its weights, a captured pass and the KV cache)");
}

// --memory-limit 9223372036854775807 is a size (2⁶³ − 1 bytes), the largest: it was "not a size"
// (read through a double, which rounds it up to 2⁶³); one more is too large and says the most;
// '' was silently the default limit. Checked as the command line is parsed, for every command.
TEST(MemoryCli, TheLargestSizeIsOneAndTooLargeSaysTheMost) {
  const std::vector<std::string> m = {"attend",        "--query",       "[[1,0],[0,1]]",
                                      "--keys",        "[[1,0],[0,1]]", "--values",
                                      "[[1,0],[0,1]]", "--memory-limit"};
  auto with = [&](const std::string& size) {
    std::vector<std::string> args = m;
    args.push_back(size);
    return run_qkv(args);
  };
  for (const char* fine : {"9223372036854775807", "8388607T", "1.5G", "4096K"})
    EXPECT_EQ(with(fine).exit_code, 0) << with(fine).describe();
  const std::string expected =
      "expected a positive number of bytes with K, M, G or T, e.g. 8G (see qkv --help)\n";
  for (const char* large : {"9223372036854775808", "8388608T", "99999999999999999999999", "1e30"})
    expect_one_line_error(with(large), 2,
                          "qkv: error: --memory-limit: " + std::string(large) +
                              " is more than the largest size, 2^63 - 1 bytes (8 EiB); " +
                              expected);
  for (const char* wrong : {"0", "-1G", "lots", "1X", "nan"})
    expect_one_line_error(
        with(wrong), 2,
        "qkv: error: --memory-limit: " + std::string(wrong) + " is not a size; " + expected);
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"train", "--task", "copy"},
        {"embed", "a"},
        {"explain"},
        {"generate", "hi"},
        {"bench", "ring"}})
    for (const char* size : {"", "9223372036854775808"}) {
      std::vector<std::string> args = command;
      args.insert(args.end(), {"--memory-limit", size});
      expect_one_line_error(
          run_qkv(args), 2,
          std::string("qkv: error: --memory-limit: ") +
              (*size ? "9223372036854775808 is more than" : "the value is empty"));
    }
}

}  // namespace
}  // namespace qkv
