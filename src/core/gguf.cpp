// GGUF reading and dequantization; see gguf.h for the format and what is checked.
#include "core/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "core/half.h"

namespace qkv {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr int64_t kBlock = 32;           // values per block of Q4_0, Q4_1, Q8_0
// A metadata array longer than this is refused before it is read: SmolLM2's longest, its
// vocabulary, holds 49,152 strings; the largest vocabularies in use hold about 256k.
constexpr uint64_t kMaxArray = uint64_t{1} << 24;

// Bytes of one block (quantized) or one value (float) of a type qkv reads; 0 for others.
uint64_t block_bytes(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::f32:
      return 4;
    case GgmlType::f16:
    case GgmlType::bf16:
      return 2;
    case GgmlType::q4_0:
      return 2 + kBlock / 2;
    case GgmlType::q4_1:
      return 4 + kBlock / 2;
    case GgmlType::q8_0:
      return 2 + kBlock;
  }
  return 0;
}

bool quantized(uint32_t type) {
  const auto t = static_cast<GgmlType>(type);
  return t == GgmlType::q4_0 || t == GgmlType::q4_1 || t == GgmlType::q8_0;
}

// A cursor over the header that refuses to read past the end, naming what it was reading.
class Reader {
 public:
  Reader(std::string_view bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(name_ + ": " + what + "; expected a valid GGUF file", Error::Kind::runtime);
  }
  uint64_t at() const { return at_; }

  template <class T>
  T number(const char* what) {
    if (bytes_.size() - at_ < sizeof(T))
      fail(std::string("the file ends inside ") + what + " at byte " + std::to_string(at_));
    T v;
    std::memcpy(&v, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }

  std::string string(const char* what) {
    const uint64_t n = number<uint64_t>(what);
    if (n > bytes_.size() - at_)
      fail(std::string(what) + " at byte " + std::to_string(at_ - 8) + " claims " +
           std::to_string(n) + " bytes, more than the file holds");
    std::string s(bytes_.substr(at_, n));
    at_ += n;
    return s;
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
        // Every item takes at least one byte: a longer array cannot fit in the rest of the file.
        if (n > kMaxArray || n > bytes_.size() - at_)
          fail("metadata \"" + key + "\" claims an array of " + std::to_string(n) + " items");
        nlohmann::json a = nlohmann::json::array();
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
  std::string_view bytes_;
  const std::string& name_;
  uint64_t at_ = 0;
};

void dequantize_blocks(GgmlType type, const uint8_t* p, float* out, int64_t blocks) {
  const auto f16 = [](const uint8_t* q) {
    return half_to_float(static_cast<uint16_t>(q[0] | (q[1] << 8)));
  };
  for (int64_t b = 0; b < blocks; ++b, out += kBlock) {
    if (type == GgmlType::q8_0) {
      const float d = f16(p);
      for (int64_t j = 0; j < kBlock; ++j)
        out[j] = static_cast<float>(static_cast<int8_t>(p[2 + j])) * d;
      p += 2 + kBlock;
      continue;
    }
    // Q4_0 and Q4_1: byte j holds value j in its low nibble and value j + 16 in its high one.
    const float d = f16(p);
    const bool with_min = type == GgmlType::q4_1;
    const float m = with_min ? f16(p + 2) : 0.0f;
    const uint8_t* q = p + (with_min ? 4 : 2);
    const int offset = with_min ? 0 : 8;
    for (int64_t j = 0; j < kBlock / 2; ++j) {
      out[j] = static_cast<float>((q[j] & 0x0F) - offset) * d + m;
      out[j + kBlock / 2] = static_cast<float>((q[j] >> 4) - offset) * d + m;
    }
    p += with_min ? 4 + kBlock / 2 : 2 + kBlock / 2;
  }
}

}  // namespace

std::string ggml_type_name(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::f32:
      return "F32";
    case GgmlType::f16:
      return "F16";
    case GgmlType::bf16:
      return "BF16";
    case GgmlType::q4_0:
      return "Q4_0";
    case GgmlType::q4_1:
      return "Q4_1";
    case GgmlType::q8_0:
      return "Q8_0";
  }
  return "type " + std::to_string(type);
}

