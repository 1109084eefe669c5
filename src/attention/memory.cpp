// What one attention call allocates, known before it runs (qkv/attention.h, "what a call needs"):
// the allocations of attention.cpp, fused.cpp and the kernels they call, summed here (a change
// there needs one here; tests/attention/attention_memory_test.cpp and python/tests compare).
// Sizes multiply in double: a broadcast view (stride 0) can describe far more elements than any
// memory holds, and its copies are counted as such.
#include "qkv/memory.h"

#include <algorithm>

#include "attention/fused.h"
#include "attention/validate.h"
#include "kernels/cpu/flash_common.h"
#include "qkv/attention.h"
#include "qkv/threads.h"

namespace qkv {
namespace {

using attention_detail::Dims;

double elements(const Tensor& t) {
  if (!t.defined()) return 0;
  double n = 1;
  for (int64_t d : t.shape()) n *= static_cast<double>(d);
  return n;
}

bool masks_anything(const AttentionOptions& o) {
  return o.mask.defined() || o.causal != Causal::none || !o.key_lengths.empty();
}

// The float64 copy prepare() makes of an input (none of a contiguous float64 one, used in place).
double float64_copy(const Tensor& t) {
  return t.defined() && t.dtype() == DType::f64 && t.is_contiguous() ? 0 : 8 * elements(t);
}

// Those of the inputs and the score's parameters; with precision bf16 also the rounded float64
// copies of q, k and v (counted whole: a contiguous float64 input is not copied first).
double reference_inputs(const Tensor& q, const Tensor& k, const Tensor& v,
                        const AttentionOptions& o) {
  const ScoreParams& p = o.params;
  const double rounded =
      o.precision == Precision::bf16 ? 8 * (elements(q) + elements(k) + elements(v)) : 0;
  return float64_copy(q) + float64_copy(k) + float64_copy(v) + float64_copy(p.w) +
         float64_copy(p.w_q) + float64_copy(p.w_k) + float64_copy(p.v) + rounded;
}

// A gradient (or a result) as the reference gives it: float64, then converted to t's dtype.
double reference_result(const Tensor& t) {
  return (t.defined() && t.dtype() == DType::f32 ? 8 + 4 : 8) * elements(t);
}

// The masks as the reference reads them: the user's mask as float64 (MaskReader; a float64 mask
// of a float32 problem by way of a float32 copy) and, where anything masks, the float64 bias
// [B, Hq, L, S] of every mask together (logit_bias).
double reference_masks(const Dims& d, const AttentionOptions& o) {
  const double weights = static_cast<double>(d.B) * d.Hq * d.L * d.S;
  const bool through_f32 = d.f32 && o.mask.defined() && o.mask.dtype() == DType::f64;
  return (through_f32 ? 8 + 4 : 8) * elements(o.mask) + (masks_anything(o) ? 8 * weights : 0);
}

// The fused kernels' inputs: a view of each, copied only where its last dimension is strided;
// the mask as a float32 bias of its own shape (broadcast by strides, never expanded).
double fused_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  double bytes = 4 * elements(o.mask);
  for (const Tensor* t : {&q, &k, &v})
    if (t->rank() > 0 && t->strides().back() != 1) bytes += 4 * elements(*t);
  return bytes;
}

// Each worker's tiles (flash_forward's Scratch: a tile of query rows, the transposed and the
// clean key tile, the value tile, the scores and the output accumulator).
double forward_tiles(const Dims& d, int workers) {
  using namespace cpu::flash;
  const double dk = static_cast<double>(d.Dk), dv = static_cast<double>(d.Dv);
  return workers * 4.0 * (kRows * (dk + dv) + kKeys * (2 * dk + dv) + kRows * kKeys);
}

}  // namespace

