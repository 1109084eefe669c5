// GGUF reading and dequantization; see gguf.h for the format and what is checked.
#include "core/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "core/ggml_quants.h"

namespace qkv {

// Where a GGUF file's bytes come from: the file, read where they are asked for (pread through
// InputFile), or bytes already in memory (parse).
class GgufSource {
 public:
  virtual ~GgufSource() = default;
  virtual uint64_t size() const = 0;
  // Exactly n bytes at offset (offset + n ≤ size()).
  virtual void read(uint64_t offset, char* out, std::size_t n) const = 0;
};

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
class FileSource final : public GgufSource {
 public:
  explicit FileSource(const std::string& path) : file_(path, kGgufInput) {}
  uint64_t size() const override { return file_.size(); }
  void read(uint64_t offset, char* out, std::size_t n) const override {
    file_.read_exactly(offset, out, n);
  }

 private:
  InputFile file_;
};

class BytesSource final : public GgufSource {
 public:
  explicit BytesSource(std::string bytes) : bytes_(std::move(bytes)) {}
  uint64_t size() const override { return bytes_.size(); }
  void read(uint64_t offset, char* out, std::size_t n) const override {
    if (n > 0) std::memcpy(out, bytes_.data() + offset, n);
  }

 private:
  std::string bytes_;
};

// The smallest number of bytes one array item of a metadata type takes (a string: its length).
uint64_t item_bytes(uint32_t type) {
  switch (type) {
    case 0:
    case 1:
    case 7:
      return 1;
    case 2:
    case 3:
      return 2;
    case 4:
    case 5:
    case 6:
      return 4;
    default:  // 8 (a string's u64 length), 9, 10, 11, 12
      return 8;
  }
}

// A cursor over the header that refuses to read past the end of the file or of the header's
// limit, naming what it was reading. The header is read from the source in chunks as the cursor
// reaches them, so that a file is never read further than its header goes.
class Reader {
 public:
  Reader(const GgufSource& source, const std::string& name)
      : source_(source), name_(name), end_(std::min(source.size(), kMaxGgufHeaderBytes)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(name_ + ": " + what + "; expected a valid GGUF file", Error::Kind::runtime);
  }
  uint64_t at() const { return at_; }
  // Bytes the header may still take from here: to the end of the file, or of the header's limit.
  uint64_t left() const { return end_ - at_; }
  // Why a claim of more than left() bytes is a lie: "more than the file holds" or "more than a
  // GGUF header may hold (64 MiB)".
  std::string beyond() const {
    return end_ == source_.size()
               ? "more than the file holds"
               : "more than a GGUF header may hold (" + byte_count_str(kMaxGgufHeaderBytes) + ")";
  }

  template <class T>
  T number(const char* what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }

  std::string string(const char* what) {
    const uint64_t n = number<uint64_t>(what);
    if (n > left())
      fail(std::string(what) + " at byte " + std::to_string(at_ - 8) + " claims " +
           std::to_string(n) + " bytes, " + beyond());
    return std::string(take(n, what), n);
  }

  nlohmann::json value(uint32_t type, const std::string& key, int depth = 0) {
    switch (type) {
      case 0:
        return number<uint8_t>("a u8");
      case 1:
        return number<int8_t>("an i8");
      case 2:
        return number<uint16_t>("a u16");
      case 3:
        return number<int16_t>("an i16");
      case 4:
        return number<uint32_t>("a u32");
      case 5:
        return number<int32_t>("an i32");
      case 6:
        return number<float>("an f32");
      case 7: {
        const uint8_t b = number<uint8_t>("a bool");
        if (b > 1) fail("metadata \"" + key + "\" holds bool " + std::to_string(b));
        return b == 1;
      }
      case 8:
        return string("a string");
      case 9: {
        if (depth > 0) fail("metadata \"" + key + "\" nests arrays");
        const uint32_t item = number<uint32_t>("an array's type");
        const uint64_t n = number<uint64_t>("an array's length");
        // Every item takes at least item_bytes: a longer array cannot fit in the rest of the
        // header. Items in memory take more than in the file (a JSON value each), so their total
        // is bounded as well.
        if (n > kMaxArray || n > left() / item_bytes(item) || n > kMaxItems - items_)
          fail("metadata \"" + key + "\" claims an array of " + std::to_string(n) + " items");
        items_ += n;
        nlohmann::json a = nlohmann::json::array();
        a.get_ref<nlohmann::json::array_t&>().reserve(static_cast<std::size_t>(n));
        for (uint64_t i = 0; i < n; ++i) a.push_back(value(item, key, depth + 1));
        return a;
      }
      case 10:
        return number<uint64_t>("a u64");
      case 11:
        return number<int64_t>("an i64");
      case 12:
        return number<double>("an f64");
    }
    fail("metadata \"" + key + "\" has value type " + std::to_string(type) +
         ", which GGUF does not define");
  }

