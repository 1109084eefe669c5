// safetensors: https://github.com/huggingface/safetensors (format and the reference validation in
// safetensors/src/tensor.rs). Every check runs on the header before any data byte is read, so a
// corrupt file is an error and never an out-of-bounds read.
#include "core/safetensors.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <set>

#include "core/half.h"
#include "qkv/files.h"
#include "qkv/json.h"

namespace qkv {
namespace {

static_assert(std::endian::native == std::endian::little, "qkv's safetensors I/O assumes LE");
static_assert(sizeof(bool) == 1, "qkv's safetensors I/O copies bool bytes");

using Json = nlohmann::ordered_json;  // ordered: names keep the header's order

// The reference implementation's MAX_HEADER_SIZE.
constexpr uint64_t kMaxHeaderSize = 100'000'000;

[[noreturn]] void fail(std::string_view name, const std::string& what,
                       Error::Kind kind = Error::Kind::invalid_argument) {
  throw Error(std::string(name) + ": " + what, kind);
}

// A name or value as JSON text: quoted, with control characters escaped, so messages stay on one
// line; long values are cut.
std::string quoted(const Json& value) {
  std::string text = value.dump();
  if (text.size() > 60) {
    std::size_t cut = 57;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    text = text.substr(0, cut) + "...";
  }
  return text;
}
std::string tensor_label(const std::string& name) { return "tensor " + quoted(Json(name)); }

struct FileDType {
  std::string_view name;  // as in the header
  uint64_t size;          // bytes per element
  DType dtype;            // of the qkv tensor it becomes
  bool loaded = true;     // false: validated, listed in `skipped`, never converted
};
// Every dtype of the format, so that a file is validated whole; integer and 8-bit float tensors
// (BERT checkpoints carry an I64 `position_ids`) are listed, not loaded.
constexpr FileDType kDTypes[] = {
    {"F32", 4, DType::f32}, {"F16", 2, DType::f32},    {"BF16", 2, DType::f32},
    {"F64", 8, DType::f64}, {"BOOL", 1, DType::b8},    {"U8", 1, {}, false},
    {"I8", 1, {}, false},   {"I16", 2, {}, false},     {"U16", 2, {}, false},
    {"I32", 4, {}, false},  {"U32", 4, {}, false},     {"I64", 8, {}, false},
    {"U64", 8, {}, false},  {"F8_E4M3", 1, {}, false}, {"F8_E5M2", 1, {}, false}};

struct Entry {
  std::string name;
  const FileDType* dtype;
  Shape shape;
  uint64_t begin, end;
};

Entry parse_entry(std::string_view file, const std::string& name, const Json& info) {
  const std::string label = tensor_label(name);
  auto bad = [&](const std::string& what) { fail(file, label + ": " + what); };
  if (name.empty()) fail(file, "a tensor has an empty name");
  if (!info.is_object()) bad("entry is " + quoted(info) + "; expected an object");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!info.contains(key)) bad(std::string("has no \"") + key + "\"");
  Entry entry{.name = name};

  const Json& dtype = info["dtype"];
  if (!dtype.is_string()) bad("dtype is " + quoted(dtype) + "; expected a string");
  for (const FileDType& d : kDTypes)
    if (d.name == dtype.get_ref<const std::string&>()) entry.dtype = &d;
  if (entry.dtype == nullptr)
    bad("dtype " + quoted(dtype) +
        " is not a safetensors dtype; expected F32, F16, BF16, F64, BOOL, an integer or F8 type");

