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

// --- Training: the forward/backward pairs of nn::LayerNorm and nn::FeedForward's activations. ---

// LayerNorm forward that saves what its backward needs: per row x̂ = (x − mean)·inv_std with
// inv_std = 1/√(var + eps), y = x̂·gamma + beta. x, y, xhat: [N, D] (y may alias x); inv_std: [N].
void layer_norm_forward(double* y, double* xhat, double* inv_std, const double* x,
                        const double* gamma, const double* beta, int64_t n, int64_t d, double eps);
// The backward of layer_norm_forward. Forward was y = x̂·γ + β with x̂ = (x − μ)/σ, so with
// g = dy·γ: ∂L/∂x̂ = g, and through μ and σ (∂σ/∂x_j = x̂_j/D):
//   dx = (1/σ)·(g − mean(g) − x̂·mean(g·x̂))  (overwritten),
//   dγ += Σ_rows dy·x̂,  dβ += Σ_rows dy.
void layer_norm_backward(double* dx, double* dgamma, double* dbeta, const double* dy,
                         const double* xhat, const double* inv_std, const double* gamma, int64_t n,
                         int64_t d);
// y = max(x, 0) (y may alias x); a NaN stays NaN.
void relu(double* y, const double* x, int64_t n);
// Forward was y = max(x, 0), so dx = dy where x > 0, else 0 (dx may alias dy).
void relu_backward(double* dx, const double* dy, const double* x, int64_t n);
// Forward was y = x·Φ(x), so dx = dy·(Φ(x) + x·φ(x)), φ the standard normal density
// (dx may alias dy).
void gelu_backward(double* dx, const double* dy, const double* x, int64_t n);

}  // namespace qkv::reference