 private:
  // A vocabulary's arrays (tokens, scores, token types, merges) hold a few hundred thousand items
  // each in the largest models in use; SmolLM2's longest holds 49,152.
  static constexpr uint64_t kMaxArray = uint64_t{1} << 21;
  static constexpr uint64_t kMaxItems = uint64_t{1} << 22;  // all arrays together

  // The next n bytes of the header (n ≤ left() or a failure naming `what`), read from the source
  // in chunks of at least 1 MiB as the cursor reaches them.
  const char* take(uint64_t n, const char* what) {
    if (n > left()) {
      if (end_ == source_.size())
        fail(std::string("the file ends inside ") + what + " at byte " + std::to_string(at_));
      fail(std::string("the header runs past ") + byte_count_str(kMaxGgufHeaderBytes) +
           " (inside " + what + " at byte " + std::to_string(at_) +
           "), more than a GGUF header may hold");
    }
    if (at_ + n > buffer_.size()) {
      const uint64_t read_to =
          std::min(end_, std::max(at_ + n, buffer_.size() + (uint64_t{1} << 20)));
      const std::size_t from = buffer_.size();
      buffer_.resize(static_cast<std::size_t>(read_to));
      source_.read(from, buffer_.data() + from, buffer_.size() - from);
    }
    const char* p = buffer_.data() + at_;
    at_ += n;
    return p;
  }

  const GgufSource& source_;
  const std::string& name_;
  uint64_t end_;        // the header cannot reach past this
  std::string buffer_;  // the header's bytes from 0, read so far
  uint64_t at_ = 0;
  uint64_t items_ = 0;  // array items read so far
};

}  // namespace

bool is_gguf_file(const std::string& path) {
  try {
    // Any size: only the first four bytes are read.
    const InputFile in(
        path, {.expected = "a regular file", .max_bytes = std::numeric_limits<uint64_t>::max()});
    if (in.size() < 4) return false;
    char magic[4];
    in.read_exactly(0, magic, 4);
    return std::memcmp(magic, "GGUF", 4) == 0;
  } catch (const Error&) {
    return false;  // missing, unreadable, or not a regular file
  }
}

std::string gguf_value_str(const nlohmann::json& value) {
  if (value.is_number_float() && !std::isfinite(value.get<double>()))
    return std::isnan(value.get<double>()) ? "NaN" : value.get<double>() > 0 ? "+inf" : "-inf";
  if (value.is_array())
    return "an array of " + std::to_string(value.size()) + (value.size() == 1 ? " item" : " items");
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  constexpr std::size_t kLine = 60;
  if (text.size() > kLine) {
    std::size_t cut = kLine;  // not inside a UTF-8 character
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    text = text.substr(0, cut) + "…";
  }
  return text;
}

GgufFile GgufFile::open(const std::string& path) {
  return read(std::make_shared<const FileSource>(path), path);
}

GgufFile GgufFile::parse(std::string bytes, std::string name) {
  return read(std::make_shared<const BytesSource>(std::move(bytes)), std::move(name));
}

