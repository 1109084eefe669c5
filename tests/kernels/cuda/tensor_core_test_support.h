// What the emulated tests of the tensor-core kernels share: a problem of N(0, 1) data rounded to
// bf16 or fp16, the kernels run on it (the emulator's device memory is host memory), the float64
// reference of the same rounded values (qkv::attention with Path::reference), a naive same-dtype
// result N, and flash-attention's acceptance rule:
//
//     max|X − R| ≤ 2·max|N − R| + floor      (out, logsumexp, dq, dk, dv)
//
// N is written here from the formula, one loop per formula, float32: scores from the 16-bit
// inputs, softmax in float32, P rounded to the 16-bit type before P·V, out rounded; backward:
// dO is the rounded input, P rounded before dV = Pᵀ·dO, dS = P∘(dP − D) rounded before dQ = dS·K
// and dK = dSᵀ·Q, the gradients rounded. The floor is the element type's unit roundoff times the
// tensor's largest |R|: both X and N end with one rounding to 16 bits, and where X's float32
// value and N's straddle a rounding boundary X lands one ulp from R while N may land within a
// hair of it. Plus §1.1's 1e-6 for a tensor whose R is all 0 while float32 is not exact: with
// L = S = 1, dS = dP − D is 0 in float64 but the difference of two float32 sums in X (measured:
// fp16 dq 3.6e-7, dk 3.0e-7 where N happens to be exact).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cuda/flash_cuda.h"
#include "kernels/cuda/half16.cuh"
#include "qkv/attention.h"

namespace qkv::cuda::tc_test {

using kernel::bf16_to_float;
using kernel::f16_to_float;
using kernel::float_to_bf16;
using kernel::float_to_f16;

inline uint16_t to16(Element e, float x) {
  return e == Element::bf16 ? float_to_bf16(x) : float_to_f16(x);
}
inline float from16(Element e, uint16_t h) {
  return e == Element::bf16 ? bf16_to_float(h) : f16_to_float(h);
}
inline float round16(Element e, float x) { return from16(e, to16(e, x)); }
inline double unit_roundoff(Element e) { return e == Element::bf16 ? 0x1p-8 : 0x1p-11; }

struct Case {
  Element element = Element::bf16;
  int B = 1, Hq = 1, Hkv = 1, L = 1, S = 1, Dk = 64, Dv = 64;
  Causal causal = Causal::none;
  bool keep = false;  // a keep mask [B, 1, L, S] (broadcast over heads), ~75% kept
  bool bias = false;  // a bias [1, Hq, L, S] (broadcast over batches), N(0,1) with ~10% −∞
  bool masked_row = false;                 // with keep: row 0 keeps nothing
  std::vector<int64_t> key_lengths;        // one per batch, or empty
  int nan_q = -1, nan_k = -1, nan_v = -1;  // a row of batch 0, head 0 set to NaN
  uint32_t seed = 1;

