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
// (db may be null). Split over qkv's workers like linear.
void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x,
                     const float* w, int64_t n, int64_t in, int64_t out, int num_threads = 0);
// Each row of x (+ residual, when not null): (x − mean) / √(var + eps) · gamma + beta.
// x, y: [N, D] (may alias); residual: [N, D] or null.
void layer_norm(float* y, const float* x, const float* residual, const float* gamma,
                const float* beta, int64_t n, int64_t d, double eps, int num_threads = 0);
// x = GELU(x), in place.
void gelu(float* x, int64_t n, int num_threads = 0);

// --- Training: the forward/backward pairs of nn::LayerNorm and nn::FeedForward's activations. ---

// LayerNorm forward that saves what its backward needs: per row x̂ = (x − mean)·inv_std with
// inv_std = 1/√(var + eps) (biased variance), y = x̂·gamma + beta. x, y, xhat: [N, D] (y may alias
// x); inv_std: [N]. Row statistics in float32, two passes.
void layer_norm_forward(float* y, float* xhat, float* inv_std, const float* x, const float* gamma,
                        const float* beta, int64_t n, int64_t d, double eps, int num_threads = 0);
// The backward of layer_norm_forward, with g = dy·gamma:
//   dx = inv_std·(g − mean(g) − x̂·mean(g·x̂)) (overwritten), dgamma += Σ_rows dy·x̂,
//   dbeta += Σ_rows dy. Rows are split across workers for dx; dgamma and dbeta are summed over
// rows in order, so the result does not depend on the thread count.
void layer_norm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* xhat,
                         const float* inv_std, const float* gamma, int64_t n, int64_t d,
                         int num_threads = 0);
// y = max(x, 0) (y may alias x); a NaN stays NaN.
void relu(float* y, const float* x, int64_t n);
// dx = dy where x > 0, else 0 (dx may alias dy). x is the forward's input.
void relu_backward(float* dx, const float* dy, const float* x, int64_t n);
// dx = dy·GELU'(x) = dy·(Φ(x) + x·φ(x)) (dx may alias dy), x the forward's input.
void gelu_backward(float* dx, const float* dy, const float* x, int64_t n, int num_threads = 0);

}  // namespace qkv::cpu
