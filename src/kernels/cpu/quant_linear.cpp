// quant_linear.h: the two products (float32 on dequantized panels, int8 on the blocks), the
// quantization of x's rows, and the portable int8 dot product. The SIMD int8 dots are in
// quant_dot.cpp.
#include "kernels/cpu/quant_linear.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/ggml_quants.h"
#include "core/gguf.h"
#include "core/half.h"
#include "kernels/cpu/packed_linear.h"
#include "kernels/cpu/quant_blocks.h"
#include "qkv/tensor.h"
#include "qkv/threads.h"

namespace qkv::cpu {
namespace {

float f16_at(const uint8_t* p) { return half_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8))); }

// One unit of a type's row (a block of 32, or a K-quant's super-block of 256) as integers q and,
// for each 16 of them, w = a·q + b. Returns the values in the unit.
int unpack(uint32_t type, const uint8_t* p, int q[256], float a[16], float b[16]) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::q8_0:
      for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(p[2 + j]);
      a[0] = a[1] = f16_at(p), b[0] = b[1] = 0;
      return 32;
    case GgmlType::q4_0:
    case GgmlType::q4_1:
    case GgmlType::q5_0:
    case GgmlType::q5_1: {
      const auto t = static_cast<GgmlType>(type);
      const bool with_min = t == GgmlType::q4_1 || t == GgmlType::q5_1;
      const bool fifth = t == GgmlType::q5_0 || t == GgmlType::q5_1;
      const float d = f16_at(p);
      const uint8_t* after = p + (with_min ? 4 : 2);
      uint32_t qh = 0;
      if (fifth) std::memcpy(&qh, after, 4);
      const uint8_t* qs = after + (fifth ? 4 : 0);
      for (int j = 0; j < 16; ++j) {
        q[j] = (qs[j] & 0x0F) | static_cast<int>((qh >> j) & 1) << 4;
        q[j + 16] = (qs[j] >> 4) | static_cast<int>((qh >> (j + 16)) & 1) << 4;
      }
      a[0] = a[1] = d;
      b[0] = b[1] = with_min ? f16_at(p + 2) : -(fifth ? 16.0f : 8.0f) * d;
      return 32;
    }
    case GgmlType::q4_k:
    case GgmlType::q5_k: {
      const bool fifth = static_cast<GgmlType>(type) == GgmlType::q5_k;
      const float d = f16_at(p), dmin = f16_at(p + 2);
      const uint8_t* s = p + 4;
      const uint8_t* qh = p + 16;
      const uint8_t* qs = fifth ? qh + 32 : qh;
      for (int j = 0; j < 8; ++j) {
        const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 0x0F) | (s[j - 4] >> 6) << 4;
        const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | (s[j] >> 6) << 4;
        a[2 * j] = a[2 * j + 1] = d * static_cast<float>(sc);
        b[2 * j] = b[2 * j + 1] = -dmin * static_cast<float>(m);
        for (int l = 0; l < 32; ++l) {
          const uint8_t byte = qs[32 * (j / 2) + l];
          q[32 * j + l] = (j % 2 == 0 ? byte & 0x0F : byte >> 4) |
                          (fifth ? ((qh[l] >> j) & 1) << 4 : 0);
        }
      }
      return 256;
    }
    case GgmlType::q6_k: {
      const auto* sc = reinterpret_cast<const int8_t*>(p + 192);
      const float d = f16_at(p + 208);
      for (int g = 0; g < 16; ++g) a[g] = d * static_cast<float>(sc[g]), b[g] = -32 * a[g];
      for (int h = 0; h < 2; ++h)
        for (int k = 0; k < 4; ++k)
          for (int l = 0; l < 32; ++l) {
            const uint8_t low = p[64 * h + 32 * (k & 1) + l], high = p[128 + 32 * h + l];
            q[128 * h + 32 * k + l] = (k < 2 ? low & 0x0F : low >> 4) | ((high >> (2 * k)) & 3) << 4;
          }
      return 256;
    }
    default:
      throw Error("quant_linear: " + ggml_type_label(type) + " has no int8 product",
                  Error::Kind::runtime);
  }
}

}  // namespace

