// Numbers as people read them, for messages of every layer.
#pragma once

#include <cstdint>
#include <string>

namespace qkv {

// An integer with thousands separators: 1234567 → "1,234,567".
std::string grouped(int64_t n);

}  // namespace qkv
