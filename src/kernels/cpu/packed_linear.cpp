// Highway implementation of packed_linear.h, compiled once per target instruction set
// (hwy/foreach_target.h re-includes this file); HWY_DYNAMIC_DISPATCH picks one at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/packed_linear.cpp"
#include "kernels/cpu/packed_linear.h"

#include <algorithm>
#include <string>

#include "hwy/cache_control.h"
#include "hwy/foreach_target.h"  // must come before highway.h
#include "hwy/highway.h"
#include "kernels/cpu/vec_ops.h"
#include "qkv/tensor.h"
#include "qkv/threads.h"

HWY_BEFORE_NAMESPACE();
namespace qkv::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

int64_t PanelWidth() { return 2 * static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>())); }

// Terms a partial sum takes before it joins the running total: the error of a sum of n products
// grows like n·ε for one chain, like (kChunk + n / kChunk)·ε in chunks (at in = 1536 about 4×
// less; OpenBLAS's K blocking does the same). The order stays fixed: b + S₀ + S₁ + …, each Sᵢ one
// chain over its chunk's k in order.
constexpr int64_t kChunk = 128;
// Weight rows (2 vectors, one 64-byte line on AVX2) to prefetch ahead, 4 KiB: with few rows of x
// (one sentence) the product streams W (42 MB for MiniLM, more than L3) from memory, faster than
// the hardware prefetcher alone brings it. Measured on Zen 3, one 12-token sentence on 2 threads:
// 2.9 → 2.4 ms (16 rows ahead: 2.8; 32: 2.5); batches of 32 unchanged. A prefetch past the end of
// the weights is harmless (it never faults).
constexpr int64_t kPrefetchAhead = 64;

