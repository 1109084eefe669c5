// Gradient clipping and AdamW (Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization").
#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "core/dispatch.h"
#include "qkv/nn.h"

namespace qkv::nn {
namespace {

double squared_norm(const Tensor& g) {
  double s = 0;
  dispatch_float(g.dtype(), [&]<class T>(T) {
    for (int64_t i = 0; i < g.numel(); ++i)
      s += static_cast<double>(g.data<T>()[i]) * g.data<T>()[i];
  });
  return s;
}

double global_norm(const std::vector<Parameter*>& params) {
  double s = 0;
  for (const Parameter* p : params) s += squared_norm(p->grad);
  return std::sqrt(s);
}

// One AdamW update of n entries at step t (1-based) with learning rate lr:
//   θ ← θ − lr·λ·θ                         (decoupled weight decay; λ = 0 for rank-1 parameters)
//   m ← β1·m + (1 − β1)·g,  v ← β2·v + (1 − β2)·g²
//   θ ← θ − lr · m̂ / (√v̂ + ε),  m̂ = m / (1 − β1^t),  v̂ = v / (1 − β2^t)   (Kingma & Ba 2015)
// The order is PyTorch's torch.optim.AdamW: the decay uses θ before this step's Adam update.
template <class T>
void adamw_update(T* theta, T* m, T* v, const T* g, int64_t n, const AdamWOptions& o, double lr,
                  double decay, int64_t t) {
  const double c1 = 1.0 - std::pow(o.beta1, static_cast<double>(t));
  const double c2 = 1.0 - std::pow(o.beta2, static_cast<double>(t));
  const T shrink = static_cast<T>(1.0 - lr * decay), b1 = static_cast<T>(o.beta1),
          b2 = static_cast<T>(o.beta2), step = static_cast<T>(lr / c1),
          inv_sqrt_c2 = static_cast<T>(1.0 / std::sqrt(c2)), eps = static_cast<T>(o.eps);
  for (int64_t i = 0; i < n; ++i) {
    m[i] = b1 * m[i] + (T(1) - b1) * g[i];
    v[i] = b2 * v[i] + (T(1) - b2) * g[i] * g[i];
    // lr·m̂/(√v̂ + ε) = (lr/c1)·m / (√v/√c2 + ε)
    theta[i] = theta[i] * shrink - step * m[i] / (std::sqrt(v[i]) * inv_sqrt_c2 + eps);
  }
}

}  // namespace

double clip_grad_norm(const std::vector<Parameter*>& params, double max_norm) {
  if (!(max_norm > 0.0))
    throw Error("clip_grad_norm: max_norm is " + std::to_string(max_norm) + " but must be > 0");
  const double norm = global_norm(params);
  // A non-finite norm is returned as it is and the gradients left alone: scaling would turn every
  // gradient into NaN or 0 and hide which one overflowed.
  if (std::isfinite(norm) && norm > max_norm) {
    const double scale = max_norm / norm;
    for (Parameter* p : params) {
      Tensor& g = p->grad;
      dispatch_float(g.dtype(), [&]<class T>(T) {
        for (int64_t i = 0; i < g.numel(); ++i)
          g.data<T>()[i] = static_cast<T>(g.data<T>()[i] * scale);
      });
    }
  }
  return norm;
}

AdamW::AdamW(std::vector<Parameter*> params, const AdamWOptions& options)
    : params_(std::move(params)), options_(options) {
  const AdamWOptions& o = options_;
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw Error("AdamW: " + what);
  };
  require(std::isfinite(o.lr) && o.lr >= 0, "lr is " + std::to_string(o.lr) + ", must be ≥ 0");
  require(o.beta1 >= 0 && o.beta1 < 1,
          "beta1 is " + std::to_string(o.beta1) + ", must be in [0, 1)");
  require(o.beta2 >= 0 && o.beta2 < 1,
          "beta2 is " + std::to_string(o.beta2) + ", must be in [0, 1)");
  require(std::isfinite(o.eps) && o.eps >= 0, "eps is " + std::to_string(o.eps) + ", must be ≥ 0");
  require(std::isfinite(o.weight_decay) && o.weight_decay >= 0,
          "weight_decay is " + std::to_string(o.weight_decay) + ", must be ≥ 0");
  require(o.warmup_steps >= 0,
          "warmup_steps is " + std::to_string(o.warmup_steps) + ", must be ≥ 0");
  require(o.decay_steps >= 0,
          "decay_steps is " + std::to_string(o.decay_steps) + ", must be ≥ 0 (0: no decay)");
  require(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1,
          "min_lr_ratio is " + std::to_string(o.min_lr_ratio) + ", must be in [0, 1]");
  require(o.clip_norm >= 0,
          "clip_norm is " + std::to_string(o.clip_norm) + ", must be ≥ 0 (0: off)");
  for (const Parameter* p : params_) {
    require(p != nullptr, "a parameter is null");
    require(p->value.defined() && p->value.is_contiguous() &&
                (p->value.dtype() == DType::f32 || p->value.dtype() == DType::f64),
            p->name + " must be a contiguous float32 or float64 tensor");
    require(p->grad.defined() && p->grad.shape() == p->value.shape() &&
                p->grad.dtype() == p->value.dtype() && p->grad.is_contiguous(),
            p->name + "'s gradient must match its value's shape and dtype");
    m_.emplace_back(p->value.shape(), p->value.dtype());
    v_.emplace_back(p->value.shape(), p->value.dtype());
  }
}

// Linear warmup, then constant: step s (1-based) uses lr·min(1, s / warmup_steps), so the first
// step already moves (lr / warmup_steps) and step warmup_steps reaches lr. With decay_steps, a
// cosine from lr down to min_lr_ratio·lr between warmup_steps and decay_steps.
double AdamW::learning_rate() const {
  const int64_t next = steps_ + 1;
  const int64_t warmup = std::max<int64_t>(options_.warmup_steps, 0);
  if (warmup > 0 && next < warmup)
    return options_.lr * static_cast<double>(next) / static_cast<double>(warmup);
  if (options_.decay_steps <= warmup) return options_.lr;
  const double progress = std::clamp(
      static_cast<double>(next - warmup) / static_cast<double>(options_.decay_steps - warmup), 0.0,
      1.0);
  const double floor = options_.min_lr_ratio;
  return options_.lr * (floor + (1 - floor) * 0.5 * (1 + std::cos(std::numbers::pi * progress)));
}

double AdamW::step() {
  const double norm =
      options_.clip_norm > 0 ? clip_grad_norm(params_, options_.clip_norm) : global_norm(params_);
  const double lr = learning_rate();
  ++steps_;
  for (std::size_t k = 0; k < params_.size(); ++k) {
    Parameter& p = *params_[k];
    // No decay on biases and normalization gains (rank 1): shrinking them toward 0 only hurts.
    const double decay = p.value.rank() >= 2 ? options_.weight_decay : 0.0;
    dispatch_float(p.value.dtype(), [&]<class T>(T) {
      adamw_update(p.value.data<T>(), m_[k].data<T>(), v_[k].data<T>(), p.grad.data<T>(),
                   p.value.numel(), options_, lr, decay, steps_);
    });
  }
  return norm;
}

}  // namespace qkv::nn
