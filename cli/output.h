// What the command says of the files it writes (the checked standard output it prints through is
// qkv/files.h's).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qkv/files.h"
#include "qkv/json.h"  // path_json: a file name as --json shows it

namespace qkv::cli {

// use_checked_stdout() and flush_stdout(), standard output checked, are qkv/files.h's (core).

// What a command says of a report it wrote (--html), on standard error, where it stays out of
// --json's way; every command and every kind of model says it the same way:
//   "wrote x.html (38 KB, self-contained: open it in any browser, offline)"
void report_written(const std::string& path, std::size_t bytes);

// Writes `outputs` as one set (qkv::write_outputs: a failure in any leaves none of them), then says
// each on standard error, where it stays out of --json's way: a report (--html) as report_written
// says it, any other file "wrote r.svg (12 KB)"; the files of the options in `said_elsewhere` are
// left for the command to describe (qkv attend prints each .npy with its shape and dtype).
void write_and_say(const std::vector<std::pair<OutputPath, std::string>>& outputs,
                   const std::vector<std::string_view>& said_elsewhere = {});

// A note on stderr before the work, "qkv: note: LINE", when `line` is not empty.
void note(const std::string& line);

}  // namespace qkv::cli
