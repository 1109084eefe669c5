// core/ggml_quants.h — the block sizes of the ggml types qkv reads, for the GGUF reader's checks
// and its reads of whole blocks. The types, their block layouts and dequantize() are in gguf.h.
#pragma once

#include <cstdint>
#include <string>

namespace qkv {

// One block of a ggml type: `values` numbers stored in `bytes` bytes. A float type's block is one
// value (F32: {1, 4}); Q4_0 … Q8_0 hold 32 values a block, the K-quants 256. {0, 0} for a type
// qkv does not read.
struct GgmlBlock {
  int64_t values = 0;
  uint64_t bytes = 0;
};
GgmlBlock ggml_block(uint32_t type);

// "type 10 (Q2_K)", "type 99": a type as a refusal names it, by number and ggml's name.
std::string ggml_type_label(uint32_t type);

// "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K": what messages list.
const char* ggml_types_read();

}  // namespace qkv
