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
// keys or names, rank 1–4, a quantized row a whole number of blocks, an unknown type named. Every
// failure is a qkv::Error whose message starts with the file name.
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

// The ggml tensor types qkv reads (ggml.h's numbering).
enum class GgmlType : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,  // blocks of 32: f16 scale d, 16 bytes of 4-bit q; x = (q − 8)·d
  q4_1 = 3,  // blocks of 32: f16 scale d, f16 minimum m, 16 bytes of 4-bit q; x = q·d + m
  q8_0 = 8,  // blocks of 32: f16 scale d, 32 int8 q; x = q·d
  bf16 = 30,
};
// "Q4_1", "F32", ...; "type 17" for one qkv does not read.
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

 private:
  static GgufFile read(std::shared_ptr<const GgufSource> source, std::string name);

  std::string name_;
  std::shared_ptr<const GgufSource> source_;
  uint32_t version_ = 0;
  uint64_t data_start_ = 0;
  nlohmann::json metadata_ = nlohmann::json::object();
  std::vector<GgufTensorInfo> tensors_;
};

// n values of a tensor of `type` (n a whole number of blocks for quantized types) from `data`,
// to float32. Throws qkv::Error for a type qkv does not read.
void dequantize(uint32_t type, const std::byte* data, float* out, int64_t n);
// Bytes that n values of `type` take; 0 for an unknown type or n not a whole number of blocks.
uint64_t ggml_bytes(uint32_t type, uint64_t n);

// Whether `path` is a regular file that starts with GGUF's magic bytes "GGUF", whatever its name
// (Ollama keeps its models as blobs named by their hash). Opened through InputFile: a FIFO, a
// device or a directory is neither waited on nor read, and is no GGUF file.
bool is_gguf_file(const std::string& path);

// A metadata value as a message shows it: NaN and ±∞ spelled out (JSON would print null), a
// string quoted, an array by its item count, anything longer than a line clipped.
std::string gguf_value_str(const nlohmann::json& value);

}  // namespace qkv