  std::string str() const {
    std::ostringstream o;
    o << (element == Element::bf16 ? "bf16" : "f16") << " B=" << B << " Hq=" << Hq << " Hkv=" << Hkv
      << " L=" << L << " S=" << S << " Dk=" << Dk << " Dv=" << Dv
      << " causal=" << static_cast<int>(causal) << " keep=" << keep << " bias=" << bias
      << " masked_row=" << masked_row << " key_lengths=" << key_lengths.size() << " nan_q=" << nan_q
      << " nan_k=" << nan_k << " nan_v=" << nan_v << " seed=" << seed;
    return o.str();
  }
};

// Contiguous [B, H, rows, cols] data: the 16-bit elements the kernels read and their values.
struct Array {
  int64_t shape[4] = {0, 0, 0, 0};
  std::vector<uint16_t> bits;
  std::vector<float> values;
  int64_t size() const { return shape[0] * shape[1] * shape[2] * shape[3]; }
  int64_t at(int64_t b, int64_t h, int64_t i, int64_t c) const {
    return ((b * shape[1] + h) * shape[2] + i) * shape[3] + c;
  }
  Strided strided() {
    Strided s;
    s.data = bits.data();
    s.stride[0] = shape[1] * shape[2] * shape[3], s.stride[1] = shape[2] * shape[3];
    s.stride[2] = shape[3], s.stride[3] = 1;
    return s;
  }
  Tensor tensor() const {
    std::vector<double> v(values.begin(), values.end());
    return Tensor::from({shape[0], shape[1], shape[2], shape[3]}, v);
  }
};

inline Array random_array(Element e, int64_t b, int64_t h, int64_t rows, int64_t cols,
                          std::mt19937& rng) {
  Array a;
  a.shape[0] = b, a.shape[1] = h, a.shape[2] = rows, a.shape[3] = cols;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  a.bits.resize(a.size()), a.values.resize(a.size());
  for (int64_t x = 0; x < a.size(); ++x) {
    a.bits[x] = to16(e, normal(rng));
    a.values[x] = from16(e, a.bits[x]);
  }
  return a;
}
inline Array empty_array(int64_t b, int64_t h, int64_t rows, int64_t cols) {
  Array a;
  a.shape[0] = b, a.shape[1] = h, a.shape[2] = rows, a.shape[3] = cols;
  a.bits.assign(a.size(), 0x7FFF), a.values.assign(a.size(), 0.0f);  // NaN bits: unwritten shows
  return a;
}
inline void set_nan_row(Element e, Array& a, int row) {
  if (row < 0 || row >= a.shape[2]) return;
  for (int64_t c = 0; c < a.shape[3]; ++c) {
    a.bits[a.at(0, 0, row, c)] = to16(e, std::numeric_limits<float>::quiet_NaN());
    a.values[a.at(0, 0, row, c)] = std::numeric_limits<float>::quiet_NaN();
  }
}

// One problem, its inputs and every result.
struct Problem16 {
  Case c;
  float scale = 0;
  Array q, k, v, dout;
  // The mask: none, keep (uint8, nonzero keeps) or bias (float32), contiguous over mask_dims,
  // which broadcast against [B, Hq, L, S] (1 where a dimension repeats). Case::keep makes it
  // [B, 1, L, S], Case::bias [1, Hq, L, S]; a test may set any other (a plant of the CPU's).
  MaskKind mask_kind = MaskKind::none;
  int64_t mask_dims[4] = {1, 1, 1, 1};
  std::vector<uint8_t> keep;
  std::vector<float> bias;
  std::vector<int32_t> lengths;
  // X: the kernels'
  Array out, dq, dk, dv;
  std::vector<float> lse, max, log_sum;
  // R: float64 reference; N: naive same-dtype
  std::vector<double> r_out, r_lse, r_dq, r_dk, r_dv;
  std::vector<float> n_out, n_lse, n_dq, n_dk, n_dv;
  // Entries that are 0 by definition (§1.4): the rows that see no key (out, dq) and the keys no
  // row sees (dk, dv). X must hold exactly 0 there; elsewhere a 0 of R (a row with one key has
  // dS = 0 exactly in float64, not in float32) is judged by the rule like any value.
  std::vector<char> zero_out, zero_dq, zero_dk, zero_dv;

  explicit Problem16(const Case& c_) : c(c_) {
    std::mt19937 rng(c.seed);
    scale = 1.0f / std::sqrt(static_cast<float>(c.Dk > 0 ? c.Dk : 1));
    q = random_array(c.element, c.B, c.Hq, c.L, c.Dk, rng);
    k = random_array(c.element, c.B, c.Hkv, c.S, c.Dk, rng);
    v = random_array(c.element, c.B, c.Hkv, c.S, c.Dv, rng);
    dout = random_array(c.element, c.B, c.Hq, c.L, c.Dv, rng);
    set_nan_row(c.element, q, c.nan_q);
    set_nan_row(c.element, k, c.nan_k);
    set_nan_row(c.element, v, c.nan_v);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    if (c.keep) {
      mask_kind = MaskKind::keep;
      mask_dims[0] = c.B, mask_dims[2] = c.L, mask_dims[3] = c.S;
      keep.resize(static_cast<size_t>(c.B) * c.L * c.S);
      for (auto& x : keep) x = u(rng) < 0.75f;
      if (c.masked_row && c.L > 0)
        for (int j = 0; j < c.S; ++j) keep[j] = 0;
    } else if (c.bias) {
      mask_kind = MaskKind::bias;
      mask_dims[1] = c.Hq, mask_dims[2] = c.L, mask_dims[3] = c.S;
      bias.resize(static_cast<size_t>(c.Hq) * c.L * c.S);
      for (auto& x : bias)
        x = u(rng) < 0.1f ? -std::numeric_limits<float>::infinity() : normal(rng);
    }
    for (auto n : c.key_lengths) lengths.push_back(static_cast<int32_t>(n));
  }

