// GRU over a sequence, forward and backpropagation through time (Werbos 1990): the steps of
// nn/gru_step.h, with W x + b for every position in one product before the recurrence and its
// backward in one product after it.
#include <algorithm>
#include <string>

#include "core/dispatch.h"
#include "nn/gru_step.h"
#include "qkv/nn.h"

namespace qkv::nn {

struct GRU::Saved {
  Tensor x;  // [B, T, in], contiguous, padding positions zeroed (so that dW gets exact zeros)
  std::vector<int64_t> lengths;
  Tensor h, z, r, n;  // [T, B, H]: the state before step s, and the step's gates
};

GRU::GRU(std::string name, int64_t in, int64_t hidden, bool reverse, Rng& rng, DType dtype)
    : cell(std::move(name), in, hidden, rng, dtype), reverse_(reverse) {}

namespace {

// The position step s reads and writes in a sequence of length len (s < len).
int64_t position(int64_t s, int64_t len, bool reverse) { return reverse ? len - 1 - s : s; }

std::vector<char> active_rows(const std::vector<int64_t>& lengths, int64_t s) {
  std::vector<char> on(lengths.size());
  for (size_t b = 0; b < lengths.size(); ++b) on[b] = s < lengths[b];
  return on;
}

}  // namespace

Tensor GRU::forward(const Tensor& x, const Tensor& h0, const std::vector<int64_t>& lengths) {
  const DType dt = cell.weight_ih.value.dtype();
  const int64_t D = cell.in(), H = cell.hidden();
  const std::string who = "GRU " + cell.weight_ih.name;
  if (!x.defined() || x.dtype() != dt || x.rank() != 3 || x.dim(2) != D || x.dim(1) < 1)
    throw Error(who + ": x has shape " + (x.defined() ? shape_str(x.shape()) : "(undefined)") +
                " but expects [B, T ≥ 1, " + std::to_string(D) + "] of " +
                std::string(dtype_name(dt)));
  const int64_t B = x.dim(0), T = x.dim(1);
  if (h0.defined() && (h0.dtype() != dt || h0.shape() != Shape{B, H}))
    throw Error(who + ": h0 has shape " + shape_str(h0.shape()) + " but expects [" +
                std::to_string(B) + ", " + std::to_string(H) + "] of " +
                std::string(dtype_name(dt)));
  if (!lengths.empty() && static_cast<int64_t>(lengths.size()) != B)
    throw Error(who + ": " + std::to_string(lengths.size()) + " lengths for a batch of " +
                std::to_string(B));
  for (int64_t len : lengths)
    if (len < 0 || len > T)
      throw Error(who + ": a length is " + std::to_string(len) + "; expected 0 to " +
                  std::to_string(T));

  auto saved = std::make_shared<Saved>();
  saved->lengths = lengths.empty() ? std::vector<int64_t>(B, T) : lengths;
  saved->x = x.clone();
  saved->h = Tensor({T, B, H}, dt);
  saved->z = Tensor({T, B, H}, dt);
  saved->r = Tensor({T, B, H}, dt);
  saved->n = Tensor({T, B, H}, dt);
  Tensor y({B, T, H}, dt);
  dispatch_float(dt, [&]<class T_>(T_) {
    T_* xs = saved->x.data<T_>();
    for (int64_t b = 0; b < B; ++b)
      std::fill(xs + (b * T + saved->lengths[b]) * D, xs + (b + 1) * T * D, T_(0));
    std::vector<T_> gx_all(B * T * 3 * H), gx(B * 3 * H), h(B * H, T_(0)), h_next(B * H);
    gru::linear(gx_all.data(), xs, cell.weight_ih.value.data<T_>(), cell.bias.value.data<T_>(),
                B * T, D, 3 * H);
    if (h0.defined()) {
      const Tensor c = h0.contiguous();
      std::copy(c.data<T_>(), c.data<T_>() + B * H, h.begin());
    }
    for (int64_t s = 0; s < T; ++s) {
      const std::vector<char> on = active_rows(saved->lengths, s);
      for (int64_t b = 0; b < B; ++b) {
        const int64_t t = on[b] ? position(s, saved->lengths[b], reverse_) : 0;
        std::copy_n(gx_all.data() + (b * T + t) * 3 * H, 3 * H, gx.data() + b * 3 * H);
      }
      std::copy(h.begin(), h.end(), saved->h.data<T_>() + s * B * H);
      gru::forward(h_next.data(), saved->z.data<T_>() + s * B * H, saved->r.data<T_>() + s * B * H,
                   saved->n.data<T_>() + s * B * H, gx.data(), h.data(),
                   cell.weight_hh.value.data<T_>(), &on, B, H);
      for (int64_t b = 0; b < B; ++b)
        if (on[b])
          std::copy_n(h_next.data() + b * H, H,
                      y.data<T_>() + (b * T + position(s, saved->lengths[b], reverse_)) * H);
      h.swap(h_next);
    }
  });
  saved_ = std::move(saved);
  return y;
}

// Backward through time: the gradient of the state, g, runs from the last step to the first;
// at each step it gathers ∂L/∂y of that step's output, goes back through the step (nn/gru_step.h)
// and leaves ∂L/∂(W x + b) at the step's position. What reaches the start is ∂L/∂h0.
GRU::Grads GRU::backward(const Tensor& dy) {
  if (!saved_) throw Error("GRU::backward called before forward");
  const Saved& sv = *saved_;
  const int64_t B = sv.x.dim(0), T = sv.x.dim(1), D = cell.in(), H = cell.hidden();
  const DType dt = sv.x.dtype();
  if (dy.dtype() != dt || dy.shape() != Shape{B, T, H})
    throw Error("GRU " + cell.weight_ih.name + "::backward: dy has shape " + shape_str(dy.shape()) +
                " but the forward's output was " + shape_str(Shape{B, T, H}));
  const Tensor gy = dy.contiguous();
  Grads grads{Tensor({B, T, D}, dt), Tensor({B, H}, dt)};
  dispatch_float(dt, [&]<class T_>(T_) {
    std::vector<T_> dgx_all(B * T * 3 * H, T_(0)), dgx(B * 3 * H), g(B * H, T_(0)), dh(B * H);
    const T_* y = gy.data<T_>();
    for (int64_t s = T - 1; s >= 0; --s) {
      const std::vector<char> on = active_rows(sv.lengths, s);
      for (int64_t b = 0; b < B; ++b)
        if (on[b]) {
          const T_* row = y + (b * T + position(s, sv.lengths[b], reverse_)) * H;
          for (int64_t j = 0; j < H; ++j) g[b * H + j] += row[j];
        }
      gru::backward(dgx.data(), dh.data(), cell.weight_hh.grad.data<T_>(), g.data(),
                    sv.z.data<T_>() + s * B * H, sv.r.data<T_>() + s * B * H,
                    sv.n.data<T_>() + s * B * H, sv.h.data<T_>() + s * B * H,
                    cell.weight_hh.value.data<T_>(), &on, B, H);
      for (int64_t b = 0; b < B; ++b)
        if (on[b])
          std::copy_n(dgx.data() + b * 3 * H, 3 * H,
                      dgx_all.data() + (b * T + position(s, sv.lengths[b], reverse_)) * 3 * H);
      g.swap(dh);
    }
    std::copy(g.begin(), g.end(), grads.dh0.data<T_>());
    gru::linear_backward(grads.dx.data<T_>(), cell.weight_ih.grad.data<T_>(),
                         cell.bias.grad.data<T_>(), dgx_all.data(), sv.x.data<T_>(),
                         cell.weight_ih.value.data<T_>(), B * T, D, 3 * H);
  });
  return grads;
}

}  // namespace qkv::nn
