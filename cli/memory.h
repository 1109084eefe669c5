// cli/memory.h — --memory-limit, as the commands that can grow take it (attend, explain, embed,
// search, train, generate, bench model, bench ring): the library sizes the work (qkv/memory.h and
// each model's estimate); the command refuses past the limit before the work starts.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "qkv/memory.h"

namespace qkv::cli {

// "8G", "512M", "1.5G", "4096K", or bytes, at most 2⁶³ − 1; throws qkv::Error naming `option`
// otherwise: "--memory-limit: lots is not a size; expected a positive number of bytes with K, M,
// G or T, e.g. 8G".
int64_t parse_bytes(const std::string& option, const std::string& text);
// The same check while the command line is parsed (--memory-limit has it).
CLI::Validator size_validator();

// Adds --memory-limit SIZE to `cmd`: the most memory `what` may take.
void add_memory_limit_option(CLI::App& cmd, std::string& value, const std::string& what);
// The limit --memory-limit gives: its value, or half the machine's memory when it is empty.
int64_t memory_limit(const std::string& value);
// How a refusal names the limit: "--memory-limit", or where the option was left out and the
// default is bounded by ulimit -v or a cgroup, that bound ("--memory-limit not given: 3/4 of the
// 1.8 GiB of address space ulimit -v leaves").
std::string memory_limit_knob(const std::string& value);
// Refuses (a usage error, exit 2) when `need` is over the --memory-limit `value`:
//   "WORK needs about 26 GiB of memory, over the limit of 12 GiB (--memory-limit); expected
//    EXPECTED"
void require_memory(int64_t need, const std::string& value, const std::string& work,
                    const std::string& expected);

}  // namespace qkv::cli
