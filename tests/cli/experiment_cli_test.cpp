// `qkv experiment`: the errors and the help. The quick runs against the full ones:
// experiment_readings_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/cli_runner.h"

namespace qkv {
namespace {

using ::testing::HasSubstr;
using testing::run_qkv;

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
