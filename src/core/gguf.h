// core/gguf.h — GGUF files (llama.cpp's model format): read the metadata and the tensors, the
// quantized ones dequantized to float32.
//
// Format (ggml's docs/gguf.md, version 2 and 3; little-endian):
//   "GGUF" | version u32 | tensor count u64 | metadata count u64
//   metadata: key (string) | value type u32 | value      string = length u64 | UTF-8 bytes
//     types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool, 8 string,
//            9 array (item type u32 | count u64 | items), 10 u64, 11 i64, 12 f64
//   tensor infos: name (string) | dims u32 | ne[dims] u64 | type u32 | offset u64
//   padding to `general.alignment` (default 32) | tensor data (each offset aligned, from here)
// ne[0] is the fastest-varying dimension: a tensor of ne = [576, 49152] is [49152, 576] in C
// order, which is the shape GgufTensorInfo::shape gives.
//
// Validation, as the safetensors reader's: every length and count within the file, sizes
// overflow-checked, offsets aligned and inside the data, no two tensors overlapping, no duplicate
// keys or names, rank 1–4, a quantized row a whole number of blocks (32 values, 256 for the
// K-quants), a type qkv does not read named. Every failure is a qkv::Error whose message starts
// with the file name.
//
// Memory: open() reads the header alone, never more than kMaxGgufHeaderBytes of it, and its
// arrays at most 2M items each, 4M together (JSON values in memory take more than their bytes on
// disk); a tensor's bytes are read when tensor() asks for it, a MiB at a time. What a model costs
// is then the weights its reader keeps, which it can size from the header before reading one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/aligned.h"
#include "qkv/files.h"
#include "qkv/tensor.h"

namespace qkv {

// A GGUF model file, of any size: only its header is read whole (at most kMaxGgufHeaderBytes);
// each tensor's bytes are read when the tensor is asked for, so what a model costs in memory is
// its weights as the caller keeps them, which the caller can size from the header first.
inline constexpr InputSpec kGgufInput{.expected = "a regular .gguf file",
                                      .max_bytes = std::numeric_limits<uint64_t>::max()};
// The header — metadata and the table of tensors — is read into memory before anything is
// known about the file: SmolLM2-135M's is 1.8 MB, the largest vocabularies in use (256k tokens
// with their scores, types and merges) make about 20 MB.
inline constexpr uint64_t kMaxGgufHeaderBytes = uint64_t{64} << 20;

// The ggml tensor types qkv reads (ggml.h's numbering), each dequantized to float32 exactly as
// ggml's reference does (ggml-quants.c's dequantize_row_*; learned from it and from the gguf
// package's quants.py, and checked bit for bit against the latter: tests/golden/ggml_quants/).
// Blocks run along a row (ne[0]), which is a whole number of them. Scales d, m, dmin are f16;
// "byte j holds value j low, j + 16 high" means value j in its low nibble, value j + 16 in its
// high one. Q5_*'s qh is a little-endian u32 whose bit i is value i's fifth bit.
// The K-quants are super-blocks of 256 values in 8 sub-blocks of 32, or 16 of 16 (Q6_K). Q4_K and
// Q5_K pack each sub-block's scale sc and minimum m as 6 bits in 12 bytes s[0..11]: for
// sub-block j < 4, sc = s[j] & 63 and m = s[j + 4] & 63; for j ≥ 4, sc = (s[j + 4] & 15) |
// (s[j − 4] >> 6) << 4 and m = (s[j + 4] >> 4) | (s[j] >> 6) << 4. Their values come 64 at a time
// from 32 bytes of qs: the low nibbles are sub-block 2i, the high ones 2i + 1.
// Every product of scales and q is exact in float32 (at most 24 significant bits): a value is
// rounded once, where a minimum is added, so that results match ggml's to the bit.
enum class GgmlType : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,   // 32 values, 18 bytes: d | qs[16], byte j holds value j low, j + 16 high;
              // x = (q − 8)·d
  q4_1 = 3,   // 32 values, 20 bytes: d | m | qs[16] as Q4_0; x = q·d + m
  q5_0 = 6,   // 32 values, 22 bytes: d | qh[4] | qs[16] as Q4_0; q = nibble | qh bit << 4,
              // x = (q − 16)·d
  q5_1 = 7,   // 32 values, 24 bytes: d | m | qh[4] | qs[16] as Q5_0; x = q·d + m
  q8_0 = 8,   // 32 values, 34 bytes: d | 32 int8 q; x = q·d
  q4_k = 12,  // 256 values, 144 bytes: d | dmin | scales[12] | qs[128]; value 64i + l (l < 32)
              // is qs[32i + l] low, 64i + 32 + l its high; x = (d·sc)·q − dmin·m
  q5_k = 13,  // 256 values, 176 bytes: d | dmin | scales[12] | qh[32] | qs[128] as Q4_K, plus 16
              // where bit 2i of qh[l] is set (value 64i + l), bit 2i + 1 (value 64i + 32 + l)
  q6_k = 14,  // 256 values, 210 bytes: ql[128] | qh[64] | int8 sc[16] | d; in half h (128
              // values), value 32k + l (k < 4, l < 32): 4 low bits from ql[64h + 32·(k & 1) + l]
              // (low nibble for k < 2, high for k ≥ 2), 2 high bits (qh[32h + l] >> 2k) & 3;
              // x = (d·sc[8h + 2k + l / 16])·(q − 32)
  bf16 = 30,
};
// ggml's name of a type: "Q4_K", "F32", and "Q2_K", "IQ4_NL", ... for ggml's types qkv does not
// read; "type 99" for a number ggml does not define.
std::string ggml_type_name(uint32_t type);