  const Json& shape = info["shape"];
  if (!shape.is_array()) bad("shape is " + quoted(shape) + "; expected an array of integers");
  for (std::size_t i = 0; i < shape.size(); ++i) {
    // Non-negative integers parse as unsigned; "-1", "1.5", "2.0" or "1e3" do not.
    const Json& d = shape[i];
    if (!d.is_number_unsigned() ||
        d.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      bad("shape[" + std::to_string(i) + "] is " + quoted(d) + " in shape " + quoted(shape) +
          "; expected a non-negative integer");
    entry.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
  }
  if (entry.shape.size() > static_cast<std::size_t>(kMaxRank))
    bad("shape " + shape_str(entry.shape) + " has rank " + std::to_string(entry.shape.size()) +
        "; expected rank <= " + std::to_string(kMaxRank));

  const Json& offsets = info["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned() || offsets[0].get<uint64_t>() > offsets[1].get<uint64_t>())
    bad("data_offsets is " + quoted(offsets) + "; expected [begin, end], integers, begin <= end");
  entry.begin = offsets[0].get<uint64_t>();
  entry.end = offsets[1].get<uint64_t>();

  // Byte size = element count × dtype size, every product checked for overflow.
  uint64_t bytes = entry.dtype->size;
  for (int64_t d : entry.shape) {
    if (d != 0 && bytes > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d))
      bad("shape " + shape_str(entry.shape) + " of " + std::string(entry.dtype->name) +
          " overflows a 64-bit byte count");
    bytes *= static_cast<uint64_t>(d);
  }
  if (bytes != entry.end - entry.begin)
    bad("shape " + shape_str(entry.shape) + " of " + std::string(entry.dtype->name) + " needs " +
        std::to_string(bytes) + " bytes; data_offsets " + quoted(offsets) + " hold " +
        std::to_string(entry.end - entry.begin));
  return entry;
}

// Parses the header JSON, rejecting duplicate keys (nlohmann keeps the last one silently) and
// nesting deeper than any header has (qkv/json.h).
Json parse_header(std::string_view file, std::string_view text) {
  if (const std::size_t at = invalid_utf8_at(text); at != std::string_view::npos)
    fail(file, "the header is not valid UTF-8 (byte " + std::to_string(at) + " of the header)");
  std::vector<std::set<std::string>> open_objects;  // the keys seen in each object being parsed
  std::string duplicate;
  bool has_duplicate = false;
  auto callback = [&](int, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == Json::parse_event_t::key && !has_duplicate && !open_objects.empty() &&
               !open_objects.back().insert(parsed.get<std::string>()).second) {
      has_duplicate = true;
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  Json header;
  try {
    header = parse_json<Json>(text, callback);
  } catch (const JsonError& e) {
    fail(file, std::string("the header ") + e.what());
  }
  if (has_duplicate) fail(file, "the header has the key " + quoted(Json(duplicate)) + " twice");
  if (!header.is_object())
    fail(file, "the header is " + quoted(header) + "; expected a JSON object");
  return header;
}

Tensor copy_tensor(const Entry& entry, const unsigned char* bytes) {
  Tensor tensor(entry.shape, entry.dtype->dtype);
  const int64_t n = tensor.numel();
  if (n == 0) return tensor;
  if (entry.dtype->name == "F16" || entry.dtype->name == "BF16") {
    float* out = tensor.data<float>();
    const bool half = entry.dtype->name == "F16";
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, bytes + 2 * i, 2);
      out[i] = half ? half_to_float(h) : bf16_to_float(h);
    }
  } else if (entry.dtype->dtype == DType::b8) {
    bool* out = tensor.data<bool>();  // any non-zero byte is true; only 0 and 1 are valid bools
    for (int64_t i = 0; i < n; ++i) out[i] = bytes[i] != 0;
  } else if (entry.dtype->dtype == DType::f64) {
    std::memcpy(tensor.data<double>(), bytes, static_cast<std::size_t>(n) * 8);
  } else {
    std::memcpy(tensor.data<float>(), bytes, static_cast<std::size_t>(n) * 4);
  }
  return tensor;
}

// The header length (the first 8 bytes) against the reference's limit and the file's size.
uint64_t checked_header_length(std::string_view first8, uint64_t file_size, std::string_view name) {
  if (file_size < 8)
    fail(name, std::to_string(file_size) + " bytes; expected at least 8 (the header length)");
  uint64_t n;
  std::memcpy(&n, first8.data(), 8);
  if (n > kMaxHeaderSize)
    fail(name, "header length " + std::to_string(n) + " exceeds the limit of " +
                   std::to_string(kMaxHeaderSize) + " bytes");
  if (n > file_size - 8)
    fail(name, "header length " + std::to_string(n) + " runs past the end of the file (" +
                   std::to_string(file_size - 8) + " bytes after the length)");
  return n;
}

// The file's bytes, mapped read-only, once the file is known to be a regular file whose header
// length makes sense. (A file truncated by another process while mapped would fault; safetensors
// readers share that limit of mmap.)
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const InputFile file(path, kSafetensorsInput);
    size_ = static_cast<std::size_t>(file.size());
    char first8[8] = {};
    if (size_ >= 8) file.read_exactly(0, first8, 8);
    checked_header_length({first8, 8}, size_, path);
    void* map = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
    // No room in the address space (ulimit -v) is memory running out, as std::bad_alloc says it,
    // not a fault of the file: it was reported as "the default model is damaged" (issue 26).
    if (map == MAP_FAILED && errno == ENOMEM) throw std::bad_alloc();
    if (map == MAP_FAILED) fail(path, std::string("cannot map: ") + std::strerror(errno));
    data_ = map;
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

std::string encode(const std::vector<std::pair<std::string, Tensor>>& tensors,
                   const std::map<std::string, std::string>& metadata, std::string_view label) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<Tensor> contiguous;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty()) fail(label, "a tensor has an empty name");
    if (name == "__metadata__") fail(label, "a tensor is named \"__metadata__\"");
    if (header.contains(name)) fail(label, "the name " + quoted(Json(name)) + " is used twice");
    if (!tensor.defined()) fail(label, tensor_label(name) + " is undefined");
    const std::string_view dtype = tensor.dtype() == DType::f32   ? "F32"
                                   : tensor.dtype() == DType::f64 ? "F64"
                                                                  : "BOOL";
    const uint64_t bytes = static_cast<uint64_t>(tensor.numel()) * dtype_size(tensor.dtype());
    header[name] = {
        {"dtype", dtype}, {"shape", tensor.shape()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    contiguous.push_back(tensor.contiguous());
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception&) {
    fail(label, "a tensor name or metadata string is not valid UTF-8");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  out += text;
  out.reserve(out.size() + offset);
  for (const Tensor& t : contiguous) {
    const auto* data = t.dtype() == DType::f32   ? static_cast<const void*>(t.data<float>())
                       : t.dtype() == DType::f64 ? static_cast<const void*>(t.data<double>())
                                                 : static_cast<const void*>(t.data<bool>());
    out.append(static_cast<const char*>(data),
               static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()));
  }
  return out;
}

}  // namespace

