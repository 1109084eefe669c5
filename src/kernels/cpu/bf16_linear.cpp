// bf16_linear.h: work items of (rows, columns) blocks over qk_tile_bf16.
#include "kernels/cpu/bf16_linear.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/bf16_tile.h"
#include "kernels/cpu/vec_ops.h"
#include "qkv/threads.h"

namespace qkv::cpu {
namespace {

// A block of outputs one item computes: rows of x × columns of W, the columns two key panels
// (qk_tile.h's kKeyPanel), so that a block's weights (2·48 rows of `in` pairs) are read once for
// all its rows, which stream past them.
constexpr int64_t kBlockRows = 64, kBlockCols = 2 * kKeyPanel;

}  // namespace

Bf16Linear pack_linear_bf16(const float* w, const float* b, int64_t out, int64_t in) {
  Bf16Linear l;
  l.in = in, l.out = out;
  auto panels = std::make_shared<AlignedBuffer<bf16>>(bf16_key_panel_elems(out, in));
  pack_keys_bf16(w, in, out, in, panels->data());
  auto bias = std::make_shared<AlignedBuffer<float>>(out);
  for (int64_t o = 0; o < out; ++o) (*bias)[o] = b ? b[o] : 0.0f;
  l.panels = std::move(panels), l.bias = std::move(bias);
  return l;
}

int64_t bf16_linear_bytes(int64_t out, int64_t in) {
  return 2 * bf16_key_panel_elems(out, in) + 4 * out;
}

void bf16_linear(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t n, const Bf16Linear& w,
                 Activation act, int num_threads) {
  if (n <= 0 || w.out <= 0) return;
  const int threads = resolve_num_threads(num_threads);
  const int64_t ld16 = bf16_row(w.in);
  AlignedBuffer<bf16> x16(n * ld16);
  parallel_for((n + kBlockRows - 1) / kBlockRows, threads, [&](int64_t block, int) {
    const int64_t r0 = block * kBlockRows, m = std::min(kBlockRows, n - r0);
    round_bf16_rows(x + r0 * ldx, ldx, m, w.in, x16.data() + r0 * ld16, ld16);
  });
  const int64_t row_blocks = (n + kBlockRows - 1) / kBlockRows;
  const int64_t col_blocks = (w.out + kBlockCols - 1) / kBlockCols;
  // Each worker's scores, padded: qk_tile_bf16 writes up to the end of the last panel it scores.
  std::vector<AlignedBuffer<float>> scratch(threads);
  parallel_for(row_blocks * col_blocks, threads, [&](int64_t item, int worker) {
    const int64_t r0 = item / col_blocks * kBlockRows, m = std::min(kBlockRows, n - r0);
    const int64_t c0 = item % col_blocks * kBlockCols, cols = std::min(kBlockCols, w.out - c0);
    AlignedBuffer<float>& s = scratch[worker];
    if (s.size() == 0) s.resize(kBlockRows * padded_keys(kBlockCols));
    const int64_t lds = padded_keys(kBlockCols);
    // The panels from column c0 (a whole number of panels in) are those of keys c0 … out.
    qk_tile_bf16(x16.data() + r0 * ld16, ld16, m, w.panels->data() + c0 * ld16, cols, w.out - c0,
                 w.in, s.data(), lds);
    const float* b = w.bias->data() + c0;
    for (int64_t r = 0; r < m; ++r) {
      float* to = y + (r0 + r) * ldy + c0;
      const float* from = s.data() + r * lds;
      for (int64_t c = 0; c < cols; ++c) to[c] = from[c] + b[c];
      if (act == Activation::gelu) gelu_row(to, cols);
    }
  });
}

}  // namespace qkv::cpu
