// Fast float32 dense layers around attention: linear maps through OpenBLAS SGEMM, layer
// normalization and GELU over rows, split across the process's worker threads. The float64
// oracles with the same signatures are in kernels/reference/dense.h.
#pragma once

#include <cstdint>

namespace qkv::cpu {

// y = x·Wᵀ + b — x: [N, I], w: [O, I], b: [O] or null, y: [N, O]. qkv's workers each run a
// single-threaded SGEMM on a block: of rows when there are many, of output features when there
// are few (one short sentence: each core then streams half of W). Callers hold OpenBLAS at one
// thread (SingleThreadedBlas) around a whole model run.
void linear(float* y, const float* x, const float* w, const float* b, int64_t n, int64_t in,
            int64_t out, int num_threads = 0);
// The backward of linear: dx = dy·W (overwritten; may be null), dW += dyᵀ·x, db += Σ_rows dy
// (db may be null). Single SGEMMs; OpenBLAS threads them.
void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x,
                     const float* w, int64_t n, int64_t in, int64_t out);
// Each row of x (+ residual, when not null): (x − mean) / √(var + eps) · gamma + beta.
// x, y: [N, D] (may alias); residual: [N, D] or null.
void layer_norm(float* y, const float* x, const float* residual, const float* gamma,
                const float* beta, int64_t n, int64_t d, double eps, int num_threads = 0);
// x = GELU(x), in place.
void gelu(float* x, int64_t n, int num_threads = 0);

}  // namespace qkv::cpu
