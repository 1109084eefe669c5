// The fused float32 path: applicability, views, and the calls into kernels/cpu.
#include "attention/fused.h"

#include <limits>

#include "kernels/cpu/flash_attention.h"
#include "qkv/threads.h"

namespace qkv::attention_detail {
namespace {

// A [B, H, L, D] view of a rank 2–4 tensor; copied only when its last dimension is strided.
struct Viewed {
  Tensor keep;  // owns the storage the view points into
  cpu::View view;
};

Viewed view_of(const Tensor& t) {
  Viewed v{t.strides().back() == 1 ? t : t.contiguous(), {}};
  const int r = v.keep.rank();
  v.view.data = v.keep.data<float>();
  for (int d = 0; d < 3; ++d) {
    const int src = r - 4 + d;  // dimensions missing on the left have one element: stride 0
    v.view.stride[d] = src >= 0 ? v.keep.strides()[src] : 0;
  }
  return v;
}

// The mask as a float32 additive bias (a bool mask as 0 / −∞), read through broadcast strides.
Tensor bias_of(const Tensor& mask, int64_t stride[4]) {
  Tensor bias;
  if (mask.dtype() == DType::b8) {
    const Tensor m = mask.contiguous();
    bias = Tensor(m.shape(), DType::f32);
    for (int64_t i = 0; i < m.numel(); ++i)
      bias.data<float>()[i] = m.data<bool>()[i] ? 0.0f : -std::numeric_limits<float>::infinity();
  } else {
    bias = mask.to(DType::f32);
  }
  broadcast_strides(bias.shape(), stride);
  return bias;
}

struct Prepared {
  Viewed q, k, v;
  Tensor bias;
  cpu::FlashProblem problem;
  int threads;
};

Prepared prepare(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o,
                 const Dims& d) {
  Prepared p{view_of(q), view_of(k), view_of(v), Tensor(), {}, resolve_num_threads(o.num_threads)};
  cpu::FlashProblem& f = p.problem;
  f.B = d.B, f.Hq = d.Hq, f.Hkv = d.Hkv, f.L = d.L, f.S = d.S, f.Dk = d.Dk, f.Dv = d.Dv;
  f.scale = static_cast<float>(o.scale.value_or(default_scale(o.score, d.Dk)));
  f.causal = o.causal;
  f.q = p.q.view, f.k = p.k.view, f.v = p.v.view;
  if (o.mask.defined()) {
    p.bias = bias_of(o.mask, f.bias_stride);
    f.bias = p.bias.data<float>();
  }
  f.key_lengths = o.key_lengths.empty() ? nullptr : o.key_lengths.data();
  // bf16: the kernels round q, k, v, P, dO and dX themselves (cpu::FlashProblem).
  f.precision = o.precision;
  return p;
}

Shape leading(const Dims& d, std::initializer_list<int64_t> tail) {
  const Shape bhl{d.B, d.Hq, d.L};
  Shape s(bhl.begin() + (4 - d.rank), bhl.begin() + 3);
  s.insert(s.end(), tail);
  return s;
}

}  // namespace

std::string fused_unsupported(const Tensor& q, const Tensor& k, const Tensor& v,
                              const AttentionOptions& o) {
  if (o.score != Score::scaled_dot && o.score != Score::dot)
    return "score " + std::string(to_string(o.score)) +
           " (the fused path covers scaled-dot and dot)";
  if (o.normalize != Normalize::softmax) return "normalize none (the fused path is softmax only)";
  for (const Tensor* t : {&q, &k, &v})
    if (t->dtype() != DType::f32)
      return std::string(dtype_name(t->dtype())) + " inputs (the fused path takes float32)";
  if (q.dim(-1) == 0 || v.dim(-1) == 0) return "a head dim of 0";
  if (o.need_weights || o.need_scores)
    return "weights or scores asked for (the fused path never stores the L×S matrix)";
  return "";
}

Path choose_path(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  if (o.path == Path::reference) return Path::reference;
  const std::string why = fused_unsupported(q, k, v, o);
  if (o.path == Path::cuda) {
    // The GPU's kernels cover what the CPU's fused kernels cover, with head dims up to 256.
    if (!why.empty())
      throw Error("path cuda does not apply to " + why + "; expected path reference or automatic");
    if (q.dim(-1) > 256 || v.dim(-1) > 256)
      throw Error("path cuda takes head dims up to 256, not " + std::to_string(q.dim(-1)) +
                  " and " + std::to_string(v.dim(-1)) + "; expected path fused or automatic");
    return Path::cuda;
  }
  if (o.path == Path::fused && !why.empty())
    throw Error("path fused does not apply to " + why + "; expected path reference or automatic");
  return why.empty() ? Path::fused : Path::reference;
}

AttentionResult fused_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                const AttentionOptions& o, const Dims& d) {
  const Prepared p = prepare(q, k, v, o, d);
  AttentionResult r;
  r.out = Tensor(leading(d, {d.Dv}), DType::f32);
  Tensor lse(leading(d, {}), DType::f32);
  cpu::SoftmaxStats stats;
  if (o.keep_for_backward) {
    r.saved_max = Tensor(leading(d, {}), DType::f32);
    r.saved_sum = Tensor(leading(d, {}), DType::f32);
    stats = {r.saved_max.data<float>(), r.saved_sum.data<float>()};
  }
  cpu::flash_forward(p.problem, r.out.data<float>(), lse.data<float>(), p.threads, stats);
  if (o.need_logsumexp) r.logsumexp = lse;
  return r;
}

