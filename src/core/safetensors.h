// core/safetensors.h — safetensors files: read (mmap) and write named tensors.
//
// Format (https://github.com/huggingface/safetensors):
//   header length N (u64 little-endian) | N bytes of UTF-8 JSON | data
// The JSON maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets into
// the data, C order, little-endian) and may hold "__metadata__": {string: string}.
//
// Validation follows the reference implementation: N ≤ 100 MB and within the file; the header a
// JSON object; byte size = element count × dtype size (overflow-checked); the offsets, sorted,
// cover the data exactly — no gaps, no overlaps, no trailing bytes. On top of it: no duplicate or
// empty names, rank ≤ 4. Every failure is a qkv::Error whose message starts with the file name.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qkv/files.h"
#include "qkv/tensor.h"

namespace qkv {

// Tensors are copied out of the file into memory: MiniLM's weights are 90 MB.
inline constexpr InputSpec kSafetensorsInput{.expected = "a regular .safetensors file",
                                             .max_bytes = uint64_t{16} << 30};

struct SafetensorsFile {
  std::vector<std::string> names;               // in the order the header lists them
  std::map<std::string, Tensor> tensors;        // the F32, F16, BF16, F64 and BOOL ones
  std::map<std::string, std::string> skipped;   // name → dtype of integer and F8 tensors
  std::map<std::string, std::string> metadata;  // "__metadata__"; empty when absent
};

// Reads a safetensors file through a read-only mmap. F32, F16 and BF16 become float32 tensors
// (F16 and BF16 converted exactly), F64 float64, BOOL bool; integer and F8 tensors are validated
// and listed in `skipped`; an unknown dtype is an error naming the tensor. `path` starts every
// error message.
// A path that is not a regular file, or one larger than kSafetensorsInput allows, is refused
// before it is mapped, and so is a header length past the limit or the file's end.
SafetensorsFile read_safetensors(const std::string& path);
// The same from the bytes of a file; `name` (a path or a label) starts every error message.
SafetensorsFile parse_safetensors(std::string_view bytes, std::string_view name);

// The bytes of a safetensors file holding `tensors` in the given order (F32, F64 or BOOL, C order,
// any strides), data contiguous, the header padded with spaces to a multiple of 8 bytes.
std::string encode_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                               const std::map<std::string, std::string>& metadata = {});
// Writes a safetensors file atomically (temporary file, then rename). Throws qkv::Error
// (Kind::runtime) when the file cannot be written.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace qkv
