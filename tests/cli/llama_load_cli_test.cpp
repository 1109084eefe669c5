// A decoder's GGUF file is read header first: the model is sized from its header and refused past
// --memory-limit before a weight is read, and a file that is no model is refused having read a
// few bytes of it. Before (issue 26's second sweep), every command read the whole file into
// memory first: a 10 GB file of zeros named x.gguf ran out of memory (std::bad_alloc, exit 1)
// under a 8 GB address-space limit, a 3 GB file holding only a GGUF header took 3.1 GB and 9 s to
// say it had no architecture, and `--memory-limit 200M` refused SmolLM2 only after a peak of
// 1.17 GB: the limit was checked once the weights were in memory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "cli/cli_expect.h"
#include "cli/cli_runner.h"
#include "cli/peak_memory.h"
#include "core/scratch_files.h"
#include "models/model_files.h"
#include "models/tiny_llama_gguf.h"

namespace qkv::testing {
namespace {

using ::testing::HasSubstr;

#if defined(__SANITIZE_ADDRESS__)
// AddressSanitizer's shadow memory and quarantine add hundreds of MiB to any peak.
constexpr bool kPeaksMeanSomething = false;
#else
constexpr bool kPeaksMeanSomething = true;
#endif

// A command that reads a file's header and refuses it takes what qkv takes before any model
// (kProcessBytes, 32 MiB allowed; measured 10–20 MiB) and the header. The files below are
// gigabytes: a command that read them whole would be far above.
constexpr long kSmallPeakKib = 64 * 1024;

// The three commands that load a decoder, each with `model` and `more` arguments.
std::vector<std::vector<std::string>> decoder_commands(const std::string& model,
                                                       const std::vector<std::string>& more = {}) {
  std::vector<std::vector<std::string>> commands = {
      {"generate", "hello the", "--max-tokens", "1", "--model", model},
      {"explain", "hello the", "--model", model},
      {"bench", "model", "--quick", "--model", model}};
  for (auto& c : commands) c.insert(c.end(), more.begin(), more.end());
  return commands;
}

// `qkv args` must fail with one line (exit `code`) holding `message`, its peak under `kib`.
void expect_refused_small(const std::vector<std::string>& args, int code,
                          const std::string& message, long kib) {
  const MeasuredRun m = run_qkv_measured(args, {.timeout_s = 60});
  ASSERT_FALSE(m.result.timed_out) << m.result.describe();
  expect_one_line_error(m.result, code, message);
  if (kPeaksMeanSomething && m.peak_kib > 0)
    EXPECT_LT(m.peak_kib, kib) << "a peak of " << m.peak_kib / 1024 << " MiB for "
                               << m.result.describe();
}

// A sparse file of `bytes` bytes that starts with `head`.
std::string sparse_file(const std::string& path, const std::string& head, uint64_t bytes) {
  std::ofstream(path, std::ios::binary) << head;
  std::filesystem::resize_file(path, bytes);
  return path;
}

constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST(LlamaLoadCli, AFileWithoutTheMagicIsRefusedUnread) {
  const test::ScratchDir dir("qkv-llama-load");
  const std::string zeros = sparse_file(dir.path("x.gguf"), "", 3 * kGiB);
  for (const auto& args : decoder_commands(zeros))
    expect_refused_small(
        args, 2,
        "--model " + zeros + ": it does not start with \"GGUF\"; expected a valid GGUF file",
        kSmallPeakKib);
}

TEST(LlamaLoadCli, AHeaderWithoutAModelIsRefusedUnread) {
  const test::ScratchDir dir("qkv-llama-load");
  // "GGUF", version 3, no tensors, no metadata, then 3 GB of zeros.
  using test::gguf_detail::le;
  const std::string head = "GGUF" + le<uint32_t>(3) + le<uint64_t>(0) + le<uint64_t>(0);
  const std::string file = sparse_file(dir.path("magic.gguf"), head, 3 * kGiB);
  for (const auto& args : decoder_commands(file, {"--memory-limit", "1G"}))
    expect_refused_small(args, 2,
                         "--model " + file +
                             ": no metadata \"general.architecture\"; expected it in this kind "
                             "of model",
                         kSmallPeakKib);
}

// 4 layers of 2,048 dimensions and 8,192 feed-forward units in float32: 0.97 GB of zero weights
// (a sparse file), which qkv keeps dequantized and packed: twice that.
TEST(LlamaLoadCli, AModelIsSizedFromItsHeaderAndRefusedBeforeItsWeightsAreRead) {
  const test::ScratchDir dir("qkv-llama-load");
  const std::string file = test::zero_llama_gguf(4, 2048, 16, 4, 8192)
                               .set("llama.context_length", test::gguf_u32(1024))
                               .write_sparse(dir.path("big.gguf"));
  ASSERT_GT(std::filesystem::file_size(file), 900'000'000u);
  for (const auto& args : decoder_commands(file, {"--memory-limit", "1G"})) {
    const MeasuredRun m = run_qkv_measured(args, {.timeout_s = 60});
    ASSERT_FALSE(m.result.timed_out) << m.result.describe();
    expect_one_line_error(m.result, 2, " of memory, over the limit of 1.0 GiB (--memory-limit)");
    // The weights and their packed copies: 2 × 0.97 GB, and the work besides.
    const std::regex need(R"(needs about ([0-9.]+) GiB of memory)");
    std::smatch match;
    ASSERT_TRUE(std::regex_search(m.result.err, match, need)) << m.result.describe();
    EXPECT_GE(std::stod(match[1].str()), 1.8) << m.result.describe();
    if (kPeaksMeanSomething && m.peak_kib > 0)
      EXPECT_LT(m.peak_kib, kSmallPeakKib)
          << "a peak of " << m.peak_kib / 1024 << " MiB for " << m.result.describe();
  }
}

// SmolLM2-135M takes about 150 MiB loaded as its file's blocks (1.1 GiB as float32: --weights
// float32); its header and tokenizer, all that is read to size it, a few tens of MiB (measured
// 60 MiB peak for the refusal).
TEST(LlamaLoadCli, SmolLM2IsRefusedPastTheLimitHavingReadItsHeader) {
  test::smollm2_gguf();
  for (const auto& args : decoder_commands("smollm2", {"--memory-limit", "100M"}))
    expect_refused_small(args, 2, " of memory, over the limit of 100 MiB (--memory-limit)",
                         100 * 1024);
}

}  // namespace
}  // namespace qkv::testing