GgufFile GgufFile::read(std::shared_ptr<const GgufSource> source, std::string name) {
  GgufFile f;
  f.name_ = std::move(name);
  f.source_ = std::move(source);
  const uint64_t file_size = f.source_->size();
  Reader r(*f.source_, f.name_);

  if (r.number<uint32_t>("the magic number") != kMagic) r.fail("it does not start with \"GGUF\"");
  f.version_ = r.number<uint32_t>("the version");
  if (f.version_ != 2 && f.version_ != 3)
    r.fail("version " + std::to_string(f.version_) + " (qkv reads versions 2 and 3)");
  const uint64_t tensor_count = r.number<uint64_t>("the tensor count");
  const uint64_t kv_count = r.number<uint64_t>("the metadata count");
  // Each entry takes more than 8 bytes of the header: counts beyond its room are lies.
  const uint64_t room = std::min(file_size, kMaxGgufHeaderBytes);
  if (tensor_count > room / 8 || kv_count > room / 8)
    r.fail("it claims " + std::to_string(tensor_count) + " tensors and " +
           std::to_string(kv_count) + " metadata entries in " + std::to_string(file_size) +
           " bytes");

  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key = r.string("a metadata key");
    if (key.empty()) r.fail("metadata entry " + std::to_string(i) + " has an empty key");
    if (f.metadata_.contains(key)) r.fail("metadata \"" + key + "\" appears twice");
    const uint32_t type = r.number<uint32_t>("a metadata type");
    f.metadata_[key] = r.value(type, key);
  }

  uint64_t alignment = 32;
  if (f.metadata_.contains("general.alignment")) {
    const nlohmann::json& a = f.metadata_["general.alignment"];
    if (!a.is_number_unsigned() || a.get<uint64_t>() == 0 || a.get<uint64_t>() > (1u << 20) ||
        (a.get<uint64_t>() & (a.get<uint64_t>() - 1)) != 0)
      r.fail("general.alignment is " + gguf_value_str(a) + "; expected a power of two");
    alignment = a.get<uint64_t>();
  }

  std::set<std::string> names;
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo t;
    t.name = r.string("a tensor name");
    if (t.name.empty()) r.fail("tensor " + std::to_string(i) + " has an empty name");
    if (!names.insert(t.name).second) r.fail("tensor \"" + t.name + "\" appears twice");
    const uint32_t dims = r.number<uint32_t>("a tensor's rank");
    if (dims < 1 || dims > 4)
      r.fail("tensor \"" + t.name + "\" has rank " + std::to_string(dims) + "; expected 1 to 4");
    std::vector<uint64_t> ne(dims);
    uint64_t count = 1;
    for (uint32_t d = 0; d < dims; ++d) {
      ne[d] = r.number<uint64_t>("a tensor's dimension");
      if (ne[d] > (uint64_t{1} << 40) || (ne[d] != 0 && count > (uint64_t{1} << 40) / ne[d]))
        r.fail("tensor \"" + t.name + "\" is too large");
      count *= ne[d];
    }
    for (uint32_t d = dims; d-- > 0;) t.shape.push_back(static_cast<int64_t>(ne[d]));
    t.type = r.number<uint32_t>("a tensor's type");
    t.offset = r.number<uint64_t>("a tensor's offset");
    const GgmlBlock block = ggml_block(t.type);
    if (block.bytes == 0)
      r.fail("tensor \"" + t.name + "\" is of " + ggml_type_label(t.type) +
             ", which qkv does not read (it reads " + ggml_types_read() + ")");
    if (ne[0] % static_cast<uint64_t>(block.values) != 0)
      r.fail("tensor \"" + t.name + "\" has rows of " + std::to_string(ne[0]) + " values of " +
             ggml_type_name(t.type) + "; expected a multiple of " + std::to_string(block.values));
    t.bytes = ggml_bytes(t.type, count);
    if (t.offset % alignment != 0)
      r.fail("tensor \"" + t.name + "\" starts at offset " + std::to_string(t.offset) +
             ", not a multiple of the alignment " + std::to_string(alignment));
    f.tensors_.push_back(std::move(t));
  }

  f.data_start_ = (r.at() + alignment - 1) / alignment * alignment;
  if (f.data_start_ > file_size && !f.tensors_.empty())
    r.fail("the tensor data would start at byte " + std::to_string(f.data_start_) +
           ", past the end");
  const uint64_t data_size = file_size > f.data_start_ ? file_size - f.data_start_ : 0;
  std::vector<std::pair<uint64_t, const GgufTensorInfo*>> spans;
  for (const GgufTensorInfo& t : f.tensors_) {
    if (t.offset > data_size || t.bytes > data_size - t.offset)
      r.fail("tensor \"" + t.name + "\" (" + std::to_string(t.bytes) + " bytes at offset " +
             std::to_string(t.offset) + ") runs past the end of the data (" +
             std::to_string(data_size) + " bytes)");
    spans.emplace_back(t.offset, &t);
  }
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i) {
    const GgufTensorInfo& a = *spans[i - 1].second;
    if (a.offset + a.bytes > spans[i].first)
      r.fail("tensors \"" + a.name + "\" and \"" + spans[i].second->name + "\" overlap");
  }
  return f;
}

