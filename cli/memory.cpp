// Sizes as the user types and reads them; see memory.h.
#include "memory.h"

#include <iostream>

#include "output.h"

namespace qkv::cli {

void add_memory_limit_option(CLI::App& cmd, std::string& value, const std::string& what) {
  const auto check = [](std::string& input) {
    int64_t bytes = 0;
    return size_problem(input, bytes);
  };
  cmd.add_option("--memory-limit", value,
                 "most memory " + what +
                     " may take, e.g. 8G; past it the command refuses before it starts (default: "
                     "half the machine's memory, less under ulimit -v or a cgroup limit)")
      ->type_name("SIZE")
      ->check(CLI::Validator(check, ""));
}

MemoryLimit memory_limit_of(const std::string& value) {
  int64_t bytes = 0;
  if (const std::string problem = size_problem(value, bytes); !value.empty() && !problem.empty())
    throw Error("--memory-limit: " + problem);
  return {.bytes = bytes, .knob = "--memory-limit"};
}

int64_t memory_limit(const std::string& value) { return memory_limit_of(value).value(); }

std::string memory_limit_knob(const std::string& value) { return memory_limit_of(value).named(); }

std::string too_large(int64_t model_bytes, bool float32) {
  return ": the model alone needs about " + bytes_str(model_bytes) +
         (float32 ? " (its weights dequantized to float32, each matrix with a packed copy)"
                  : " (its weights as the file's blocks)") +
         "; or a larger --memory-limit";
}

void require_memory(int64_t need, const std::string& value, const std::string& work,
                    const std::string& expected) {
  const MemoryLimit limit = memory_limit_of(value);
  check_memory(need, limit, work, expected);
  // Work that will take a large share of the machine says so before it starts, so that a user
  // who sees the machine slow down knows why and what to lower.
  if (need >= int64_t{1} << 30)
    note(work + " needs about " + bytes_str(need) + " of memory (the limit is " +
         bytes_str(limit.value()) + ": " + limit.named() + ")");
}

}  // namespace qkv::cli
