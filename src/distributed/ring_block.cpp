// The fused kernels (kernels/cpu/flash_*.cpp) on the visible pieces of one key/value block.
#include "distributed/ring_block.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/flash_common.h"

namespace qkv::distributed {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The problem of one piece: rows [q0, q0 + rows) of q against rows [k0, k0 + keys) of the block.
cpu::FlashProblem piece_problem(const RingShape& s, const float* q, const float* kv, int64_t S,
                                const BlockPiece& p) {
  cpu::FlashProblem f;
  f.B = s.B, f.Hq = s.Hq, f.Hkv = s.Hkv, f.L = p.rows, f.S = p.keys, f.Dk = s.Dk, f.Dv = s.Dv;
  f.scale = s.scale;
  f.causal = p.diagonal ? Causal::top_left : Causal::none;
  f.q = {q + p.q0 * s.Dk, {s.Hq * s.L * s.Dk, s.L * s.Dk, s.Dk}};
  const float* k = kv;
  const float* v = kv + s.B * s.Hkv * S * s.Dk;
  f.k = {k + p.k0 * s.Dk, {s.Hkv * S * s.Dk, S * s.Dk, s.Dk}};
  f.v = {v + p.k0 * s.Dv, {s.Hkv * S * s.Dv, S * s.Dv, s.Dv}};
  return f;
}

// Copies rows [r0, r0 + rows) of each (b, h) of a contiguous [B·H, L, width] array into (to) or
// out of (from) a contiguous [B·H, rows, width] one.
void gather_rows(const float* all, int64_t heads, int64_t L, int64_t width, int64_t r0,
                 int64_t rows, float* part) {
  for (int64_t h = 0; h < heads; ++h)
    std::copy(all + (h * L + r0) * width, all + (h * L + r0 + rows) * width,
              part + h * rows * width);
}
void add_rows(const float* part, int64_t heads, int64_t L, int64_t width, int64_t r0, int64_t rows,
              float* all) {
  for (int64_t h = 0; h < heads; ++h) {
    const float* from = part + h * rows * width;
    float* to = all + (h * L + r0) * width;
    for (int64_t i = 0; i < rows * width; ++i) to[i] += from[i];
  }
}

// Full pieces cut into chunks of query rows, so that `progress` runs every few milliseconds (rows
// are independent; a diagonal piece stays whole, its causal alignment being its first row's).
constexpr int64_t kChunkRows = 512;
std::vector<BlockPiece> in_chunks(const std::vector<BlockPiece>& pieces) {
  std::vector<BlockPiece> chunks;
  for (const BlockPiece& p : pieces) {
    if (p.diagonal) {
      chunks.push_back(p);
      continue;
    }
    for (int64_t r = 0; r < p.rows; r += kChunkRows)
      chunks.push_back({p.q0 + r, std::min(kChunkRows, p.rows - r), p.k0, p.keys, false});
  }
  return chunks;
}

}  // namespace

double max_unit(const RingShape& s) {
  cpu::FlashProblem f;  // as piece_problem makes them: no bias
  f.scale = s.scale;
  return cpu::flash::max_unit(f);
}

RunningSoftmax::RunningSoftmax(const RingShape& s)
    : out(s.B * s.Hq * s.L * s.Dv, 0.0f), max(s.B * s.Hq * s.L, -kInf), sum(s.B * s.Hq * s.L, 0) {}