AttentionGrads fused_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                        const Tensor& v, const AttentionOptions& o, const Dims& d,
                                        const AttentionResult* forward) {
  const Prepared p = prepare(q, k, v, o, d);
  Tensor out, row_max, row_sum;
  if (forward != nullptr) {
    const Shape rows = leading(d, {}), outs = leading(d, {d.Dv});
    auto fits = [](const Tensor& t, const Shape& shape) {
      return t.defined() && t.dtype() == DType::f32 && t.shape() == shape;
    };
    if (!fits(forward->out, outs) || !fits(forward->saved_max, rows) ||
        !fits(forward->saved_sum, rows))
      throw Error("attention_backward: the forward's out is " +
                  (forward->out.defined() ? shape_str(forward->out.shape()) : "none") +
                  " and its saved softmax " +
                  (forward->saved_max.defined() ? shape_str(forward->saved_max.shape()) : "none") +
                  "; expected float32 " + shape_str(outs) + " and " + shape_str(rows) +
                  ", as attention() returns them for these inputs");
    out = forward->out.contiguous();
    row_max = forward->saved_max.contiguous();
    row_sum = forward->saved_sum.contiguous();
  } else {
    out = Tensor(leading(d, {d.Dv}), DType::f32);
    row_max = Tensor(leading(d, {}), DType::f32);
    row_sum = Tensor(leading(d, {}), DType::f32);
  }
  // The kernels take the statistics as writable pointers; with `forward` they only read them.
  const cpu::SoftmaxStats stats{row_max.data<float>(), row_sum.data<float>()};
  if (forward == nullptr)
    cpu::flash_forward(p.problem, out.data<float>(), nullptr, p.threads, stats);
  const Tensor dout32 = dout.to(DType::f32);
  AttentionGrads g;
  g.dq = Tensor(q.shape(), DType::f32);
  g.dk = Tensor(k.shape(), DType::f32);
  g.dv = Tensor(v.shape(), DType::f32);
  cpu::flash_backward(p.problem, out.data<float>(), dout32.data<float>(), stats, g.dq.data<float>(),
                      g.dk.data<float>(), g.dv.data<float>(), &g.dscale, p.threads);
  return g;
}

}  // namespace qkv::attention_detail