int64_t attention_bytes(const Tensor& q, const Tensor& k, const Tensor& v,
                        const AttentionOptions& o) {
  const Dims d = attention_detail::check_inputs(q, k, v, o);
  const double rows = static_cast<double>(d.B) * d.Hq * d.L;
  const double weights = rows * static_cast<double>(d.S), outs = rows * static_cast<double>(d.Dv);
  // The fingerprint gathers one strided row at a time: nothing that grows.
  if (attention_detail::choose_path(q, k, v, o) == Path::cuda) {
    // Host memory only (attention/cuda.cpp): each input as a contiguous float32 copy and its
    // staged bytes, the output and logsumexp as copied back and as returned.
    const double inputs = elements(q) + elements(k) + elements(v);
    return saturated_bytes(8 * inputs + 8 * outs + 8 * rows + 8.0 * d.B);
  }
  if (attention_detail::choose_path(q, k, v, o) == Path::fused) {
    // The output and its row statistics (logsumexp, and the saved max and sum), K and V packed
    // once for all the row tiles that read them (pack_kv), and each worker's tiles.
    const double packed = 4 * (elements(k) + elements(v)) + 16.0 * d.B * d.Hkv * d.S;
    return saturated_bytes(fused_inputs(q, k, v, o) + 4 * outs + 3 * 4 * rows + packed +
                           forward_tiles(d, resolve_num_threads(o.num_threads)));
  }
  // float32 results are converted from float64 ones, which live until the call returns.
  const bool f32 = q.dtype() == DType::f32 && k.dtype() == DType::f32 && v.dtype() == DType::f32;
  const double per_result = f32 ? 8 + 4 : 8;
  double bytes = reference_inputs(q, k, v, o) + reference_masks(d, o) + per_result * outs;
  if (o.need_logsumexp) bytes += per_result * rows;
  if (o.need_weights) bytes += per_result * weights;
  if (o.need_scores) bytes += 2 * per_result * weights;  // scores and logits
  bytes += 4 * 8.0 * d.S;  // one row's scores, logits and weights (the reference's scratch)
  return saturated_bytes(bytes);
}

int64_t attention_backward_bytes(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const AttentionOptions& options) {
  AttentionOptions o = options;
  o.need_weights = o.need_scores = o.need_logsumexp = false;
  o.keep_for_backward = false;
  const Dims d = attention_detail::check_inputs(q, k, v, o);
  const double rows = static_cast<double>(d.B) * d.Hq * d.L;
  const double outs = rows * static_cast<double>(d.Dv);
  const double grads = elements(q) + elements(k) + elements(v);
  if (attention_detail::choose_path(q, k, v, o) == Path::cuda) {
    // Host memory only: the inputs and dout staged as above, the gradients copied back (float32,
    // then float64 for dscale's sum of dq·q).
    return saturated_bytes(8 * (grads + outs) + 4 * grads + 16 * elements(q) + 8.0 * d.B);
  }
  if (attention_detail::choose_path(q, k, v, o) == Path::fused) {
    // The forward's output and row statistics (run again, or a saved forward's contiguous
    // copies), dout as float32, dq, dk and dv, the partial dQ of each key chunk past the first,
    // every query row as the products read it (Q, packed Q and packed dO, dO rounded in bf16, and
    // per row D and the visible end), and each worker's key tiles.
    using namespace cpu::flash;
    const BackwardChunks chunks = backward_chunks(d.B, d.Hq, d.Hkv, d.S, d.Dk, d.L);
    const int workers = static_cast<int>(std::min<double>(
        resolve_num_threads(o.num_threads), std::max(1.0, 1.0 * d.B * d.Hkv * chunks.count)));
    const double dk = static_cast<double>(d.Dk), dv = static_cast<double>(d.Dv);
    const bool in_bf16 = o.precision == Precision::bf16;
    const double query_rows = rows * (4 * (2 * dk + (in_bf16 ? 2 : 1) * dv) + 12);
    const double per_worker =
        4 * (kBackwardKeys * (3 * dk + 2 * dv) + 4.0 * kBackwardRows * kBackwardKeys);
    const double partials = 4.0 * (chunks.count - 1) * rows * dk;
    return saturated_bytes(fused_inputs(q, k, v, o) + 4 * (2 * outs + 2 * rows) + 4 * grads +
                           partials + query_rows + workers * per_worker);
  }
  // The reference: its float64 inputs and masks, dout as float64 (counted as a copy), every
  // gradient in float64 and then in its input's dtype, and one row's scratch.
  const ScoreParams& p = o.params;
  double gradients = 0;
  for (const Tensor* t : {&q, &k, &v, &p.w, &p.w_q, &p.w_k, &p.v})
    gradients += reference_result(*t);
  const double rounded_dout = o.precision == Precision::bf16 ? 8 * outs : 0;
  return saturated_bytes(reference_inputs(q, k, v, o) + reference_masks(d, o) + 8 * outs +
                         rounded_dout + gradients + 4 * 8.0 * d.S);
}

}  // namespace qkv
