// ForwardFingerprint: what a forward was computed from, so that attention_backward can refuse the
// saved softmax of another forward (issue 26).
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "qkv/attention.h"

namespace qkv {
namespace {

// Multiply by an odd constant (the golden ratio's bits, 2⁶⁴/φ) and fold the high half down: the
// multiply carries each bit of the word into the bits above it, the fold brings them back, so
// that every input bit reaches every output bit within a few rounds.
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
uint64_t mix(uint64_t x) {
  x *= kGolden;
  return x ^ (x >> 32);
}

// Bytes in 32-byte rounds into four lanes, one 8-byte word each: four independent chains of
// multiplies, so that their latencies overlap and the hash keeps up with reading the memory
// (measured on float32 [8, 8, 64, 64]: a word at a time, one chain, cost as much as the forward).
// Each lane's chain depends on the order of its words; the lanes fold in a fixed order.
class Hasher {
 public:
  void add(uint64_t word) {  // a size or a count
    lanes_[0] = mix(lanes_[0] ^ word);
    ++count_;
  }
  void add_bytes(const unsigned char* p, std::size_t n) {
    uint64_t a = lanes_[0], b = lanes_[1], c = lanes_[2], d = lanes_[3];
    std::size_t i = 0;
    auto round = [&](const uint64_t(&w)[4]) {
      a = mix(a ^ w[0]), b = mix(b ^ w[1]), c = mix(c ^ w[2]), d = mix(d ^ w[3]);
    };
    for (; i + 32 <= n; i += 32) {
      uint64_t w[4];
      std::memcpy(w, p + i, 32);
      round(w);
    }
    if (i < n) {  // the tail, zero-padded (the byte count, added below, tells [x, 0] from [x])
      uint64_t w[4] = {0, 0, 0, 0};
      std::memcpy(w, p + i, n - i);
      round(w);
    }
    lanes_[0] = a, lanes_[1] = b, lanes_[2] = c, lanes_[3] = d;
    count_ += n;
  }
  uint64_t value() const {
    uint64_t h = mix(count_ ^ kGolden);
    for (const uint64_t lane : lanes_) h = mix(h ^ lane);
    return mix(h ^ (h >> 29));
  }

