// `qkv experiment`: the quick smoke run of `scale` (its softmax statistics at initialization are
// properties of the math, so they are asserted), and the errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"

namespace qkv {
namespace {

using ::testing::HasSubstr;
using testing::run_qkv;

TEST(ExperimentCli, ScaleQuickShowsTheUnscaledSoftmaxCollapsing) {
  const auto r = run_qkv({"experiment", "scale", "--quick", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["experiment"], "scale");
  ASSERT_EQ(j["rows"].size(), 4u);  // d_k 16 and 64, scaled and not
  auto entropy = [&](int row) { return std::stod(j["rows"][row]["entropy"].get<std::string>()); };
  // q·k of N(0, 1) vectors has variance d_k: scaled scores stay near the uniform entropy ln 16 =
  // 2.77, unscaled ones collapse, more so at d_k = 64 than at 16.
  EXPECT_GT(entropy(0), 2.0);
  EXPECT_GT(entropy(2), 2.0);
  EXPECT_LT(entropy(1), 1.2);
  EXPECT_LT(entropy(3), entropy(1));
  EXPECT_FALSE(j["reading"].get<std::string>().empty());
  // How long it took is reported (its speed is the benchmarks' business, not a test's).
  EXPECT_GT(j["seconds"].get<double>(), 0.0);
  RecordProperty("seconds", std::to_string(j["seconds"].get<double>()));
}

TEST(ExperimentCli, UnknownExperimentListsTheKnownOnes) {
  const auto r = run_qkv({"experiment", "nope"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("unknown experiment 'nope'; expected one of tie-qk, no-wv, scale"));
  const auto help = run_qkv({"experiment", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("qkv experiment scale --quick"));
}

}  // namespace
}  // namespace qkv
