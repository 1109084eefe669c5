// nn/gru_step.h — one step of a GRU over a batch, forward and backward, for float32 and float64
// alike (GRUCell and GRU both run on it).
//
// The form is Bahdanau et al. 2014, Appendix A.1.1 (Cho et al. 2014's unit, biases added):
//   z  = σ(a_z),  a_z = gx_z + U_z h         gx = W x + b, computed by the caller
//   r  = σ(a_r),  a_r = gx_r + U_r h
//   n  = tanh(a_n),  a_n = gx_n + U_n (r ⊙ h)
//   h' = (1 − z) ⊙ h + z ⊙ n
// Cho et al. 2014 (eq. 7) writes h' = z ⊙ h + (1 − z) ⊙ h̃: the same family with z ↔ 1 − z, i.e.
// W_z, U_z, b_z negated. PyTorch's nn.GRU resets after the product instead,
// n = tanh(W_n x + b_in + r ⊙ (U_n h + b_hn)), which lets one GEMM give U h for all three gates
// (cuDNN's form); it is a different function of the parameters. qkv follows the paper whose model
// it builds, RNNsearch, and so has no b_hn: a bias inside U_n (r ⊙ h) would only add to b_n.
//
// Backward, with g = ∂L/∂h' (σ' = σ(1 − σ), tanh' = 1 − tanh²):
//   da_n = g ⊙ z ⊙ (1 − n²)              dU_n += da_nᵀ (r ⊙ h)
//   d(r ⊙ h) = da_n U_n
//   da_z = g ⊙ (n − h) ⊙ z ⊙ (1 − z)
//   da_r = d(r ⊙ h) ⊙ h ⊙ r ⊙ (1 − r)    dU_{z,r} += da_{z,r}ᵀ h
//   ∂L/∂h = g ⊙ (1 − z) + d(r ⊙ h) ⊙ r + da_{z,r} U_{z,r}
//   ∂L/∂gx = [da_z, da_r, da_n]           (the caller's W x + b backward takes it from there)
// Rows that are not active (a finished sequence) keep h' = h and pass g straight through.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/dense.h"
#include "kernels/reference/dense.h"

namespace qkv::nn::gru {

// y = x·Wᵀ + b and its backward: the float32 kernels for float, the float64 reference for double.
inline void linear(float* y, const float* x, const float* w, const float* b, int64_t n, int64_t in,
                   int64_t out) {
  cpu::linear(y, x, w, b, n, in, out);
}
inline void linear(double* y, const double* x, const double* w, const double* b, int64_t n,
                   int64_t in, int64_t out) {
  reference::linear(y, x, w, b, n, in, out);
}
inline void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x,
                            const float* w, int64_t n, int64_t in, int64_t out) {
  cpu::linear_backward(dx, dw, db, dy, x, w, n, in, out);
}
inline void linear_backward(double* dx, double* dw, double* db, const double* dy, const double* x,
                            const double* w, int64_t n, int64_t in, int64_t out) {
  reference::linear_backward(dx, dw, db, dy, x, w, n, in, out);
}

template <class T>
T sigmoid(T a) {
  return a >= 0 ? T(1) / (T(1) + std::exp(-a)) : std::exp(a) / (T(1) + std::exp(a));
}

// Forward of one step over b rows. gx: [b, 3H] (W x + b); h: [b, H]; u: [3H, H];
// active: b flags or null (all). Writes z, r, n (saved for the backward) and h_out, all [b, H].
template <class T>
void forward(T* h_out, T* z, T* r, T* n, const T* gx, const T* h, const T* u,
             const std::vector<char>* active, int64_t b, int64_t hidden) {
  const int64_t H = hidden;
  std::vector<T> a(b * 2 * H), rh(b * H), an(b * H);
  linear(a.data(), h, u, static_cast<const T*>(nullptr), b, H, 2 * H);  // [U_z h, U_r h]
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < H; ++j) {
      z[i * H + j] = sigmoid(gx[i * 3 * H + j] + a[i * 2 * H + j]);
      r[i * H + j] = sigmoid(gx[i * 3 * H + H + j] + a[i * 2 * H + H + j]);
      rh[i * H + j] = r[i * H + j] * h[i * H + j];
    }
  linear(an.data(), rh.data(), u + 2 * H * H, static_cast<const T*>(nullptr), b, H, H);
  for (int64_t i = 0; i < b; ++i) {
    const bool on = active == nullptr || (*active)[i];
    for (int64_t j = 0; j < H; ++j) {
      const int64_t k = i * H + j;
      n[k] = std::tanh(gx[i * 3 * H + 2 * H + j] + an[k]);
      h_out[k] = on ? (T(1) - z[k]) * h[k] + z[k] * n[k] : h[k];
    }
  }
}

// Backward of one step: g = ∂L/∂h_out [b, H] → dgx [b, 3H] (overwritten; 0 on inactive rows),
// dh [b, H] (overwritten), du += (u's gradient [3H, H]).
template <class T>
void backward(T* dgx, T* dh, T* du, const T* g, const T* z, const T* r, const T* n, const T* h,
              const T* u, const std::vector<char>* active, int64_t b, int64_t hidden) {
  const int64_t H = hidden;
  std::vector<T> dan(b * H), rh(b * H), drh(b * H), dazr(b * 2 * H), dhu(b * H);
  for (int64_t i = 0; i < b; ++i) {
    const bool on = active == nullptr || (*active)[i];
    for (int64_t j = 0; j < H; ++j) {
      const int64_t k = i * H + j;
      dan[k] = on ? g[k] * z[k] * (T(1) - n[k] * n[k]) : T(0);
      rh[k] = on ? r[k] * h[k] : T(0);
    }
  }
  linear_backward(drh.data(), du + 2 * H * H, static_cast<T*>(nullptr), dan.data(), rh.data(),
                  u + 2 * H * H, b, H, H);
  for (int64_t i = 0; i < b; ++i) {
    const bool on = active == nullptr || (*active)[i];
    for (int64_t j = 0; j < H; ++j) {
      const int64_t k = i * H + j;
      const T zk = z[k], rk = r[k];
      T* dg = dgx + i * 3 * H;
      if (!on) {
        dazr[i * 2 * H + j] = dazr[i * 2 * H + H + j] = T(0);
        dg[j] = dg[H + j] = dg[2 * H + j] = T(0);
        dh[k] = g[k];
        continue;
      }
      const T daz = g[k] * (n[k] - h[k]) * zk * (T(1) - zk);
      const T dar = drh[k] * h[k] * rk * (T(1) - rk);
      dazr[i * 2 * H + j] = dg[j] = daz;
      dazr[i * 2 * H + H + j] = dg[H + j] = dar;
      dg[2 * H + j] = dan[k];
      dh[k] = g[k] * (T(1) - zk) + drh[k] * rk;
    }
  }
  linear_backward(dhu.data(), du, static_cast<T*>(nullptr), dazr.data(), h, u, b, H, 2 * H);
  for (int64_t k = 0; k < b * H; ++k) dh[k] += dhu[k];  // inactive rows: dazr = 0, so dhu = 0
}

}  // namespace qkv::nn::gru
