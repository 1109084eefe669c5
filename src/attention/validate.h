// Validation of attention inputs at the API boundary: every message names the argument, what was
// found and what was expected. The command line passes its own names ("--keys K.npy").
#pragma once

#include <string>

#include "qkv/attention.h"

namespace qkv::attention_detail {

using qkv::ArgumentNames;

// The sizes of a valid problem, in the canonical [B, H, L, D] layout.
struct Dims {
  int rank = 4;  // of q, k, v and the results
  int64_t B = 1, Hq = 1, Hkv = 1, L = 0, S = 0, Dq = 0, Dk = 0, Dv = 0;
  int64_t A = 0;  // additive hidden size
  // Whether the problem computes in float32 (none of q, k, v is float64): a float mask is then
  // read as float32 reads it, so a value beyond −3.4e38 masks (−∞) on every path.
  bool f32 = true;
};

// Throws qkv::Error (Kind::invalid_argument) unless q, k, v and options make a valid problem.
Dims check_inputs(const Tensor& q, const Tensor& k, const Tensor& v,
                  const AttentionOptions& options, const ArgumentNames& names = {});

// The bias added to the scaled scores, float64 [B, Hq, L, S]: 0, the float mask's value, or −∞
// where the bool mask, causality or key lengths hide the key. Undefined when nothing masks.
Tensor logit_bias(const AttentionOptions& options, const Dims& dims);
// Rows [i0, i0 + rows) of batch b, query head h of that bias, [rows, S] (undefined when nothing
// masks): what a problem of only those rows needs to see what the whole problem's rows see.
Tensor logit_bias_rows(const AttentionOptions& options, const Dims& dims, int64_t b, int64_t h,
                       int64_t i0, int64_t rows);

// Strides that read a contiguous mask of shape `shape` (rank ≤ 4) as [B, Hq, L, S]: 0 along each
// broadcast dimension (size 1, or absent on the left).
void broadcast_strides(const Shape& shape, int64_t stride[4]);

}  // namespace qkv::attention_detail