// One register block: R rows of x against one panel (2 vectors of output columns). R = 6 takes
// 12 accumulators, 2 weight vectors and a broadcast: 15 of AVX2's 16 registers. The running totals
// wait in L1 between chunks. `cols` < width stores a partial panel.
template <int R>
HWY_INLINE void Block(const float* x, int64_t ldx, const float* panel, const float* bias,
                      int64_t in, float* y, int64_t ldy, int64_t cols) {
  const hn::ScalableTag<float> d;
  const int64_t N = hn::Lanes(d);
  using V = hn::Vec<decltype(d)>;
  HWY_ALIGN float total[R * 2 * HWY_MAX_BYTES / sizeof(float)];
  for (int r = 0; r < R; ++r) {
    hn::Store(hn::Load(d, bias), d, total + r * 2 * N);
    hn::Store(hn::Load(d, bias + N), d, total + r * 2 * N + N);
  }
  for (int64_t k0 = 0; k0 < in; k0 += kChunk) {
    const int64_t k1 = std::min(in, k0 + kChunk);
    V acc0[R], acc1[R];
    for (int r = 0; r < R; ++r) acc0[r] = hn::Zero(d), acc1[r] = hn::Zero(d);
    for (int64_t k = k0; k < k1; ++k) {
      hwy::Prefetch(panel + (k + kPrefetchAhead) * 2 * N);
      const V w0 = hn::Load(d, panel + k * 2 * N), w1 = hn::Load(d, panel + k * 2 * N + N);
      for (int r = 0; r < R; ++r) {
        const V xr = hn::Set(d, x[r * ldx + k]);
        acc0[r] = hn::MulAdd(xr, w0, acc0[r]);
        acc1[r] = hn::MulAdd(xr, w1, acc1[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      float* t = total + r * 2 * N;
      hn::Store(hn::Add(hn::Load(d, t), acc0[r]), d, t);
      hn::Store(hn::Add(hn::Load(d, t + N), acc1[r]), d, t + N);
    }
  }
  for (int r = 0; r < R; ++r) std::copy_n(total + r * 2 * N, cols, y + r * ldy);
}

template <int R>
HWY_INLINE void Rows(const float* x, int64_t ldx, const float* panels, const float* bias,
                     int64_t in, int64_t out, int64_t p0, int64_t p1, float* y, int64_t ldy) {
  const int64_t width = PanelWidth();
  for (int64_t p = p0; p < p1; ++p)
    Block<R>(x, ldx, panels + p * in * width, bias + p * width, in, y + p * width, ldy,
             std::min(width, out - p * width));
}

// Rows [i0, i1) × panels [p0, p1) of the panels at `panels` (pack's layout, `out` columns in
// all): 6 rows at a time through every panel of the block (which stays in L2 while the rows
// pass), then the activation on those rows' block of outputs, still in L1.
void PanelBlock(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t i0, int64_t i1,
                const float* panels, const float* bias, int64_t in, int64_t out, int64_t p0,
                int64_t p1, Activation act) {
  constexpr int64_t R = 6;
  const int64_t width = PanelWidth(), c0 = p0 * width, c1 = std::min(out, p1 * width);
  // Rows<n> for the n = 1 .. R rows of each step.
  using RowsFn = void (*)(const float*, int64_t, const float*, const float*, int64_t, int64_t,
                          int64_t, int64_t, float*, int64_t);
  static constexpr RowsFn kRowsOf[R + 1] = {nullptr,  &Rows<1>, &Rows<2>, &Rows<3>,
                                            &Rows<4>, &Rows<5>, &Rows<6>};
  for (int64_t i = i0; i < i1; i += R) {
    const int64_t rows = std::min(R, i1 - i);
    const float* xi = x + i * ldx;
    float* yi = y + i * ldy;
    kRowsOf[rows](xi, ldx, panels, bias, in, out, p0, p1, yi, ldy);
    if (act == Activation::gelu)
      for (int64_t r = 0; r < rows; ++r) gelu_row(yi + r * ldy + c0, c1 - c0);
  }
}

// Wᵀ into panels: panel p, row k holds W[p·width + c, k] for c < width (zeros past out).
void Pack(const float* w, const float* b, int64_t out, int64_t in, float* data, float* bias) {
  const int64_t width = PanelWidth(), panels = (out + width - 1) / width;
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t c = 0; c < width; ++c) {
      const int64_t o = p * width + c;
      bias[o] = o < out && b != nullptr ? b[o] : 0.0f;
      for (int64_t k = 0; k < in; ++k) data[(p * in + k) * width + c] = o < out ? w[o * in + k] : 0;
    }
}

}  // namespace qkv::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qkv::cpu {

HWY_EXPORT(PanelWidth);
HWY_EXPORT(PanelBlock);
HWY_EXPORT(Pack);

int64_t packed_linear_width() { return HWY_DYNAMIC_DISPATCH(PanelWidth)(); }

PackedLinear pack_linear(const float* w, const float* b, int64_t out, int64_t in) {
  PackedLinear p{.in = in, .out = out, .width = packed_linear_width()};
  auto data = std::make_shared<AlignedBuffer<float>>(
      static_cast<std::size_t>(std::max<int64_t>(1, p.panels() * in * p.width)));
  auto bias = std::make_shared<AlignedBuffer<float>>(
      static_cast<std::size_t>(std::max<int64_t>(1, p.panels() * p.width)));
  HWY_DYNAMIC_DISPATCH(Pack)(w, b, out, in, data->data(), bias->data());
  p.data = std::move(data);
  p.bias = std::move(bias);
  return p;
}

int64_t packed_linear_bytes(int64_t out, int64_t in) {
  const PackedLinear p{.in = in, .out = out, .width = packed_linear_width()};
  return static_cast<int64_t>(sizeof(float)) * (std::max<int64_t>(1, p.panels() * in * p.width) +
                                                std::max<int64_t>(1, p.panels() * p.width));
}

void packed_linear(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t n,
                   const PackedLinear& w, Activation act, int num_threads) {
  if (w.width != packed_linear_width())
    throw Error("packed_linear: weights packed " + std::to_string(w.width) +
                " columns a panel, but this SIMD target multiplies " +
                std::to_string(packed_linear_width()) + " (pack them again)");
  if (n <= 0 || w.out <= 0) return;
  // Items of up to 96 rows × a block of panels whose weights fit in L2 (256 KiB) beside the
  // rows; smaller blocks when that leaves fewer than 4 items a thread, so that one sentence's 12
  // rows still spread over every core, and a thread slowed by other work leaves little behind.
  constexpr int64_t kRowsPerItem = 96, kBlockFloats = 64 * 1024;
  const int threads = resolve_num_threads(num_threads);
  const int64_t panels = w.panels();
  const int64_t row_items = (n + kRowsPerItem - 1) / kRowsPerItem;
  int64_t block =
      std::clamp<int64_t>(kBlockFloats / std::max<int64_t>(1, w.in * w.width), 1, panels);
  auto items = [&] { return row_items * ((panels + block - 1) / block); };
  while (block > 1 && items() < 4 * threads) block = (block + 1) / 2;
  const int64_t blocks = (panels + block - 1) / block;
  parallel_for(items(), threads, [&](int64_t item, int) {
    const int64_t r = item / blocks, c = item % blocks;
    const int64_t i0 = r * kRowsPerItem, i1 = std::min(n, i0 + kRowsPerItem);
    const int64_t p0 = c * block, p1 = std::min(panels, p0 + block);
    HWY_DYNAMIC_DISPATCH(PanelBlock)(y, ldy, x, ldx, i0, i1, w.data->data(), w.bias->data(), w.in,
                                     w.out, p0, p1, act);
  });
}

void packed_panels(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t n,
                   const float* panels, const float* bias, int64_t in, int64_t out,
                   Activation act) {
  HWY_DYNAMIC_DISPATCH(PanelBlock)(y, ldy, x, ldx, 0, n, panels, bias, in, out, 0,
                                   (out + packed_linear_width() - 1) / packed_linear_width(), act);
}

}  // namespace qkv::cpu
#endif  // HWY_ONCE