const nlohmann::json& GgufFile::meta(const std::string& key) const {
  const auto it = metadata_.find(key);
  if (it == metadata_.end())
    throw Error(name_ + ": no metadata \"" + key + "\"; expected it in this kind of model",
                Error::Kind::runtime);
  return *it;
}

const GgufTensorInfo& GgufFile::info(const std::string& tensor) const {
  for (const GgufTensorInfo& t : tensors_)
    if (t.name == tensor) return t;
  throw Error(name_ + ": no tensor \"" + tensor + "\"; expected it in this kind of model",
              Error::Kind::runtime);
}

Tensor GgufFile::tensor(const std::string& name) const {
  const GgufTensorInfo& t = info(name);
  Tensor out(t.shape, DType::f32);
  float* values = out.data<float>();
  const uint64_t at = data_start_ + t.offset;
  if (t.type == static_cast<uint32_t>(GgmlType::f32)) {  // as stored: straight into place
    source_->read(at, reinterpret_cast<char*>(values), static_cast<std::size_t>(t.bytes));
    return out;
  }
  // The others through a buffer of whole blocks (rows of a quantized tensor are whole blocks, so
  // its byte count is too), dequantized as they arrive: the stored bytes are never all in memory.
  const GgmlBlock block = ggml_block(t.type);
  const uint64_t chunk =
      std::max<uint64_t>(block.bytes, (uint64_t{1} << 20) / block.bytes * block.bytes);
  std::string buffer(static_cast<std::size_t>(std::min(chunk, t.bytes)), '\0');
  for (uint64_t done = 0; done < t.bytes;) {
    const uint64_t n = std::min(chunk, t.bytes - done);
    source_->read(at + done, buffer.data(), static_cast<std::size_t>(n));
    dequantize(t.type, reinterpret_cast<const std::byte*>(buffer.data()),
               values + static_cast<int64_t>(done / block.bytes) * block.values,
               static_cast<int64_t>(n / block.bytes) * block.values);
    done += n;
  }
  return out;
}

std::shared_ptr<const AlignedBuffer<std::byte>> GgufFile::blocks(const std::string& name) const {
  const GgufTensorInfo& t = info(name);
  auto out = std::make_shared<AlignedBuffer<std::byte>>(static_cast<std::size_t>(t.bytes));
  source_->read(data_start_ + t.offset, reinterpret_cast<char*>(out->data()),
                static_cast<std::size_t>(t.bytes));
  const int64_t values = static_cast<int64_t>(t.bytes / ggml_block(t.type).bytes) *
                         ggml_block(t.type).values;
  if (const int64_t bad = ggml_first_nonfinite(t.type, out->data(), values); bad >= 0)
    throw Error(name_ + ": tensor \"" + name + "\" holds a NaN or infinite " +
                    (ggml_block(t.type).values == 1 ? "value" : "scale") + " at value " +
                    std::to_string(bad) + "; expected finite weights",
                Error::Kind::runtime);
  return out;
}

std::string gguf_array_str(const nlohmann::json& v) {
  if (!v.is_array() || v.empty()) return gguf_value_str(v);
  const nlohmann::json& item = v.front();
  const std::string kind = item.is_string()           ? "string"
                           : item.is_boolean()        ? "bool"
                           : item.is_number_integer() ? "integer"
                           : item.is_number()         ? "number"
                                                      : "value";
  return "an array of " + std::to_string(v.size()) + " " + kind + (v.size() == 1 ? "" : "s");
}

}  // namespace qkv
