// Standard output, checked: what a command prints reaches its destination or the command fails.
// `qkv explain --json > /dev/full` used to exit 0 having written nothing, and on a full disk it
// wrote 48 KiB of 4.5 MB and exited 0 (issue 26): a stream that fails only sets a flag.
#pragma once

#include <cstddef>
#include <string>

namespace qkv::cli {

// Gives std::cout a buffer of its own on file descriptor 1 that keeps the reason (errno) of the
// first write that fails: C's stdio, beneath std::cout by default, loses it in the flushes
// std::cout makes itself. Line-buffered on a terminal, as stdio is. cli/main.cpp calls it first.
void use_checked_stdout();

// Flushes std::cout; throws qkv::Error (Kind::runtime) when anything printed so far could not be
// written: "cannot write to standard output: No space left on device". cli/main.cpp calls it
// after every command; a command that streams its output (generate's tokens, bench's rows) calls
// it after each piece, so that it stops at the first failure.
void flush_stdout();

// What a command says of a report it wrote (--html), on standard error, where it stays out of
// --json's way; every command and every kind of model says it the same way:
//   "wrote x.html (38 KB, self-contained: open it in any browser, offline)"
void report_written(const std::string& path, std::size_t bytes);

// A file name as --json shows it. JSON holds only UTF-8, and a Linux file name is bytes: one that
// is not UTF-8 (qkv train --out $'\xff.st' --json) made the JSON writer throw after the work was
// done. Its bytes that are not UTF-8 become U+FFFD (�) there; messages and the file keep them.
std::string json_path(const std::string& path);

}  // namespace qkv::cli
