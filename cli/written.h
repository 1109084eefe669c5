// cli/written.h — the files a command writes, as one set, and what it says of each.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qkv/files.h"

namespace qkv::cli {

// Writes `outputs` as one set (qkv::write_outputs: a failure in any leaves none of them), then says
// each on standard error, where it stays out of --json's way: a report (--html) as report_written
// says it, "wrote x.html (38 KB, self-contained: open it in any browser, offline)", any other file
// "wrote r.svg (12 KB)"; the files of the options in `said_elsewhere` are left for the command to
// describe (qkv attend prints each .npy with its shape and dtype, after the explanation).
void write_and_say(const std::vector<std::pair<OutputPath, std::string>>& outputs,
                   const std::vector<std::string_view>& said_elsewhere = {});

}  // namespace qkv::cli
