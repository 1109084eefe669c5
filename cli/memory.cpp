// cli/memory.cpp — sizes as the user types and reads them; see memory.h.
#include "memory.h"

#include <cstdint>
#include <iostream>

#include "qkv/tensor.h"

namespace qkv::cli {

namespace {

// Work of at least this estimate is announced before it starts (require_memory).
constexpr int64_t kNoteBytes = int64_t{1} << 30;

}  // namespace

int64_t parse_bytes(const std::string& option, const std::string& text) {
  int64_t bytes = 0;
  if (const std::string problem = size_problem(text, bytes); !problem.empty())
    throw Error(option + ": " + problem);
  return bytes;
}

CLI::Validator size_validator() {
  return CLI::Validator(
      [](std::string& input) {
        int64_t bytes = 0;
        return size_problem(input, bytes);
      },
      "");
}

void add_memory_limit_option(CLI::App& cmd, std::string& value, const std::string& what) {
  cmd.add_option("--memory-limit", value,
                 "most memory " + what + " may take, e.g. 8G; past it the command refuses " +
                     "before it starts (default: half the machine's memory, less under ulimit -v "
                     "or a cgroup "
                     "limit)")
      ->type_name("SIZE")
      ->check(size_validator());
}

int64_t memory_limit(const std::string& value) {
  return value.empty() ? default_memory_limit() : parse_bytes("--memory-limit", value);
}

std::string memory_limit_knob(const std::string& value) {
  if (!value.empty()) return "--memory-limit";
  const std::string bound = default_memory_limit_bound();
  return "--memory-limit not given: " + (bound.empty() ? "half the machine's memory" : bound);
}

void require_memory(int64_t need, const std::string& value, const std::string& work,
                    const std::string& expected) {
  const int64_t limit = memory_limit(value);
  check_memory(need, limit, work, memory_limit_knob(value), expected);
  // Work that will take a large share of the machine says so before it starts, so that a user
  // who sees the machine slow down knows why and what to lower.
  if (need >= kNoteBytes)
    std::cerr << "qkv: note: " << work << " needs about " << bytes_str(need)
              << " of memory (the limit is " << bytes_str(limit) << ": " << memory_limit_knob(value)
              << ")\n"
              << std::flush;
}

}  // namespace qkv::cli
