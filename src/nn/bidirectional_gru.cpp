// BidirectionalGRU: RNNsearch's encoder (Bahdanau et al. 2014 §3.2). A forward GRU reads x_1..x_T,
// a reverse GRU reads x_T..x_1, and the annotation of position j is h_j = [→h_j; ←h_j], which
// sums up the words before j and after it.
#include <algorithm>
#include <string>

#include "core/dispatch.h"
#include "qkv/nn.h"

namespace qkv::nn {

BidirectionalGRU::BidirectionalGRU(std::string name, int64_t in, int64_t hidden, Rng& rng,
                                   DType dtype)
    : forward_gru(name + ".forward", in, hidden, false, rng, dtype),
      backward_gru(name + ".backward", in, hidden, true, rng, dtype) {}

namespace {

// [B, T, H] and [B, T, H] side by side → [B, T, 2H].
Tensor concat_features(const Tensor& a, const Tensor& b) {
  const int64_t rows = a.dim(0) * a.dim(1), H = a.dim(2);
  Tensor out({a.dim(0), a.dim(1), 2 * H}, a.dtype());
  dispatch_float(a.dtype(), [&]<class T>(T) {
    for (int64_t i = 0; i < rows; ++i) {
      std::copy_n(a.data<T>() + i * H, H, out.data<T>() + i * 2 * H);
      std::copy_n(b.data<T>() + i * H, H, out.data<T>() + i * 2 * H + H);
    }
  });
  return out;
}

}  // namespace

Tensor BidirectionalGRU::forward(const Tensor& x, const Tensor& h0_forward,
                                 const Tensor& h0_backward, const std::vector<int64_t>& lengths) {
  const Tensor f = forward_gru.forward(x, h0_forward, lengths);
  const Tensor b = backward_gru.forward(x, h0_backward, lengths);
  return concat_features(f, b);
}

BidirectionalGRU::Grads BidirectionalGRU::backward(const Tensor& dy) {
  const int64_t H = forward_gru.cell.hidden();
  if (!dy.defined() || dy.rank() != 3 || dy.dim(2) != 2 * H)
    throw Error("BidirectionalGRU " + forward_gru.cell.weight_ih.name +
                "::backward: dy has shape " +
                (dy.defined() ? shape_str(dy.shape()) : "(undefined)") + "; expected [B, T, " +
                std::to_string(2 * H) + "]");
  GRU::Grads f = forward_gru.backward(dy.narrow(2, 0, H).contiguous());
  GRU::Grads b = backward_gru.backward(dy.narrow(2, H, H).contiguous());
  dispatch_float(f.dx.dtype(), [&]<class T>(T) {
    T* dx = f.dx.data<T>();
    const T* other = b.dx.data<T>();
    for (int64_t i = 0; i < f.dx.numel(); ++i) dx[i] += other[i];
  });
  return {f.dx, f.dh0, b.dh0};
}

void BidirectionalGRU::collect(std::vector<Parameter*>& out) {
  forward_gru.collect(out);
  backward_gru.collect(out);
}

}  // namespace qkv::nn
