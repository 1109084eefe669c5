// --memory-limit, as the commands that can grow take it (attend, explain, embed, search, train,
// generate, bench model, bench ring): the library sizes the work (qkv/memory.h and each model's
// estimate); the command refuses past the limit before the work starts.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "qkv/memory.h"

namespace qkv::cli {

// Adds --memory-limit SIZE to `cmd` ("8G", "512M", "1.5G", "4096K", or bytes; qkv::size_problem
// checks it while the command line is parsed): the most memory `what` may take.
void add_memory_limit_option(CLI::App& cmd, std::string& value, const std::string& what);
// The limit --memory-limit `value` gives (empty: not given, the default applies).
MemoryLimit memory_limit_of(const std::string& value);
// memory_limit_of(value).value() and .named(): the bytes, and how a refusal names the limit.
int64_t memory_limit(const std::string& value);
std::string memory_limit_knob(const std::string& value);
// Refuses (a usage error, exit 2) when `need` is over the --memory-limit `value`:
//   "WORK needs about 26 GiB of memory, over the limit of 12 GiB (--memory-limit); expected
//    EXPECTED"
// and says on stderr, before it starts, work of 1 GiB or more.
// ": the model alone needs about 0.8 GiB (its weights as the file's blocks); or a larger
// --memory-limit" (with `float32`: "(its weights dequantized to float32, each matrix with a packed
// copy)") — what a refusal adds when a decoder's weights alone pass the limit, so that it does not
// ask for a shorter text that would not help.
std::string too_large(int64_t model_bytes, bool float32);

void require_memory(int64_t need, const std::string& value, const std::string& work,
                    const std::string& expected);

}  // namespace qkv::cli