SafetensorsFile parse_safetensors(std::string_view bytes, std::string_view name) {
  const uint64_t n = checked_header_length(bytes.substr(0, 8), bytes.size(), name);
  const Json header = parse_header(name, bytes.substr(8, n));
  const std::string_view data = bytes.substr(8 + n);

  SafetensorsFile file;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (value.is_null()) continue;  // the reference reads it as an Option
      if (!value.is_object())
        fail(name, "__metadata__ is " + quoted(value) + "; expected an object of strings");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string())
          fail(name,
               "__metadata__[" + quoted(Json(k)) + "] is " + quoted(v) + "; expected a string");
        file.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(name, key, value));
    file.names.push_back(key);
  }

  // A tensor placed beyond the data is named first: sorted, it left a gap where it belonged, and
  // the message blamed the tensor after the gap (issue 26's last sweep).
  for (const Entry& e : entries)
    if (e.end > data.size())
      fail(name, tensor_label(e.name) + ": data ends at " + std::to_string(e.end) +
                     " (data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                     "]) but the file holds " + std::to_string(data.size()) + " data bytes");
  // Sorted by offsets, the tensors must tile the data: each begins where the previous one ends.
  std::vector<const Entry*> sorted;
  for (const Entry& e : entries) sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  uint64_t end = 0;
  const Entry* previous = nullptr;
  for (const Entry* e : sorted) {
    const std::string where =
        "data_offsets [" + std::to_string(e->begin) + ", " + std::to_string(e->end) + "]";
    if (e->begin < end)
      fail(name, tensor_label(e->name) + ": " + where + " overlap " + tensor_label(previous->name) +
                     ", which ends at " + std::to_string(end));
    if (e->begin > end)
      fail(name, tensor_label(e->name) + ": " + where + " leave a gap; expected it to begin at " +
                     std::to_string(end) +
                     (previous ? " (the end of " + tensor_label(previous->name) + ")" : ""));
    end = e->end;
    previous = e;
  }
  if (end != data.size())
    fail(name, end > data.size()
                   ? tensor_label(previous->name) + ": data ends at " + std::to_string(end) +
                         " but the file holds " + std::to_string(data.size()) + " data bytes"
                   : "the tensors end at data byte " + std::to_string(end) +
                         " but the file holds " + std::to_string(data.size()) + ": " +
                         std::to_string(data.size() - end) + " trailing bytes");

  const auto* base = reinterpret_cast<const unsigned char*>(data.data());
  for (const Entry& e : entries) {
    if (!e.dtype->loaded) {
      file.skipped.emplace(e.name, std::string(e.dtype->name));
      continue;
    }
    try {
      file.tensors.emplace(e.name, copy_tensor(e, base + e.begin));
    } catch (const Error& error) {  // e.g. a zero-size shape whose other dimensions are huge
      fail(name, tensor_label(e.name) + ": " + error.what());
    }
  }
  return file;
}

SafetensorsFile read_safetensors(const std::string& path) {
  const MappedFile file(path);
  return parse_safetensors(file.bytes(), path);
}

std::string encode_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  return encode(tensors, metadata, "encode_safetensors");
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_files_atomically({{path, encode(tensors, metadata, path)}});
}

}  // namespace qkv
