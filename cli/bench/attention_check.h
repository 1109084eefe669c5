// Validation before timing (docs/CONVENTIONS.md §4.2): a fast path's result on a slice of a
// benchmark case against the float64 reference, with the tolerance rule of docs/CONVENTIONS.md
// §1.1 — a fast result X passes when max|X − R| ≤ 2·max|N − R| + 1e-6 for outputs (4·… for
// gradients), R the float64 reference and N a plain fp32 loop-per-formula result of the same
// inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qkv/attention.h"

namespace qkv::cli::bench {

// One query head's last `rows` query rows and all the keys of its kv head, as [1, 1, n, D]
// float32 tensors, with their reference and naive fp32 results. Causal cases are top-left with
// L = S; the slice is bottom-right so that its rows see exactly the keys they see in the case.
struct Slice {
  int64_t L = 0, S = 0, D = 0;  // of the case
  int64_t head = 0, first_row = 0, rows = 0;
  Tensor q, k, v, dout;
  AttentionOptions options;       // causal as above; path left to the caller
  Tensor ref_out;                 // float64 [1, 1, rows, D]
  Tensor ref_dq, ref_dk, ref_dv;  // float64; undefined without the backward
  // Under Precision::bf16 (options.precision) the references above are of the bf16-rounded
  // inputs and N is N_b (docs/CONVENTIONS.md §1.1b); these are the float64 results of the
  // unrounded inputs, what bf16 is measured against for the user. Undefined in fp32.
  Tensor exact_out, exact_dq, exact_dk, exact_dv;
  double naive_out_error = 0;  // max|N − R| of the output
  double naive_dq_error = 0, naive_dk_error = 0, naive_dv_error = 0;
};

// q, k, v, dout: the case's [B, Hq, L, D], [B, Hkv, S, D], [B, Hkv, S, D], [B, Hq, L, D] float32
// tensors (batch 0 is sliced). `causal`: top-left. `backward`: also the gradients' references.
// `precision`: the rule's (fp32: §1.1; bf16: §1.1b).
Slice make_slice(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout, bool causal,
                 int64_t head, int64_t rows, bool backward, Precision precision = Precision::fp32);

// Checks the slice's rows of a whole-case output `out` ([B, Hq, L, D] contiguous float32, as the
// timed run produced it) against the rule; throws qkv::Error (runtime) naming the case, the path
// and the head otherwise. Returns max|X − R|.
double check_forward(const std::string& case_name, const std::string& path, const Slice& s,
                     const float* out);

// Checks gradients computed on the slice's own problem (dq [rows, D], dk and dv [S, D]).
// Returns the largest max|X − R| of the three.
double check_backward(const std::string& case_name, const std::string& path, const Slice& s,
                      const float* dq, const float* dk, const float* dv);

// Checks the slice's rows of a whole-case dq ([B, Hq, L, D] contiguous, from the timed run): dqᵢ
// depends only on row i and the keys it sees, so it is the slice's own dq.
double check_dq_rows(const std::string& case_name, const std::string& path, const Slice& s,
                     const float* dq);

// bf16: max|X − exact| of the slice's rows of a whole-case output, and of gradients computed on
// the slice's own problem (dq [rows, D] or null, dk and dv [S, D]).
double exact_forward_error(const Slice& s, const float* out);
double exact_backward_error(const Slice& s, const float* dq, const float* dk, const float* dv);
// The slice's rows of a whole-case dq against the exact one.
double exact_dq_rows_error(const Slice& s, const float* dq);

// Throws qkv::Error (runtime) when x[0, n) holds a NaN or ∞.
void check_finite(const std::string& case_name, const std::string& what, const float* x, int64_t n);

}  // namespace qkv::cli::bench