  // The mask's strides over [B, Hq, L, S] (0 where it broadcasts) and the offset of an entry.
  void mask_strides(int64_t (&stride)[4]) const {
    int64_t step = 1;
    for (int d = 3; d >= 0; --d) {
      stride[d] = mask_dims[d] == 1 ? 0 : step;
      step *= mask_dims[d];
    }
  }
  size_t mask_offset(int b, int h, int i, int j) const {
    int64_t stride[4];
    mask_strides(stride);
    return static_cast<size_t>(b * stride[0] + h * stride[1] + i * stride[2] + j * stride[3]);
  }

  // Sets element (b, h, i, col) of an input to the 16-bit rounding of x (a plant).
  void set(Array& a, int64_t b, int64_t h, int64_t i, int64_t col, float x) {
    a.bits[a.at(b, h, i, col)] = to16(c.element, x);
    a.values[a.at(b, h, i, col)] = from16(c.element, a.bits[a.at(b, h, i, col)]);
  }

  Problem problem() {
    Problem p;
    p.element = c.element;
    p.B = c.B, p.Hq = c.Hq, p.Hkv = c.Hkv, p.L = c.L, p.S = c.S, p.Dk = c.Dk, p.Dv = c.Dv;
    p.scale = scale;
    p.causal = c.causal;
    p.q = q.strided(), p.k = k.strided(), p.v = v.strided();
    p.mask_kind = mask_kind;
    if (mask_kind != MaskKind::none) {
      p.mask.data = mask_kind == MaskKind::keep ? static_cast<void*>(keep.data()) : bias.data();
      mask_strides(p.mask.stride);
    }
    if (!lengths.empty()) p.key_lengths = lengths.data();
    return p;
  }

  // The kernels, forward then (with `backward`) backward, through the launchers under test.
  template <class Forward, class Backward>
  void run_kernels(Forward forward, Backward backward, bool with_backward) {
    out = empty_array(c.B, c.Hq, c.L, c.Dv);
    const size_t rows = static_cast<size_t>(c.B) * c.Hq * c.L;
    lse.assign(rows, 12345.0f), max.assign(rows, 12345.0f), log_sum.assign(rows, 12345.0f);
    const Problem p = problem();
    forward(p, out.strided(), lse.data(), SoftmaxRows{max.data(), log_sum.data()});
    if (!with_backward) return;
    dq = empty_array(c.B, c.Hq, c.L, c.Dk);
    dk = empty_array(c.B, c.Hkv, c.S, c.Dk);
    dv = empty_array(c.B, c.Hkv, c.S, c.Dv);
    for (auto* a : {&out, &dq, &dk, &dv})
      for (int64_t x = 0; x < a->size(); ++x) a->values[x] = from16(c.element, a->bits[x]);
    backward(p, out.strided(), SoftmaxRows{max.data(), log_sum.data()}, dout.strided(),
             dq.strided(), dk.strided(), dv.strided());
    for (auto* a : {&dq, &dk, &dv})
      for (int64_t x = 0; x < a->size(); ++x) a->values[x] = from16(c.element, a->bits[x]);
  }
  void finish_forward_values() {
    for (int64_t x = 0; x < out.size(); ++x) out.values[x] = from16(c.element, out.bits[x]);
  }

  AttentionOptions options() const {
    AttentionOptions o;
    o.scale = scale;
    o.causal = c.causal;
    o.path = Path::reference;
    o.need_logsumexp = true;
    o.key_lengths.assign(lengths.begin(), lengths.end());
    const Shape dims(mask_dims, mask_dims + 4);
    if (mask_kind == MaskKind::keep) {
      Tensor m(dims, DType::b8);
      bool* d = m.data<bool>();
      for (size_t x = 0; x < keep.size(); ++x) d[x] = keep[x] != 0;
      o.mask = m;
    } else if (mask_kind == MaskKind::bias) {
      std::vector<double> b(bias.begin(), bias.end());
      o.mask = Tensor::from(dims, b);
    }
    return o;
  }

