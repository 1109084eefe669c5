// tests/cli/cli_expect.h — what the CLI tests expect of every failing command.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cli/cli_runner.h"

namespace qkv::testing {

// A failure is one line on stderr that names `what`, the exit code `code` (2 usage, 1 runtime),
// and nothing on stdout: no half result, no "nan" printed as a number.
inline void expect_one_line_error(const CliResult& r, int code, const std::string& what) {
  EXPECT_EQ(r.exit_code, code) << r.describe();
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.describe();
  EXPECT_THAT(r.err, ::testing::HasSubstr(what)) << r.describe();
  EXPECT_TRUE(r.out.empty()) << r.describe();
}

}  // namespace qkv::testing
