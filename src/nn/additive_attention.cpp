// AdditiveAttention: Bahdanau et al. 2014's attention, one decoder step at a time, with the keys'
// projection U_a h_j computed once per source (their Appendix A.1.2).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/dispatch.h"
#include "qkv/nn.h"
#include "qkv/threads.h"

namespace qkv::nn {

struct AdditiveAttention::Step {
  Tensor s;      // the query [B, Dq]
  Tensor u;      // tanh(W_a s + U_a h_j) [B, S, A]
  Tensor alpha;  // α [B, S], 0 at padding
};

AdditiveAttention::AdditiveAttention(std::string name, int64_t query_dim, int64_t memory_dim,
                                     int64_t hidden, Rng& rng, DType dtype)
    : w_a(make_parameter(name + ".w_a", {hidden, query_dim},
                         1.0 / std::sqrt(static_cast<double>(query_dim)), rng, dtype)),
      u_a(name + ".u_a", memory_dim, hidden, false, rng, dtype),
      v_a(make_parameter(name + ".v_a", {hidden}, 1.0 / std::sqrt(static_cast<double>(hidden)), rng,
                         dtype)) {}

void AdditiveAttention::collect(std::vector<Parameter*>& out) {
  out.push_back(&w_a);
  u_a.collect(out);
  out.push_back(&v_a);
}

void AdditiveAttention::set_memory(const Tensor& memory, const std::vector<int64_t>& lengths) {
  if (memory.rank() != 3 || memory.dim(2) != u_a.in() || memory.dtype() != w_a.value.dtype())
    throw Error("AdditiveAttention " + w_a.name + ": memory of shape " + shape_str(memory.shape()) +
                "; expected [B, S, " + std::to_string(u_a.in()) + "] of the layer's dtype");
  const int64_t b = memory.dim(0), s = memory.dim(1);
  if (!lengths.empty() && static_cast<int64_t>(lengths.size()) != b)
    throw Error("AdditiveAttention: " + std::to_string(lengths.size()) +
                " lengths for a batch of " + std::to_string(b));
  lengths_ = lengths.empty() ? std::vector<int64_t>(static_cast<std::size_t>(b), s) : lengths;
  for (int64_t& n : lengths_) n = std::clamp<int64_t>(n, 0, s);
  memory_ = memory.contiguous();
  projected_ = u_a.forward(memory_);  // [B, S, A]
  dmemory_ = Tensor(memory_.shape(), memory_.dtype());
  dprojected_ = Tensor(projected_.shape(), projected_.dtype());
  saved_.clear();
}

Tensor AdditiveAttention::forward(const Tensor& s_in, Tensor* weights) {
  if (!memory_.defined()) throw Error("AdditiveAttention::forward called before set_memory");
  const int64_t b = memory_.dim(0), n = memory_.dim(1), dk = memory_.dim(2);
  const int64_t a = w_a.value.dim(0), dq = w_a.value.dim(1);
  if (s_in.rank() != 2 || s_in.dim(0) != b || s_in.dim(1) != dq)
    throw Error("AdditiveAttention::forward: s of shape " + shape_str(s_in.shape()) +
                "; expected [" + std::to_string(b) + ", " + std::to_string(dq) + "]");
  auto step = std::make_shared<Step>();
  step->s = s_in.contiguous();
  step->u = Tensor({b, n, a}, memory_.dtype());
  step->alpha = Tensor({b, n}, memory_.dtype());
  Tensor context({b, dk}, memory_.dtype());
  dispatch_float(memory_.dtype(), [&]<class T>(T) {
    const T* s = step->s.data<T>();
    const T* w = w_a.value.data<T>();
    const T* v = v_a.value.data<T>();
    const T* p = projected_.data<T>();
    const T* h = memory_.data<T>();
    T* u = step->u.data<T>();
    T* alpha = step->alpha.data<T>();
    T* c = context.data<T>();
    // One batch entry an item: each writes only its own rows.
    parallel_for(b, resolve_num_threads(0), [&](int64_t i, int) {
      std::vector<double> wq(static_cast<std::size_t>(a)), e(static_cast<std::size_t>(n));
      for (int64_t r = 0; r < a; ++r) {
        double x = 0;
        for (int64_t k = 0; k < dq; ++k) x += double(w[r * dq + k]) * double(s[i * dq + k]);
        wq[static_cast<std::size_t>(r)] = x;
      }
      const int64_t len = lengths_[static_cast<std::size_t>(i)];
      double top = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < len; ++j) {
        double score = 0;
        for (int64_t r = 0; r < a; ++r) {
          const T t =
              std::tanh(static_cast<T>(wq[static_cast<std::size_t>(r)]) + p[(i * n + j) * a + r]);
          u[(i * n + j) * a + r] = t;
          score += double(v[r]) * double(t);
        }
        e[static_cast<std::size_t>(j)] = score;
        top = std::max(top, score);
      }
      double sum = 0;
      for (int64_t j = 0; j < len; ++j) sum += std::exp(e[static_cast<std::size_t>(j)] - top);
      for (int64_t j = 0; j < len; ++j)
        alpha[i * n + j] = static_cast<T>(std::exp(e[static_cast<std::size_t>(j)] - top) / sum);
      for (int64_t k = 0; k < dk; ++k) {
        double x = 0;
        for (int64_t j = 0; j < len; ++j)
          x += double(alpha[i * n + j]) * double(h[(i * n + j) * dk + k]);
        c[i * dk + k] = static_cast<T>(x);
      }
    });
  });
  if (weights) *weights = step->alpha;
  saved_.push_back(std::move(step));
  return context;
}

