// qkv::attention and qkv::attention_backward: validate, bring the inputs to the canonical
// float64 [B, H, L, D] layout, run the kernel, give the results back in the caller's rank and
// dtype.
#include "qkv/attention.h"

#include <limits>

#include "attention/cuda.h"
#include "attention/fused.h"
#include "attention/validate.h"
#include "kernels/cpu/bf16.h"
#include "kernels/reference/attention.h"

namespace qkv {
namespace {

using attention_detail::Dims;

// Inputs converted once to contiguous float64, and the problem that points into them.
struct Prepared {
  Dims dims;
  DType dtype;  // of the results
  Tensor q, k, v, bias, w, w_q, w_k, v_param;
  reference::Problem problem;
};

Tensor as_f64(const Tensor& t) {
  return t.defined() && t.dtype() == DType::f64 ? t.contiguous()
         : t.defined()                          ? t.to(DType::f64)
                                                : Tensor();
}

// Precision::bf16 on the reference path: each value rounded to bfloat16 by the kernels' own
// rounding (kernels/cpu/bf16.h: ties to even, bf16 subnormals flushed to signed zero as
// vdpbf16ps does), through float32 when it is float64, so that the reference and the fused
// kernels see the very same inputs; in a new tensor, as as_f64 may have returned the caller's
// own storage. The float64 reference of the rounded inputs is R_b of
// docs/CONVENTIONS.md §1.1b, the twin the bf16 kernels are checked against.
Tensor bf16_rounded(const Tensor& t64) {
  Tensor r(t64.shape(), DType::f64);
  const double* from = t64.data<double>();
  double* to = r.data<double>();
  for (int64_t i = 0; i < t64.numel(); ++i)
    to[i] = static_cast<double>(cpu::round_bf16(static_cast<float>(from[i])));
  return r;
}

Prepared prepare(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  Prepared p;
  p.dims = attention_detail::check_inputs(q, k, v, o);
  const Dims& d = p.dims;
  const bool any_f64 =
      q.dtype() == DType::f64 || k.dtype() == DType::f64 || v.dtype() == DType::f64;
  p.dtype = any_f64 ? DType::f64 : DType::f32;
  p.q = as_f64(q), p.k = as_f64(k), p.v = as_f64(v);
  // Only q, k and v are the products' inputs the option names; a score's learned matrices (W,
  // W_q, W_k, v) and the mask keep their precision.
  if (o.precision == Precision::bf16)
    p.q = bf16_rounded(p.q), p.k = bf16_rounded(p.k), p.v = bf16_rounded(p.v);
  p.bias = attention_detail::logit_bias(o, d);
  if (o.score == Score::general) p.w = as_f64(o.params.w);
  if (o.score == Score::additive)
    p.w_q = as_f64(o.params.w_q), p.w_k = as_f64(o.params.w_k), p.v_param = as_f64(o.params.v);

  auto ptr = [](const Tensor& t) { return t.defined() ? t.data<double>() : nullptr; };
  reference::Problem& pr = p.problem;
  pr.B = d.B, pr.Hq = d.Hq, pr.Hkv = d.Hkv, pr.L = d.L, pr.S = d.S, pr.Dv = d.Dv;
  pr.score = {.score = o.score,
              .dq = d.Dq,
              .dk = d.Dk,
              .a = d.A,
              .w = ptr(p.w),
              .w_q = ptr(p.w_q),
              .w_k = ptr(p.w_k),
              .v = ptr(p.v_param)};
  pr.normalize = o.normalize;
  pr.scale = o.scale.value_or(default_scale(o.score, d.Dk));
  if (p.dtype == DType::f32) pr.range = std::numeric_limits<float>::max();
  pr.q = ptr(p.q), pr.k = ptr(p.k), pr.v = ptr(p.v), pr.bias = ptr(p.bias);
  return p;
}

// A result shape: q's leading dimensions (those its rank has) followed by `tail`.
Shape result_shape(const Dims& d, int leading_from_bhl, std::initializer_list<int64_t> tail) {
  const Shape bhl{d.B, d.Hq, d.L};
  Shape s(bhl.begin() + (4 - d.rank), bhl.begin() + leading_from_bhl);
  s.insert(s.end(), tail);
  return s;
}

Tensor finish(Tensor t, const Shape& shape, DType dtype) {
  return (dtype == DType::f64 ? t : t.to(dtype)).reshape(shape);
}

// The inputs checked as the forward checks them, and dout shaped like the output.
Dims check_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                    const AttentionOptions& options) {
  const Dims dims = attention_detail::check_inputs(q, k, v, options);
  const Shape out_shape = result_shape(dims, 3, {dims.Dv});
  if (!dout.defined() || dout.dtype() == DType::b8 || dout.shape() != out_shape)
    throw Error("dout has shape " + (dout.defined() ? shape_str(dout.shape()) : "none") +
                "; expected a float tensor shaped like the output, " + shape_str(out_shape));
  return dims;
}

}  // namespace

