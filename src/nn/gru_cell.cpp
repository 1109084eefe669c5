// GRUCell: one GRU step (the equations and their backward: nn/gru_step.h), each forward saved on
// a stack that the backward takes back from, latest first.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/dispatch.h"
#include "nn/gru_step.h"
#include "qkv/nn.h"

namespace qkv::nn {

struct GRUCell::Step {
  Tensor x, h, z, r, n;  // contiguous, [B, in] and [B, H]
};

GRUCell::GRUCell(std::string name, int64_t in, int64_t hidden, Rng& rng, DType dtype) {
  if (in < 1 || hidden < 1)
    throw Error("GRU " + name + ": in is " + std::to_string(in) + " and hidden " +
                std::to_string(hidden) + ", both must be ≥ 1");
  weight_ih = make_parameter(name + ".weight_ih", {3 * hidden, in},
                             1.0 / std::sqrt(static_cast<double>(in)), rng, dtype);
  weight_hh = make_parameter(name + ".weight_hh", {3 * hidden, hidden},
                             1.0 / std::sqrt(static_cast<double>(hidden)), rng, dtype);
  bias = make_parameter(name + ".bias", {3 * hidden}, 0.0, rng, dtype);
}

namespace {

void expect(const Tensor& t, int64_t rows, int64_t cols, DType dtype, const std::string& what) {
  if (!t.defined() || t.dtype() != dtype || t.rank() != 2 || t.dim(0) != rows ||
      (cols >= 0 && t.dim(1) != cols))
    throw Error(what + " has shape " +
                (t.defined()
                     ? shape_str(t.shape()) + " (" + std::string(dtype_name(t.dtype())) + ")"
                     : std::string("(undefined)")) +
                " but expects [" + (rows >= 0 ? std::to_string(rows) : std::string("B")) + ", " +
                std::to_string(cols) + "] of " + std::string(dtype_name(dtype)));
}

}  // namespace

Tensor GRUCell::forward(const Tensor& x, const Tensor& h) {
  const DType dt = weight_ih.value.dtype();
  const int64_t H = hidden(), D = in();
  if (!x.defined() || x.rank() != 2)
    throw Error("GRUCell " + weight_ih.name + ": x must be [B, " + std::to_string(D) + "]");
  const int64_t B = x.dim(0);
  expect(x, B, D, dt, "GRUCell " + weight_ih.name + ": x");
  expect(h, B, H, dt, "GRUCell " + weight_ih.name + ": h");
  auto step = std::make_shared<Step>();
  step->x = x.contiguous();
  step->h = h.contiguous();
  step->z = Tensor({B, H}, dt);
  step->r = Tensor({B, H}, dt);
  step->n = Tensor({B, H}, dt);
  Tensor out({B, H}, dt);
  dispatch_float(dt, [&]<class T>(T) {
    std::vector<T> gx(B * 3 * H);
    gru::linear(gx.data(), step->x.data<T>(), weight_ih.value.data<T>(), bias.value.data<T>(), B, D,
                3 * H);
    gru::forward(out.data<T>(), step->z.data<T>(), step->r.data<T>(), step->n.data<T>(), gx.data(),
                 step->h.data<T>(), weight_hh.value.data<T>(), nullptr, B, H);
  });
  saved_.push_back(std::move(step));
  return out;
}

GRUCell::Grads GRUCell::backward(const Tensor& dh_next) {
  if (saved_.empty()) throw Error("GRUCell::backward: no forward step left to take back");
  const std::shared_ptr<Step> step = saved_.back();
  const int64_t B = step->h.dim(0), H = hidden(), D = in();
  expect(dh_next, B, H, step->h.dtype(), "GRUCell " + weight_ih.name + "::backward: dh_next");
  saved_.pop_back();
  const Tensor g = dh_next.contiguous();
  Grads grads{Tensor({B, D}, g.dtype()), Tensor({B, H}, g.dtype())};
  dispatch_float(g.dtype(), [&]<class T>(T) {
    std::vector<T> dgx(B * 3 * H);
    gru::backward(dgx.data(), grads.dh.data<T>(), weight_hh.grad.data<T>(), g.data<T>(),
                  step->z.data<T>(), step->r.data<T>(), step->n.data<T>(), step->h.data<T>(),
                  weight_hh.value.data<T>(), nullptr, B, H);
    gru::linear_backward(grads.dx.data<T>(), weight_ih.grad.data<T>(), bias.grad.data<T>(),
                         dgx.data(), step->x.data<T>(), weight_ih.value.data<T>(), B, D, 3 * H);
  });
  return grads;
}

void GRUCell::clear() { saved_.clear(); }

void GRUCell::collect(std::vector<Parameter*>& out) {
  out.push_back(&weight_ih);
  out.push_back(&weight_hh);
  out.push_back(&bias);
}

}  // namespace qkv::nn