void attend_block(const RingShape& s, const float* q, const float* kv, int64_t S,
                  const std::vector<BlockPiece>& pieces, RunningSoftmax& running,
                  const std::function<void()>& progress) {
  const int64_t heads = s.B * s.Hq;
  std::vector<float> out, max, sum;
  for (const BlockPiece& p : in_chunks(pieces)) {
    const cpu::FlashProblem f = piece_problem(s, q, kv, S, p);
    // Natural-log units per unit of a kept max (the kernels keep raw scores when they can).
    const double u = cpu::flash::max_unit(f);
    out.resize(heads * p.rows * s.Dv), max.resize(heads * p.rows), sum.resize(heads * p.rows);
    cpu::flash_forward(f, out.data(), nullptr, s.threads, {max.data(), sum.data()});
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < p.rows; ++i) {
        const int64_t at = h * p.rows + i, row = h * s.L + p.q0 + i;
        const float mb = max[at];
        float& m = running.max[row];
        float& l = running.sum[row];
        float* o = running.out.data() + row * s.Dv;
        const float* ob = out.data() + at * s.Dv;
        if (mb == -kInf) continue;  // the row sees no key of this piece
        if (std::isnan(mb) || std::isnan(m)) {
          m = l = std::numeric_limits<float>::quiet_NaN();
          std::fill(o, o + s.Dv, m);
        } else if (m == -kInf) {
          m = mb, l = sum[at];
          std::copy(ob, ob + s.Dv, o);
        } else {
          const float m_new = std::max(m, mb);
          const double a = l * std::exp(u * (double(m) - m_new));
          const double c = sum[at] * std::exp(u * (double(mb) - m_new));
          const double wa = a / (a + c), wc = c / (a + c);
          for (int64_t d = 0; d < s.Dv; ++d) o[d] = static_cast<float>(wa * o[d] + wc * ob[d]);
          m = m_new, l = static_cast<float>(a + c);
        }
      }
    progress();
  }
}

// Forward was out_i = Σ_j P_ij v_j over every block, P = exp(u(x − m)) / l with the global m, l.
// So each piece's gradients are the fused backward's, given the global out (for D = rowsum(dO ∘ O))
// and the global m and l in place of the piece's own: the sums over blocks are then sums over
// pieces, dQ over this rank's pieces, dK and dV over every rank's.
void attend_block_backward(const RingShape& s, const float* q, const float* kv, int64_t S,
                           const std::vector<BlockPiece>& pieces, const RunningSoftmax& forward,
                           const float* dout, float* dq, float* dkv,
                           const std::function<void()>& progress) {
  const int64_t heads = s.B * s.Hq, kv_heads = s.B * s.Hkv;
  std::vector<float> out, dout_part, max, sum, dq_part, dk_part, dv_part;
  float* dk = dkv;
  float* dv = dkv + kv_heads * S * s.Dk;
  for (const BlockPiece& p : in_chunks(pieces)) {
    const cpu::FlashProblem f = piece_problem(s, q, kv, S, p);
    out.resize(heads * p.rows * s.Dv), dout_part.resize(out.size());
    max.resize(heads * p.rows), sum.resize(heads * p.rows);
    dq_part.resize(heads * p.rows * s.Dk);
    dk_part.resize(kv_heads * p.keys * s.Dk), dv_part.resize(kv_heads * p.keys * s.Dv);
    gather_rows(forward.out.data(), heads, s.L, s.Dv, p.q0, p.rows, out.data());
    gather_rows(dout, heads, s.L, s.Dv, p.q0, p.rows, dout_part.data());
    gather_rows(forward.max.data(), heads, s.L, 1, p.q0, p.rows, max.data());
    gather_rows(forward.sum.data(), heads, s.L, 1, p.q0, p.rows, sum.data());
    double dscale = 0;
    cpu::flash_backward(f, out.data(), dout_part.data(), {max.data(), sum.data()}, dq_part.data(),
                        dk_part.data(), dv_part.data(), &dscale, s.threads);
    add_rows(dq_part.data(), heads, s.L, s.Dk, p.q0, p.rows, dq);
    add_rows(dk_part.data(), kv_heads, S, s.Dk, p.k0, p.keys, dk);
    add_rows(dv_part.data(), kv_heads, S, s.Dv, p.k0, p.keys, dv);
    progress();
  }
}

}  // namespace qkv::distributed