AttentionResult attention(const Tensor& q, const Tensor& k, const Tensor& v,
                          const AttentionOptions& options) {
  const Dims dims = attention_detail::check_inputs(q, k, v, options);
  const Path path = attention_detail::choose_path(q, k, v, options);
  if (path == Path::fused || path == Path::cuda) {
    AttentionResult r = path == Path::fused
                            ? attention_detail::fused_attention(q, k, v, options, dims)
                            : attention_detail::cuda_attention(q, k, v, options, dims);
    if (options.keep_for_backward) r.fingerprint = fingerprint_of(q, k, v, options);
    return r;
  }
  const Prepared p = prepare(q, k, v, options);
  const Dims& d = p.dims;
  const Shape bhls{d.B, d.Hq, d.L, d.S};
  Tensor out({d.B, d.Hq, d.L, d.Dv}, DType::f64);
  Tensor weights = options.need_weights ? Tensor(bhls, DType::f64) : Tensor();
  Tensor lse = options.need_logsumexp ? Tensor({d.B, d.Hq, d.L}, DType::f64) : Tensor();
  Tensor scores = options.need_scores ? Tensor(bhls, DType::f64) : Tensor();
  Tensor logits = options.need_scores ? Tensor(bhls, DType::f64) : Tensor();
  auto ptr = [](Tensor& t) { return t.defined() ? t.data<double>() : nullptr; };

  reference::attention_forward(p.problem, {.out = ptr(out),
                                           .weights = ptr(weights),
                                           .lse = ptr(lse),
                                           .scores = ptr(scores),
                                           .logits = ptr(logits)});

  AttentionResult r;
  const Shape by_key = result_shape(d, 3, {d.S});
  r.out = finish(out, result_shape(d, 3, {d.Dv}), p.dtype);
  if (weights.defined()) r.weights = finish(weights, by_key, p.dtype);
  if (lse.defined()) r.logsumexp = finish(lse, result_shape(d, 3, {}), p.dtype);
  if (scores.defined()) r.scores = finish(scores, by_key, p.dtype);
  if (logits.defined()) r.logits = finish(logits, by_key, p.dtype);
  if (options.keep_for_backward) r.fingerprint = fingerprint_of(q, k, v, options);
  return r;
}

AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                  const Tensor& v, const AttentionResult& forward,
                                  const AttentionOptions& options) {
  const bool saved = forward.saved_max.defined() || forward.saved_sum.defined();
  if (!saved && !forward.fingerprint.recorded) return attention_backward(dout, q, k, v, options);
  const Dims dims = check_backward(dout, q, k, v, options);
  // A saved softmax of other inputs or options gives wrong gradients without a sign: it is refused.
  // So is a fingerprint of others without one (the reference path saves none), a mistake the same.
  if (!forward.fingerprint.recorded)
    throw Error(
        "attention_backward: the forward's saved softmax has no fingerprint of its inputs; "
        "expected the result of attention() with keep_for_backward, as it returned it");
  const std::string difference =
      fingerprint_difference(forward.fingerprint, fingerprint_of(q, k, v, options));
  if (!difference.empty())
    throw Error("attention_backward: the saved forward was computed " + difference +
                "; expected the forward of these very inputs and options");
  if (!saved) return attention_backward(dout, q, k, v, options);
  if (attention_detail::choose_path(q, k, v, options) != Path::fused)
    throw Error(
        "attention_backward: the forward saved the fused path's softmax, but these "
        "options take the reference path; expected the forward's own options");
  return attention_detail::fused_attention_backward(dout, q, k, v, options, dims, &forward);
}

AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                  const Tensor& v, const AttentionOptions& options) {
  const Dims dims = check_backward(dout, q, k, v, options);
  const Path path = attention_detail::choose_path(q, k, v, options);
  if (path == Path::fused)
    return attention_detail::fused_attention_backward(dout, q, k, v, options, dims);
  if (path == Path::cuda)
    return attention_detail::cuda_attention_backward(dout, q, k, v, options, dims);
  const Prepared p = prepare(q, k, v, options);
  // bf16: dout, the backward's first product input, rounded as q, k and v are.
  const Tensor dout64 =
      options.precision == Precision::bf16 ? bf16_rounded(as_f64(dout)) : as_f64(dout);

  auto zeros_like = [](const Tensor& t) {
    return t.defined() ? Tensor(t.shape(), DType::f64) : Tensor();
  };
  Tensor dq = zeros_like(p.q), dk = zeros_like(p.k), dv = zeros_like(p.v);
  Tensor dw = zeros_like(p.w), dw_q = zeros_like(p.w_q), dw_k = zeros_like(p.w_k),
         dv_param = zeros_like(p.v_param);
  auto ptr = [](Tensor& t) { return t.defined() ? t.data<double>() : nullptr; };
  double dscale = 0;
  reference::attention_backward(p.problem, dout64.data<double>(),
                                {.dq = ptr(dq),
                                 .dk = ptr(dk),
                                 .dv = ptr(dv),
                                 .dw = ptr(dw),
                                 .dw_q = ptr(dw_q),
                                 .dw_k = ptr(dw_k),
                                 .dv_param = ptr(dv_param),
                                 .dscale = &dscale});

  // Each gradient takes the dtype of what it differentiates.
  auto back = [](const Tensor& g, const Tensor& like) {
    return g.defined() ? finish(g, like.shape(), like.dtype()) : Tensor();
  };
  AttentionGrads grads;
  grads.dq = back(dq, q), grads.dk = back(dk, k), grads.dv = back(dv, v);
  grads.dparams = {.w = back(dw, options.params.w),
                   .w_q = back(dw_q, options.params.w_q),
                   .w_k = back(dw_k, options.params.w_k),
                   .v = back(dv_param, options.params.v)};
  grads.dscale = dscale;
  return grads;
}

}  // namespace qkv

namespace qkv {

void check_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                     const AttentionOptions& options, const ArgumentNames& names) {
  attention_detail::check_inputs(q, k, v, options, names);
}

Path chosen_path(const Tensor& q, const Tensor& k, const Tensor& v,
                 const AttentionOptions& options) {
  return attention_detail::choose_path(q, k, v, options);
}

}  // namespace qkv
