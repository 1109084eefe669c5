// tests/cli/cli_expect.h — what the CLI tests expect of every failing command.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cli/cli_runner.h"
#include "qkv/explain.h"

namespace qkv::testing {

// A failure is one line on stderr that names `what`, the exit code `code` (2 usage, 1 runtime),
// and nothing on stdout: no half result, no "nan" printed as a number.
inline void expect_one_line_error(const CliResult& r, int code, const std::string& what) {
  EXPECT_EQ(r.exit_code, code) << r.describe();
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.describe();
  EXPECT_THAT(r.err, ::testing::HasSubstr(what)) << r.describe();
  EXPECT_TRUE(r.out.empty()) << r.describe();
}

// Every line of `text` fits 80 terminal columns (explain::display_width: UTF-8 code points).
inline void expect_fits_80_columns(const std::string& text) {
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    EXPECT_LE(explain::display_width(line), 80) << line;
    if (end == std::string::npos) break;
    start = end + 1;
  }
}

}  // namespace qkv::testing
