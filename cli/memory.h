// cli/memory.h — memory sizes as `qkv attend --memory-limit` reads and prints them.
#pragma once

#include <cstdint>
#include <string>

namespace qkv::cli {

// "8G", "512M", "1.5G", "4096K", or bytes; throws qkv::Error naming `option` otherwise.
int64_t parse_bytes(const std::string& option, const std::string& text);
// Half the machine's physical memory: the default --memory-limit.
int64_t default_memory_limit();
// "9.7 GiB", "312 MiB", "4 KiB".
std::string bytes_str(int64_t bytes);

}  // namespace qkv::cli
