// What the command says of the files it writes (the checked standard output it prints through is
// qkv/files.h's).
#pragma once

#include <cstddef>
#include <string>

#include "qkv/files.h"

namespace qkv::cli {

// use_checked_stdout() and flush_stdout(), standard output checked, are qkv/files.h's (core).

// What a command says of a report it wrote (--html), on standard error, where it stays out of
// --json's way; every command and every kind of model says it the same way:
//   "wrote x.html (38 KB, self-contained: open it in any browser, offline)"
void report_written(const std::string& path, std::size_t bytes);

// A file name as --json shows it. JSON holds only UTF-8, and a Linux file name is bytes: one that
// is not UTF-8 (qkv train --out $'\xff.st' --json) made the JSON writer throw after the work was
// done. Its bytes that are not UTF-8 become U+FFFD (�) there; messages and the file keep them.
std::string json_path(const std::string& path);

}  // namespace qkv::cli