float quant_dot_portable(uint32_t type, const uint8_t* row, const QuantizedRow& x, int64_t in) {
  int q[256];
  float a[16], b[16];
  const uint64_t bytes = ggml_block(type).bytes;
  double sum = 0;  // the order of a float sum is not what this is for: a double keeps it moot
  for (int64_t base = 0; base < in; row += bytes) {
    const int values = unpack(type, row, q, a, b);
    for (int g = 0; g < values / 16; ++g) {
      const int64_t at = base + 16 * g;
      int dot = 0;
      for (int t = 0; t < 16; ++t) dot += q[16 * g + t] * x.q[at + t];
      sum += double{x.d[at / x.block]} * (double{a[g]} * dot + double{b[g]} * x.s16[at / 16]);
    }
    base += values;
  }
  return static_cast<float>(sum);
}

int64_t int8_block(uint32_t type) { return ggml_block(type).values == 256 ? 256 : 32; }

void quantize_row_int8(const float* x, int64_t in, int64_t block, int8_t* q, float* d,
                       int16_t* s16) {
  for (int64_t b = 0; b < in / block; ++b) {
    const float* v = x + block * b;
    float amax = 0;
    bool finite = true;
    for (int64_t j = 0; j < block; ++j) {
      amax = std::max(amax, std::fabs(v[j]));
      finite = finite && std::isfinite(v[j]);
    }
    // A NaN or ±∞ in x (weights that overflow) makes the block's scale NaN and its q 0, so that
    // every product with it is NaN, as float32's would be, and the logits' check refuses it; a
    // NaN rounded to int8 would be undefined behaviour.
    d[b] = finite ? amax / 127 : std::numeric_limits<float>::quiet_NaN();
    const float inv = amax > 0 ? 127 / amax : 0;
    for (int64_t j = 0; j < block; ++j)
      q[block * b + j] = finite ? static_cast<int8_t>(std::nearbyint(v[j] * inv)) : int8_t{0};
  }
  for (int64_t g = 0; g < in / 16; ++g) {
    int32_t sum = 0;
    for (int t = 0; t < 16; ++t) sum += q[16 * g + t];
    s16[g] = static_cast<int16_t>(sum);
  }
}

bool quant_has_int8(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::f32:
    case GgmlType::f16:
    case GgmlType::bf16:
      return false;
    default:
      return ggml_block(type).values > 0;
  }
}