 private:
  uint64_t lanes_[4] = {1, 2, 3, 4};
  uint64_t count_ = 0;
};

// Every element's bytes, in row-major order, a row (the last dimension) at a time: read in place
// where the row is contiguous, else gathered first, so that a strided view and its contiguous
// copy (the same shape, so the same rows) hash alike.
template <class T>
void add_values(const Tensor& t, Hasher& h) {
  int64_t size[4] = {1, 1, 1, 1}, stride[4] = {0, 0, 0, 0};
  const int pad = 4 - t.rank();
  for (int i = 0; i < t.rank(); ++i) {
    size[pad + i] = t.dim(i);
    stride[pad + i] = t.strides()[static_cast<std::size_t>(i)];
  }
  const T* p = t.data<T>();
  const std::size_t row_bytes = static_cast<std::size_t>(size[3]) * sizeof(T);
  std::vector<unsigned char> gathered(stride[3] == 1 ? 0 : row_bytes);
  for (int64_t a = 0; a < size[0]; ++a)
    for (int64_t b = 0; b < size[1]; ++b)
      for (int64_t c = 0; c < size[2]; ++c) {
        const T* row = p + a * stride[0] + b * stride[1] + c * stride[2];
        if (stride[3] == 1) {
          h.add_bytes(reinterpret_cast<const unsigned char*>(row), row_bytes);
          continue;
        }
        for (int64_t d = 0; d < size[3]; ++d)
          std::memcpy(&gathered[static_cast<std::size_t>(d) * sizeof(T)], row + d * stride[3],
                      sizeof(T));
        h.add_bytes(gathered.data(), row_bytes);
      }
}

void add_tensor(const Tensor& t, Hasher& h) { h.add(tensor_values_hash(t)); }

ForwardFingerprint::Input input_of(const Tensor& t) {
  if (!t.defined()) return {};
  return {.dtype = t.dtype(), .shape = t.shape(), .values = tensor_values_hash(t), .defined = true};
}

std::string described(const ForwardFingerprint::Input& in) {
  return std::string(dtype_name(in.dtype)) + " " + shape_str(in.shape);
}

// "from another key: float32 [2, 7, 8], not float32 [2, 6, 8]" and the like; empty when equal.
std::string input_difference(const char* name, const ForwardFingerprint::Input& forward,
                             const ForwardFingerprint::Input& now) {
  const std::string n = name;
  if (forward == now) return "";
  if (!forward.defined) return "without a " + n + ", not with one";
  if (!now.defined) return "with a " + n + ", not without one";
  if (forward.dtype != now.dtype || forward.shape != now.shape)
    return "from another " + n + ": " + described(forward) + ", not " + described(now);
  return "from another " + n + ": the same " + described(now) + " but other values";
}

std::string number(double x, int digits) {
  char s[40];
  std::snprintf(s, sizeof s, "%.*g", digits, x);
  return s;
}

// "0.25, not 0.125": six digits unless the two need all seventeen to differ.
std::string number_pair(double forward, double now) {
  const int digits = number(forward, 6) == number(now, 6) ? 17 : 6;
  return number(forward, digits) + ", not " + number(now, digits);
}

}  // namespace

uint64_t tensor_values_hash(const Tensor& t) {
  if (!t.defined()) return 0;
  Hasher h;
  h.add(static_cast<uint64_t>(t.dtype()) + 1);
  h.add(static_cast<uint64_t>(t.rank()));
  for (const int64_t d : t.shape()) h.add(static_cast<uint64_t>(d));
  switch (t.dtype()) {
    case DType::f32:
      add_values<float>(t, h);
      break;
    case DType::f64:
      add_values<double>(t, h);
      break;
    case DType::b8:
      add_values<bool>(t, h);
      break;
  }
  return h.value();
}

ForwardFingerprint fingerprint_of(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const AttentionOptions& o) {
  ForwardFingerprint f;
  f.recorded = true;
  f.query = input_of(q), f.key = input_of(k), f.value = input_of(v), f.mask = input_of(o.mask);
  Hasher lengths;
  for (const int64_t n : o.key_lengths) lengths.add(static_cast<uint64_t>(n));
  f.key_lengths = o.key_lengths.empty() ? 0 : lengths.value();
  Hasher params;
  for (const Tensor* t : {&o.params.w, &o.params.w_q, &o.params.w_k, &o.params.v})
    add_tensor(*t, params);
  f.params = params.value();
  f.score = o.score;
  const int64_t dk = k.defined() && k.rank() > 0 ? k.dim(k.rank() - 1) : 0;
  f.scale = o.scale.value_or(default_scale(o.score, dk));
  f.normalize = o.normalize;
  f.causal = o.causal;
  f.precision = o.precision;
  return f;
}

std::string fingerprint_difference(const ForwardFingerprint& forward,
                                   const ForwardFingerprint& now) {
  for (const auto& [name, a, b] :
       {std::tuple{"query", &forward.query, &now.query}, std::tuple{"key", &forward.key, &now.key},
        std::tuple{"value", &forward.value, &now.value},
        std::tuple{"mask", &forward.mask, &now.mask}}) {
    const std::string why = input_difference(name, *a, *b);
    if (!why.empty()) return why;
  }
  if (forward.key_lengths != now.key_lengths) return "with other key_lengths";
  if (forward.score != now.score)
    return "with score " + std::string(to_string(forward.score)) + ", not " +
           std::string(to_string(now.score));
  if (forward.params != now.params) return "with other params (the score's learned matrices)";
  if (forward.scale != now.scale)  // both finite: attention() refuses any other
    return "with scale " + number_pair(forward.scale, now.scale);
  if (forward.normalize != now.normalize)
    return "with normalize " + std::string(to_string(forward.normalize)) + ", not " +
           std::string(to_string(now.normalize));
  if (forward.causal != now.causal)
    return "with causal " + std::string(to_string(forward.causal)) + ", not " +
           std::string(to_string(now.causal));
  // A bf16 forward's saved softmax is of the rounded inputs: the fp32 backward would mix the two.
  if (forward.precision != now.precision)
    return "with precision " + std::string(to_string(forward.precision)) + ", not " +
           std::string(to_string(now.precision));
  return "";
}

}  // namespace qkv