  void reference(bool with_backward) {
    const AttentionOptions o = options();
    const Tensor tq = q.tensor(), tk = k.tensor(), tv = v.tensor();
    const AttentionResult r = attention(tq, tk, tv, o);
    auto copy = [](const Tensor& t, std::vector<double>& to) {
      to.resize(t.numel());
      for (int64_t x = 0; x < t.numel(); ++x) to[x] = t.value(x);
    };
    copy(r.out, r_out), copy(r.logsumexp, r_lse);
    if (!with_backward) return;
    const AttentionGrads g = attention_backward(dout.tensor(), tq, tk, tv, o);
    copy(g.dq, r_dq), copy(g.dk, r_dk), copy(g.dv, r_dv);
  }

  // Whether row i of (b, h) sees key j, and the logit's mask term (natural units).
  bool visible(int b, int h, int i, int j, float* term) const {
    int end = c.S;
    if (c.causal == Causal::top_left) end = std::min(end, i + 1);
    if (c.causal == Causal::bottom_right) end = std::min(end, i + 1 + c.S - c.L);
    if (!lengths.empty()) end = std::min(end, lengths[b]);
    if (j >= end) return false;
    *term = 0.0f;
    if (mask_kind == MaskKind::keep) return keep[mask_offset(b, h, i, j)] != 0;
    if (mask_kind == MaskKind::bias) {
      *term = bias[mask_offset(b, h, i, j)];
      return *term != -std::numeric_limits<float>::infinity();
    }
    return true;
  }