struct GgufTensorInfo {
  std::string name;
  Shape shape;          // C order: ne reversed
  uint32_t type = 0;    // a GgmlType
  uint64_t offset = 0;  // from the start of the tensor data
  uint64_t bytes = 0;
};

class GgufSource;  // where the bytes come from: the file, or bytes in memory

class GgufFile {
 public:
  // Reads and validates the header — the metadata and the table of tensors, checked against the
  // file's size — but no tensor's bytes (kGgufInput: a FIFO or device is refused before a byte).
  // The file stays open for tensor().
  static GgufFile open(const std::string& path);
  // The same from bytes in memory; `name` starts every message.
  static GgufFile parse(std::string bytes, std::string name);

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }

  // Metadata values as JSON: integers and floats as numbers, bool, strings (raw bytes), arrays.
  bool has(const std::string& key) const { return metadata_.contains(key); }
  const nlohmann::json& meta(const std::string& key) const;  // a qkv::Error naming key and file
  const nlohmann::json& metadata() const { return metadata_; }

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo& info(const std::string& tensor) const;  // a qkv::Error when absent
  // The tensor dequantized to float32, in C order: its bytes read from the file now, a block of
  // at most 1 MiB at a time (F32 straight into the result).
  Tensor tensor(const std::string& tensor) const;
  // The tensor's bytes as stored (its ggml type's blocks, row after row), read now into a 64-byte
  // aligned buffer; an Error naming the file, the tensor and the block when a block's scale (or,
  // for F32, F16 and BF16, a value) is NaN or ±∞ — every value of a block with finite scales is
  // finite.
  std::shared_ptr<const AlignedBuffer<std::byte>> blocks(const std::string& tensor) const;

 private:
  static GgufFile read(std::shared_ptr<const GgufSource> source, std::string name);

  std::string name_;
  std::shared_ptr<const GgufSource> source_;
  uint32_t version_ = 0;
  uint64_t data_start_ = 0;
  nlohmann::json metadata_ = nlohmann::json::object();
  std::vector<GgufTensorInfo> tensors_;
};

// n values of a tensor of `type` (n a whole number of blocks for quantized types: 32 values, or
// 256 for the K-quants) from `data`, to float32. Throws qkv::Error for a type qkv does not read,
// or an n that is not whole blocks.
void dequantize(uint32_t type, const std::byte* data, float* out, int64_t n);
// The first of n values (whole blocks) of `type` at `data` that is not finite in every reading
// — a float value, or a block's f16 scale or minimum — by its index (a block's first value);
// -1 when there is none.
int64_t ggml_first_nonfinite(uint32_t type, const std::byte* data, int64_t n);
// Bytes that n values of `type` take; 0 for an unknown type or n not a whole number of blocks.
uint64_t ggml_bytes(uint32_t type, uint64_t n);

// Whether `path` is a regular file that starts with GGUF's magic bytes "GGUF", whatever its name
// (Ollama keeps its models as blobs named by their hash). Opened through InputFile: a FIFO, a
// device or a directory is neither waited on nor read, and is no GGUF file.
bool is_gguf_file(const std::string& path);

// A metadata value as a message shows it: NaN and ±∞ spelled out (JSON would print null), a
// string quoted, an array by its item count, anything longer than a line clipped.
std::string gguf_value_str(const nlohmann::json& value);
// The same, an array by what its items are: "an array of 40 integers" (a GGUF array's items are
// of one type), for a message that expects an array of something else.
std::string gguf_array_str(const nlohmann::json& value);

}  // namespace qkv
