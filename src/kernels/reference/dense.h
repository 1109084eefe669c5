// Float64 oracles of the dense layers around attention: linear maps, layer normalization, GELU.
// Plain loops straight from the formulas; the fast float32 twins are in kernels/cpu/dense.h.
#pragma once

#include <cstdint>

namespace qkv::reference {

// y = x·Wᵀ + b — x: [N, I], w: [O, I] (as torch.nn.Linear stores it), b: [O] or null, y: [N, O].
void linear(double* y, const double* x, const double* w, const double* b, int64_t n, int64_t in,
            int64_t out);
// The backward of linear: forward was y = x·Wᵀ + b, so dx = dy·W, dW += dyᵀ·x, db += Σ_rows dy.
// dx (overwritten) may be null (not needed); db may be null (no bias).
void linear_backward(double* dx, double* dw, double* db, const double* dy, const double* x,
                     const double* w, int64_t n, int64_t in, int64_t out);
// Each row of x: (x − mean) / √(var + eps) · gamma + beta, var the biased variance
// (Ba et al. 2016). x, y: [N, D] (may alias); gamma, beta: [D].
void layer_norm(double* y, const double* x, const double* gamma, const double* beta, int64_t n,
                int64_t d, double eps);
// y = GELU(x) = x·Φ(x) = ½x·erfc(−x/√2) (Hendrycks & Gimpel 2016), the exact erf form.
void gelu(double* y, const double* x, int64_t n);

}  // namespace qkv::reference