namespace {

// int8: x's rows quantized once, then blocks of every matrix's rows over the threads in one job
// (q, k and v of a layer, or its gate and up, share x: one wake-up of the threads instead of three
// for a decode step's small products).
void int8_linears(const float* x, int64_t ldx, int64_t n, const std::vector<QuantOutput>& outs,
                  int threads) {
  const int64_t in = outs.front().w->in, block = int8_block(outs.front().w->type);
  std::vector<int8_t> q(static_cast<std::size_t>(n * in));
  std::vector<float> d(static_cast<std::size_t>(n * in / 32));
  std::vector<int16_t> s16(static_cast<std::size_t>(n * in / 16));
  std::vector<QuantizedRow> rows;
  for (int64_t r = 0; r < n; ++r) {
    quantize_row_int8(x + r * ldx, in, block, q.data() + r * in, d.data() + r * in / block,
                      s16.data() + r * in / 16);
    rows.push_back({q.data() + r * in, d.data() + r * in / block, s16.data() + r * in / 16, block});
  }
  // Items of about 64 KiB of W, at least 4 a thread where W allows: a thread slowed by other work
  // leaves little behind.
  struct Item {
    const QuantOutput* out;
    int64_t o0, o1;
  };
  std::vector<Item> items;
  for (const QuantOutput& o : outs) {
    const QuantMatrix& w = *o.w;
    const int64_t per = std::clamp<int64_t>(
        std::min<int64_t>((int64_t{64} << 10) / static_cast<int64_t>(w.row_bytes),
                          w.out / (4 * threads)),
        8, std::max<int64_t>(8, w.out));
    for (int64_t o0 = 0; o0 < w.out; o0 += per) items.push_back({&o, o0, std::min(w.out, o0 + per)});
  }
  parallel_for(static_cast<int64_t>(items.size()), threads, [&](int64_t i, int) {
    const Item& it = items[static_cast<std::size_t>(i)];
    const QuantMatrix& w = *it.out->w;
    quant_dot_rows(w.type, w.data->data(), w.row_bytes, it.o0, it.o1, rows.data(), n, in,
                   it.out->bias, it.out->y, it.out->ldy);
  });
}

// rows [cols, in] (row-major) into packed_linear's panels of `width` columns, zeros past cols, and
// the bias (zeros without one) padded the same way. Blocks of 16 k at a time: the panel rows they
// write (16 · width floats) stay in L1 while every column passes, where one column at a time
// would stride over the whole panel (packed_linear's Pack, made for packing once at load, is
// that, and took half of a prefill's time here).
void to_panels(const float* rows, const float* bias, int64_t cols, int64_t in, int64_t width,
               float* panels, float* panel_bias) {
  constexpr int64_t kBlock = 16;
  const int64_t count = (cols + width - 1) / width;
  for (int64_t p = 0; p < count; ++p) {
    float* panel = panels + p * in * width;
    for (int64_t k0 = 0; k0 < in; k0 += kBlock) {
      const int64_t k1 = std::min(in, k0 + kBlock);
      for (int64_t c = 0; c < width; ++c) {
        const int64_t o = p * width + c;
        if (o < cols) {
          const float* row = rows + o * in;
          for (int64_t k = k0; k < k1; ++k) panel[k * width + c] = row[k];
        } else {
          for (int64_t k = k0; k < k1; ++k) panel[k * width + c] = 0;
        }
      }
    }
    for (int64_t c = 0; c < width; ++c) {
      const int64_t o = p * width + c;
      panel_bias[p * width + c] = o < cols && bias != nullptr ? bias[o] : 0.0f;
    }
  }
}

// float32: blocks of panels dequantized by the thread that multiplies them, every row of x
// through each block.
void float_linear(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t n,
                  const QuantMatrix& w, const float* bias, int threads) {
  const int64_t width = packed_linear_width(), in = w.in;
  const int64_t panels = (w.out + width - 1) / width;
  // Blocks of panels of at most 256 KiB of float32 (L2, as packed_linear's), at least 4 a thread
  // where W allows.
  int64_t block = std::clamp<int64_t>((int64_t{64} << 10) / (in * width), 1, panels);
  while (block > 1 && (panels + block - 1) / block < 4 * threads) block = (block + 1) / 2;
  const int64_t items = (panels + block - 1) / block;
  parallel_for(items, threads, [&](int64_t item, int) {
    thread_local AlignedBuffer<float> rows, packed, packed_bias;
    const int64_t o0 = item * block * width, o1 = std::min(w.out, (item + 1) * block * width);
    const int64_t cols = o1 - o0, padded = (cols + width - 1) / width * width;
    rows.resize(static_cast<std::size_t>(std::max<int64_t>(rows.size(), cols * in)));
    packed.resize(static_cast<std::size_t>(std::max<int64_t>(packed.size(), padded * in)));
    packed_bias.resize(static_cast<std::size_t>(std::max<int64_t>(packed_bias.size(), padded)));
    for (int64_t o = o0; o < o1; ++o) dequantize(w.type, w.row(o), rows.data() + (o - o0) * in, in);
    to_panels(rows.data(), bias != nullptr ? bias + o0 : nullptr, cols, in, width, packed.data(),
              packed_bias.data());
    packed_panels(y + o0, ldy, x, ldx, n, packed.data(), packed_bias.data(), in, cols);
  });
}

}  // namespace

void quant_linear(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t n,
                  const QuantMatrix& w, const float* bias, QuantProduct product,
                  int num_threads) {
  if (n <= 0 || w.out <= 0) return;
  const int threads = resolve_num_threads(num_threads);
  if (product == QuantProduct::int8 && quant_has_int8(w.type))
    int8_linears(x, ldx, n, {{.w = &w, .bias = bias, .y = y, .ldy = ldy}}, threads);
  else
    float_linear(y, ldy, x, ldx, n, w, bias, threads);
}

void quant_linears(const float* x, int64_t ldx, int64_t n, const std::vector<QuantOutput>& outs,
                   QuantProduct product, int num_threads) {
  if (n <= 0 || outs.empty()) return;
  bool int8 = product == QuantProduct::int8;
  for (const QuantOutput& o : outs)  // one quantization of x serves all: the same width and block
    int8 = int8 && quant_has_int8(o.w->type) && o.w->in == outs.front().w->in &&
           int8_block(o.w->type) == int8_block(outs.front().w->type);
  if (int8) return int8_linears(x, ldx, n, outs, resolve_num_threads(num_threads));
  for (const QuantOutput& o : outs)
    quant_linear(o.y, o.ldy, x, ldx, n, *o.w, o.bias, product, num_threads);
}

}  // namespace qkv::cpu