// c = Σ α_j h_j, α = softmax(e), e_j = v·u_j, u_j = tanh(W_a s + P_j), P = U_a h, so:
// ∂α_j = dc·h_j; ∂e_j = α_j (∂α_j − Σ α ∂α); ∂u = ∂e v; ∂pre = ∂u (1 − u²), which is ∂P_j and,
// summed over j, ∂(W_a s); ∂h_j gets α_j dc here and U_aᵀ ∂P_j in memory_backward.
Tensor AdditiveAttention::backward(const Tensor& dcontext) {
  if (saved_.empty()) throw Error("AdditiveAttention::backward: no forward step left to take back");
  const std::shared_ptr<Step> step = saved_.back();
  saved_.pop_back();
  const int64_t b = memory_.dim(0), n = memory_.dim(1), dk = memory_.dim(2);
  const int64_t a = w_a.value.dim(0), dq = w_a.value.dim(1);
  if (dcontext.rank() != 2 || dcontext.dim(0) != b || dcontext.dim(1) != dk)
    throw Error("AdditiveAttention::backward: dcontext of shape " + shape_str(dcontext.shape()) +
                "; expected [" + std::to_string(b) + ", " + std::to_string(dk) + "]");
  Tensor ds({b, dq}, memory_.dtype());
  dispatch_float(memory_.dtype(), [&]<class T>(T) {
    const Tensor g = dcontext.contiguous();
    const T* dc = g.data<T>();
    const T* s = step->s.data<T>();
    const T* u = step->u.data<T>();
    const T* alpha = step->alpha.data<T>();
    const T* h = memory_.data<T>();
    const T* w = w_a.value.data<T>();
    const T* v = v_a.value.data<T>();
    T* dh = dmemory_.data<T>();
    T* dp = dprojected_.data<T>();
    T* dw = w_a.grad.data<T>();
    T* dv = v_a.grad.data<T>();
    T* dsp = ds.data<T>();
    // One batch entry an item, its shares of ∂W_a and ∂v_a kept apart and summed below in order.
    std::vector<double> dwq_all(static_cast<std::size_t>(b * a)), dv_all(dwq_all.size());
    parallel_for(b, resolve_num_threads(0), [&](int64_t i, int) {
      std::vector<double> dalpha(static_cast<std::size_t>(n));
      double* dwq = dwq_all.data() + i * a;
      double* dvi = dv_all.data() + i * a;
      const int64_t len = lengths_[static_cast<std::size_t>(i)];
      double mean = 0;
      for (int64_t j = 0; j < len; ++j) {
        double x = 0;
        for (int64_t k = 0; k < dk; ++k) {
          x += double(dc[i * dk + k]) * double(h[(i * n + j) * dk + k]);
          dh[(i * n + j) * dk + k] += alpha[i * n + j] * dc[i * dk + k];
        }
        dalpha[static_cast<std::size_t>(j)] = x;
        mean += double(alpha[i * n + j]) * x;
      }
      for (int64_t j = 0; j < len; ++j) {
        const double de = double(alpha[i * n + j]) * (dalpha[static_cast<std::size_t>(j)] - mean);
        for (int64_t r = 0; r < a; ++r) {
          const double t = u[(i * n + j) * a + r];
          dvi[r] += de * t;
          const double dpre = de * double(v[r]) * (1 - t * t);
          dp[(i * n + j) * a + r] += static_cast<T>(dpre);
          dwq[r] += dpre;
        }
      }
      for (int64_t k = 0; k < dq; ++k) {
        double x = 0;
        for (int64_t r = 0; r < a; ++r) x += dwq[r] * double(w[r * dq + k]);
        dsp[i * dq + k] = static_cast<T>(x);
      }
    });
    for (int64_t i = 0; i < b; ++i)
      for (int64_t r = 0; r < a; ++r) {
        dv[r] += static_cast<T>(dv_all[static_cast<std::size_t>(i * a + r)]);
        for (int64_t k = 0; k < dq; ++k)
          dw[r * dq + k] +=
              static_cast<T>(dwq_all[static_cast<std::size_t>(i * a + r)] * double(s[i * dq + k]));
      }
  });
  return ds;
}

Tensor AdditiveAttention::memory_backward() {
  if (!memory_.defined())
    throw Error("AdditiveAttention::memory_backward called before set_memory");
  Tensor dh = dmemory_;
  const Tensor through_u = u_a.backward(dprojected_);
  dispatch_float(dh.dtype(), [&]<class T>(T) {
    for (int64_t i = 0; i < dh.numel(); ++i) dh.data<T>()[i] += through_u.data<T>()[i];
  });
  dmemory_ = Tensor(memory_.shape(), memory_.dtype());
  dprojected_ = Tensor(projected_.shape(), projected_.dtype());
  return dh;
}

}  // namespace qkv::nn