  // N, the naive same-dtype computation (the header comment says what it rounds).
  void naive(bool with_backward) {
    const Element e = c.element;
    const int group = c.Hq / c.Hkv;
    const float inf = std::numeric_limits<float>::infinity();
    n_out.assign(out.size(), 0.0f), n_lse.assign(static_cast<size_t>(c.B) * c.Hq * c.L, -inf);
    if (with_backward)
      n_dq.assign(q.size(), 0.0f), n_dk.assign(k.size(), 0.0f), n_dv.assign(v.size(), 0.0f);
    std::vector<float> acc_dk(k.size(), 0.0f), acc_dv(v.size(), 0.0f);
    zero_out.assign(out.size(), 0), zero_dq.assign(q.size(), 0);
    zero_dk.assign(k.size(), 1), zero_dv.assign(v.size(), 1);
    std::vector<float> x(c.S), p(c.S), dp(c.S), o(c.Dv);
    std::vector<char> seen(c.S);
    for (int b = 0; b < c.B; ++b)
      for (int h = 0; h < c.Hq; ++h)
        for (int i = 0; i < c.L; ++i) {
          const int hk = h / group;
          float m = -inf;
          for (int j = 0; j < c.S; ++j) {
            float term = 0;
            seen[j] = visible(b, h, i, j, &term);
            x[j] = -inf;
            if (!seen[j]) continue;
            float s = 0;
            for (int d = 0; d < c.Dk; ++d)
              s += q.values[q.at(b, h, i, d)] * k.values[k.at(b, hk, j, d)];
            x[j] = s * scale + term;
            m = (std::isnan(m) || std::isnan(x[j])) ? std::numeric_limits<float>::quiet_NaN()
                                                    : std::max(m, x[j]);
          }
          float l = 0;
          for (int j = 0; j < c.S; ++j) p[j] = seen[j] ? std::exp(x[j] - m) : 0.0f, l += p[j];
          const size_t row = (static_cast<size_t>(b) * c.Hq + h) * c.L + i;
          if (m == -inf) {  // nothing visible: out 0, logsumexp −∞, gradients 0
            for (int d = 0; d < c.Dv; ++d) zero_out[out.at(b, h, i, d)] = 1;
            for (int d = 0; d < c.Dk; ++d) zero_dq[q.at(b, h, i, d)] = 1;
            continue;
          }
          n_lse[row] = m + std::log(l);
          for (int j = 0; j < c.S; ++j) p[j] = round16(e, p[j] / l);
          for (int d = 0; d < c.Dv; ++d) {
            float sum = 0;
            for (int j = 0; j < c.S; ++j)
              if (seen[j]) sum += p[j] * v.values[v.at(b, hk, j, d)];
            o[d] = round16(e, sum);
            n_out[out.at(b, h, i, d)] = o[d];
          }
          if (!with_backward) continue;
          float delta = 0;
          for (int d = 0; d < c.Dv; ++d) delta += dout.values[dout.at(b, h, i, d)] * o[d];
          for (int j = 0; j < c.S; ++j) {
            if (!seen[j]) continue;
            for (int d = 0; d < c.Dk; ++d) zero_dk[k.at(b, hk, j, d)] = 0;
            for (int d = 0; d < c.Dv; ++d) zero_dv[v.at(b, hk, j, d)] = 0;
            float s = 0;
            for (int d = 0; d < c.Dv; ++d)
              s += dout.values[dout.at(b, h, i, d)] * v.values[v.at(b, hk, j, d)];
            const float prob = std::exp(x[j] - m) / l;
            const float ds = round16(e, prob * (s - delta));
            for (int d = 0; d < c.Dv; ++d)
              acc_dv[v.at(b, hk, j, d)] += p[j] * dout.values[dout.at(b, h, i, d)];
            for (int d = 0; d < c.Dk; ++d) {
              n_dq[q.at(b, h, i, d)] += ds * k.values[k.at(b, hk, j, d)];
              acc_dk[k.at(b, hk, j, d)] += ds * q.values[q.at(b, h, i, d)];
            }
          }
        }
    if (!with_backward) return;
    for (auto& x : n_dq) x = round16(e, x * scale);
    for (size_t x = 0; x < acc_dk.size(); ++x) n_dk[x] = round16(e, acc_dk[x] * scale);
    for (size_t x = 0; x < acc_dv.size(); ++x) n_dv[x] = round16(e, acc_dv[x]);
  }
};

// The acceptance rule for one tensor; an empty string when X passes, else why not.
struct Verdict {
  double err_x = 0, err_n = 0, allowed = 0;
  std::string failure;
};
// floor_unit: the unit roundoff of X's storage (unit_roundoff(e) for 16-bit results; for the
// float32 logsumexp a few float32 ulps, 2⁻²¹).
inline Verdict check(const std::string& name, const std::vector<float>& x,
                     const std::vector<double>& r, const std::vector<float>& n, double floor_unit,
                     const std::vector<char>& zero = {}) {
  Verdict v;
  double scale = 0;
  for (double y : r)
    if (std::isfinite(y)) scale = std::max(scale, std::fabs(y));
  for (size_t i = 0; i < r.size() && v.failure.empty(); ++i) {
    if (!std::isfinite(r[i])) {
      const bool same_inf = std::isinf(r[i]) && r[i] == x[i];
      if (std::isfinite(x[i]) || (std::isinf(r[i]) && !std::isnan(x[i]) && !same_inf))
        v.failure = name + "[" + std::to_string(i) + "] = " + std::to_string(x[i]) +
                    " where the reference is " + std::to_string(r[i]);
      continue;
    }
    if (!std::isfinite(x[i])) {
      v.failure = name + "[" + std::to_string(i) + "] = " + std::to_string(x[i]) +
                  " where the reference is finite, " + std::to_string(r[i]);
      continue;
    }
    if (!zero.empty() && zero[i] && (r[i] != 0.0 || x[i] != 0.0f)) {
      v.failure = name + "[" + std::to_string(i) + "] = " + std::to_string(x[i]) +
                  " where it is 0 by definition (reference " + std::to_string(r[i]) + ")";
      continue;
    }
    v.err_x = std::max(v.err_x, std::fabs(x[i] - r[i]));
    v.err_n = std::max(v.err_n, std::fabs(n[i] - r[i]));
  }
  v.allowed = 2.0 * v.err_n + floor_unit * scale + 1e-6;
  if (v.failure.empty() && v.err_x > v.allowed)
    v.failure = name + ": max|X − R| = " + std::to_string(v.err_x) +
                " > 2·max|N − R| + floor = " + std::to_string(v.allowed) +
                " (max|N − R| = " + std::to_string(v.err_n) + ")";
  return v;
}

}  // namespace qkv::cuda::tc_test