uint64_t ggml_bytes(uint32_t type, uint64_t n) {
  const uint64_t unit = block_bytes(type);
  if (unit == 0) return 0;
  if (!quantized(type)) return n > std::numeric_limits<uint64_t>::max() / unit ? 0 : n * unit;
  if (n % kBlock != 0) return 0;
  return n / kBlock * unit;  // ≤ n·unit/32: no overflow
}

void dequantize(uint32_t type, const std::byte* data, float* out, int64_t n) {
  const auto* p = reinterpret_cast<const uint8_t*>(data);
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::f32:
      std::memcpy(out, p, static_cast<std::size_t>(n) * 4);
      return;
    case GgmlType::f16:
    case GgmlType::bf16:
      for (int64_t i = 0; i < n; ++i) {
        const auto h = static_cast<uint16_t>(p[2 * i] | (p[2 * i + 1] << 8));
        out[i] = type == static_cast<uint32_t>(GgmlType::f16) ? half_to_float(h) : bf16_to_float(h);
      }
      return;
    case GgmlType::q4_0:
    case GgmlType::q4_1:
    case GgmlType::q8_0:
      if (n % kBlock != 0)
        throw Error("dequantize: " + std::to_string(n) + " values of " + ggml_type_name(type) +
                    "; expected a multiple of 32");
      dequantize_blocks(static_cast<GgmlType>(type), p, out, n / kBlock);
      return;
  }
  throw Error("dequantize: " + ggml_type_name(type) +
              " is not a type qkv reads; expected F32, F16, BF16, Q4_0, Q4_1 or Q8_0");
}

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
  return parse(read_input_file(path, kGgufInput), path);
}

GgufFile GgufFile::parse(std::string bytes, std::string name) {
  GgufFile f;
  f.name_ = std::move(name);
  f.bytes_ = std::make_shared<const std::string>(std::move(bytes));
  const std::string_view all = *f.bytes_;
  Reader r(all, f.name_);

  if (r.number<uint32_t>("the magic number") != kMagic) r.fail("it does not start with \"GGUF\"");
  f.version_ = r.number<uint32_t>("the version");
  if (f.version_ != 2 && f.version_ != 3)
    r.fail("version " + std::to_string(f.version_) + " (qkv reads versions 2 and 3)");
  const uint64_t tensor_count = r.number<uint64_t>("the tensor count");
  const uint64_t kv_count = r.number<uint64_t>("the metadata count");
  // Each entry takes more than 8 bytes: counts beyond the file's size are lies.
  if (tensor_count > all.size() / 8 || kv_count > all.size() / 8)
    r.fail("it claims " + std::to_string(tensor_count) + " tensors and " +
           std::to_string(kv_count) + " metadata entries in " + std::to_string(all.size()) +
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
    if (block_bytes(t.type) == 0)
      r.fail("tensor \"" + t.name + "\" is of " + ggml_type_name(t.type) +
             ", which qkv does not read (F32, F16, BF16, Q4_0, Q4_1, Q8_0)");
    if (quantized(t.type) && ne[0] % kBlock != 0)
      r.fail("tensor \"" + t.name + "\" has rows of " + std::to_string(ne[0]) + " values of " +
             ggml_type_name(t.type) + "; expected a multiple of 32");
    t.bytes = ggml_bytes(t.type, count);
    if (t.offset % alignment != 0)
      r.fail("tensor \"" + t.name + "\" starts at offset " + std::to_string(t.offset) +
             ", not a multiple of the alignment " + std::to_string(alignment));
    f.tensors_.push_back(std::move(t));
  }

  f.data_start_ = (r.at() + alignment - 1) / alignment * alignment;
  if (f.data_start_ > all.size() && !f.tensors_.empty())
    r.fail("the tensor data would start at byte " + std::to_string(f.data_start_) +
           ", past the end");
  const uint64_t data_size = all.size() > f.data_start_ ? all.size() - f.data_start_ : 0;
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

std::string_view GgufFile::raw(const std::string& tensor) const {
  const GgufTensorInfo& t = info(tensor);
  return std::string_view(*bytes_).substr(data_start_ + t.offset, t.bytes);
}

Tensor GgufFile::tensor(const std::string& name) const {
  const GgufTensorInfo& t = info(name);
  Tensor out(t.shape, DType::f32);
  dequantize(t.type, reinterpret_cast<const std::byte*>(raw(name).data()), out.data<float>(),
             out.numel());
  return out;
}

}  // namespace qkv
