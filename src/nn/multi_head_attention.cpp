// MultiHeadAttention: learned projections around qkv::attention, forward and backward
// (Vaswani et al. 2017 §3.2.2).
//
// The projections are [B, L, H·d_k] rows; each is read as a strided [B, H, L, d_k] view (no copy)
// by qkv::attention, whose float32 scaled-dot/dot path is the fused kernel. Dropout on the
// attention weights has no kernel, so that path materializes the weights and runs the
// weighted sum and its backward here, by loops.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/dispatch.h"
#include "nn/dense.h"
#include "qkv/nn.h"

namespace qkv::nn {

struct MultiHeadAttention::Saved {
  // tie_qk: K's projection, a Linear whose weight and bias share W_Q's and b_Q's storage (value
  // and grad), so its forward saves its own input and its backward accumulates into q's grads.
  std::unique_ptr<Linear> tied_k;
  bool ready = false;          // a forward ran and its backward has not
  Shape x_shape;               // [B, L, d_model], for dout
  Tensor q, k, v;              // [B, H, L, d_k], [B, Hkv, S, d_k], [B, Hkv, S, d_v]
  AttentionOptions attention;  // as the forward ran it (no weights asked for)
  bool dropped = false;        // the dropout path ran: q, k, v contiguous, p and keep below
  Tensor p, keep;              // [B, H, L, S]: softmax weights; the dropout scale, 0 or 1/(1 − p)
};

namespace {

[[noreturn]] void fail(const std::string& message) { throw Error(message); }

// [B, L, H·d] (contiguous) → a [B, H, L, d] view.
Tensor split_heads(const Tensor& rows, int64_t heads) {
  const Tensor t = rows.contiguous();
  return t.reshape({t.dim(0), t.dim(1), heads, t.dim(2) / heads}).transpose(1, 2);
}

// a += b (both contiguous, of one shape and dtype).
void add_into(Tensor& a, const Tensor& b) {
  const Tensor c = b.contiguous();
  dispatch_float(a.dtype(), [&]<class T>(T) {
    T* x = a.data<T>();
    const T* y = c.data<T>();
    for (int64_t i = 0; i < a.numel(); ++i) x[i] += y[i];
  });
}

// Sizes of the dropout path's loops: q [B, H, L, Dk], k [B, Hkv, S, Dk], v [B, Hkv, S, Dv].
struct Sizes {
  int64_t B, H, Hkv, L, S, Dk, Dv;
};

// out_i = Σ_j p_ij·keep_ij·v_j per (b, h): the weighted sum with dropped-out weights.
// p, keep: [B, H, L, S]; v: [B, Hkv, S, Dv]; out: [B, H, L, Dv] (overwritten).
template <class T>
void dropped_weighted_sum(T* out, const T* p, const T* keep, const T* v, const Sizes& z) {
  for (int64_t b = 0; b < z.B; ++b)
    for (int64_t h = 0; h < z.H; ++h) {
      const T* vh = v + (b * z.Hkv + h / (z.H / z.Hkv)) * z.S * z.Dv;
      for (int64_t i = 0; i < z.L; ++i) {
        const int64_t row = (b * z.H + h) * z.L + i;
        T* o = out + row * z.Dv;
        std::fill(o, o + z.Dv, T(0));
        for (int64_t j = 0; j < z.S; ++j) {
          const T w = p[row * z.S + j] * keep[row * z.S + j];
          if (w != T(0))
            for (int64_t c = 0; c < z.Dv; ++c) o[c] += w * vh[j * z.Dv + c];
        }
      }
    }
}

// The backward of dropped_weighted_sum after softmax(scale·q·kᵀ + mask). Forward was
// P = softmax(logits), P̃ = P ⊙ keep, out = P̃·V, logits_ij = scale·q_i·k_j, so
//   dV += P̃ᵀ·dout,  dP̃ = dout·Vᵀ,  dP = dP̃ ⊙ keep,
//   dlogits = P ⊙ (dP − rowsum(dP ⊙ P))   (softmax backward; 0 where masked, as P is),
//   dQ += scale·dlogits·K,  dK += scale·dlogitsᵀ·Q.
// dq, dk, dv: zero-filled on entry, shaped like q, k, v; query heads of a group add into one kv
// head.
template <class T>
void dropped_attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k,
                                const T* v, const T* p, const T* keep, double scale,
                                const Sizes& z) {
  std::vector<double> dp(z.S);
  for (int64_t b = 0; b < z.B; ++b)
    for (int64_t h = 0; h < z.H; ++h) {
      const int64_t kv = (b * z.Hkv + h / (z.H / z.Hkv)) * z.S;
      const T *kh = k + kv * z.Dk, *vh = v + kv * z.Dv;
      T *dkh = dk + kv * z.Dk, *dvh = dv + kv * z.Dv;
      for (int64_t i = 0; i < z.L; ++i) {
        const int64_t row = (b * z.H + h) * z.L + i;
        const T *pi = p + row * z.S, *keepi = keep + row * z.S, *doi = dout + row * z.Dv;
        const T* qi = q + row * z.Dk;
        T* dqi = dq + row * z.Dk;
        double row_dot = 0;  // Σ_j dP_ij·P_ij
        for (int64_t j = 0; j < z.S; ++j) {
          const T dropped = pi[j] * keepi[j];
          double d = 0;
          for (int64_t c = 0; c < z.Dv; ++c) {
            d += static_cast<double>(doi[c]) * vh[j * z.Dv + c];
            dvh[j * z.Dv + c] += dropped * doi[c];
          }
          dp[j] = d * keepi[j];
          row_dot += dp[j] * pi[j];
        }
        for (int64_t j = 0; j < z.S; ++j) {
          const T ds = static_cast<T>(scale * pi[j] * (dp[j] - row_dot));
          if (ds == T(0)) continue;
          for (int64_t c = 0; c < z.Dk; ++c) {
            dqi[c] += ds * kh[j * z.Dk + c];
            dkh[j * z.Dk + c] += ds * qi[c];
          }
        }
      }
    }
}

template <class T>
Tensor fill_keep(const Shape& shape, double p, Rng& rng) {
  Tensor keep(shape, dtype_of<T>());
  const T kept = static_cast<T>(1.0 / (1.0 - p));
  T* m = keep.data<T>();
  for (int64_t i = 0; i < keep.numel(); ++i) m[i] = rng.uniform() < p ? T(0) : kept;
  return keep;
}

std::string layer_dtype(DType dtype) { return std::string(dtype_name(dtype)); }

}  // namespace

MultiHeadAttention::MultiHeadAttention(std::string name, const MultiHeadAttentionOptions& options,
                                       Rng& rng, DType dtype)
    : options_(options), saved_(std::make_shared<Saved>()) {
  MultiHeadAttentionOptions& opt = options_;
  const std::string where = "MultiHeadAttention " + name + ": ";
  if (dtype == DType::b8) fail(where + "dtype bool; expected float32 or float64");
  if (opt.heads <= 0 || opt.d_model <= 0 || opt.d_model % opt.heads != 0)
    fail(where + "d_model " + std::to_string(opt.d_model) + " with " + std::to_string(opt.heads) +
         " heads; expected a positive d_model divisible by a positive head count");
  if (opt.kv_heads == 0) opt.kv_heads = opt.heads;
  if (opt.kv_heads < 0 || opt.heads % opt.kv_heads != 0)
    fail(where + "kv_heads " + std::to_string(opt.kv_heads) + " with " + std::to_string(opt.heads) +
         " heads; expected a divisor of heads (grouped-query attention)");
  if (opt.kdim == 0) opt.kdim = opt.d_model;
  if (opt.kdim < 0) fail(where + "kdim " + std::to_string(opt.kdim) + "; expected ≥ 0");
  if ((opt.tie_qk || opt.identity_v) && (opt.kdim != opt.d_model || opt.kv_heads != opt.heads))
    fail(where + std::string(opt.tie_qk ? "tie_qk" : "identity_v") + " with kdim " +
         std::to_string(opt.kdim) + " and kv_heads " + std::to_string(opt.kv_heads) +
         "; expected kdim = d_model = " + std::to_string(opt.d_model) +
         " and kv_heads = heads = " + std::to_string(opt.heads));
  if (!(opt.dropout >= 0 && opt.dropout < 1))
    fail(where + "dropout " + std::to_string(opt.dropout) + "; expected 0 ≤ dropout < 1");
  if (opt.dropout > 0 && opt.score != Score::scaled_dot && opt.score != Score::dot)
    fail(where + "dropout " + std::to_string(opt.dropout) + " with score " +
         std::string(to_string(opt.score)) +
         "; attention dropout is implemented for scaled-dot and dot only (expected dropout 0)");

  const int64_t dk = opt.d_model / opt.heads, kv_width = opt.kv_heads * dk;
  q = std::make_unique<Linear>(name + ".q", opt.d_model, opt.d_model, opt.bias, rng, dtype);
  if (!opt.tie_qk)
    k = std::make_unique<Linear>(name + ".k", opt.kdim, kv_width, opt.bias, rng, dtype);
  if (!opt.identity_v) {
    v = std::make_unique<Linear>(name + ".v", opt.kdim, kv_width, opt.bias, rng, dtype);
    o = std::make_unique<Linear>(name + ".o", opt.d_model, opt.d_model, opt.bias, rng, dtype);
  }
  if (opt.tie_qk) {
    Rng unused(0);  // its own draws are replaced by q's tensors at every forward
    saved_->tied_k = std::make_unique<Linear>(name + ".q", opt.d_model, opt.d_model, opt.bias,
                                              unused, DType::f64);
  }
  // The score's own parameters act on one head's query and key (A = d_k for additive), with
  // Linear's N(0, 1/fan_in).
  const double s = 1.0 / std::sqrt(static_cast<double>(dk));
  if (opt.score == Score::general) {
    extra.push_back(make_parameter(name + ".score.w", {dk, dk}, s, rng, dtype));
  } else if (opt.score == Score::additive) {
    extra.push_back(make_parameter(name + ".score.w_q", {dk, dk}, s, rng, dtype));
    extra.push_back(make_parameter(name + ".score.w_k", {dk, dk}, s, rng, dtype));
    extra.push_back(make_parameter(name + ".score.v", {dk}, s, rng, dtype));
  }
}

Tensor MultiHeadAttention::forward(const Tensor& x, const Tensor& memory,
                                   const std::vector<int64_t>& key_lengths, Causal causal,
                                   bool training, Rng& rng, bool need_weights) {
  const MultiHeadAttentionOptions& opt = options_;
  const DType dtype = q->weight.value.dtype();
  if (!x.defined() || x.rank() != 3 || x.dim(2) != opt.d_model || x.dtype() != dtype)
    fail("MultiHeadAttention: x has shape " +
         (x.defined() ? shape_str(x.shape()) + " and dtype " + layer_dtype(x.dtype()) : "none") +
         "; expected [B, L, " + std::to_string(opt.d_model) + "] of " + layer_dtype(dtype));
  if (!memory.defined() || memory.rank() != 3 || memory.dim(0) != x.dim(0) ||
      memory.dim(2) != opt.kdim || memory.dtype() != dtype)
    fail("MultiHeadAttention: memory has shape " +
         (memory.defined() ? shape_str(memory.shape()) + " and dtype " + layer_dtype(memory.dtype())
                           : "none") +
         "; expected [" + std::to_string(x.dim(0)) + ", S, " + std::to_string(opt.kdim) + "] of " +
         layer_dtype(dtype));
  if (!key_lengths.empty() && static_cast<int64_t>(key_lengths.size()) != x.dim(0))
    fail("MultiHeadAttention: " + std::to_string(key_lengths.size()) +
         " key_lengths for a batch of " + std::to_string(x.dim(0)) + "; expected one per batch");

  Saved& s = *saved_;
  s.ready = false;
  s.x_shape = x.shape();
  Tensor k_rows;
  if (opt.tie_qk) {
    Linear& tied = *s.tied_k;
    tied.weight.value = q->weight.value, tied.weight.grad = q->weight.grad;
    tied.bias.value = q->bias.value, tied.bias.grad = q->bias.grad;
    k_rows = tied.forward(memory);
  } else {
    k_rows = k->forward(memory);
  }
  s.q = split_heads(q->forward(x), opt.heads);
  s.k = split_heads(k_rows, opt.kv_heads);
  s.v = split_heads(opt.identity_v ? memory : v->forward(memory), opt.kv_heads);

  score_params = {};
  if (opt.score == Score::general) score_params.w = extra[0].value;
  if (opt.score == Score::additive)
    score_params = {.w_q = extra[0].value, .w_k = extra[1].value, .v = extra[2].value};
  s.attention = {
      .score = opt.score, .causal = causal, .key_lengths = key_lengths, .params = score_params};
  s.dropped = training && opt.dropout > 0;
  s.p = s.keep = Tensor();

  // Dropout and capture need the weights materialized; capture needs the logits too, which only
  // the reference path gives.
  AttentionOptions options = s.attention;
  options.need_weights = need_weights || s.dropped || capture != nullptr;
  options.need_scores = capture != nullptr;
  const AttentionResult r = attention(s.q, s.k, s.v, options);
  Tensor heads_out;
  if (!s.dropped) {
    heads_out = r.out;
  } else {
    s.p = r.weights;  // softmax, masked entries 0
    s.q = s.q.contiguous(), s.k = s.k.contiguous(), s.v = s.v.contiguous();
    const Sizes z{s.q.dim(0), s.q.dim(1), s.k.dim(1), s.q.dim(2),
                  s.k.dim(2), s.q.dim(3), s.v.dim(3)};
    heads_out = Tensor({z.B, z.H, z.L, z.Dv}, dtype);
    dispatch_float(dtype, [&]<class T>(T) {
      s.keep = fill_keep<T>(s.p.shape(), opt.dropout, rng);
      dropped_weighted_sum(heads_out.data<T>(), s.p.data<T>(), s.keep.data<T>(), s.v.data<T>(), z);
    });
  }
  weights_ = need_weights ? r.weights : Tensor();  // the weights before dropout
  if (capture != nullptr)
    *capture = {.score = opt.score,
                .scale = default_scale(opt.score, s.q.dim(3)),
                .causal = options.causal,
                .q = s.q.contiguous(),
                .k = s.k.contiguous(),
                .v = s.v.contiguous(),
                .scores = r.scores,
                .logits = r.logits,
                .weights = r.weights,
                .head_out = heads_out};
  s.ready = true;
  const Tensor merged = merge_heads(heads_out);
  return opt.identity_v ? merged : o->forward(merged);
}

MultiHeadAttention::Grads MultiHeadAttention::backward(const Tensor& dout) {
  Saved& s = *saved_;
  if (!s.ready) fail("MultiHeadAttention::backward called without a forward before it");
  if (!dout.defined() || dout.shape() != s.x_shape || dout.dtype() != s.q.dtype())
    fail("MultiHeadAttention::backward: dout has shape " +
         (dout.defined() ? shape_str(dout.shape()) : "none") + "; expected " +
         shape_str(s.x_shape) + " of " + layer_dtype(s.q.dtype()));
  s.ready = false;
  const MultiHeadAttentionOptions& opt = options_;

  // Forward was out = merge(attention(Q, K, V))·W_Oᵀ + b_O, so first back through W_O.
  const Tensor d_heads = split_heads(opt.identity_v ? dout : o->backward(dout), opt.heads);
  Tensor dq, dk, dv;
  if (!s.dropped) {
    AttentionGrads g = attention_backward(d_heads, s.q, s.k, s.v, s.attention);
    dq = g.dq, dk = g.dk, dv = g.dv;
    if (opt.score == Score::general) add_into(extra[0].grad, g.dparams.w);
    if (opt.score == Score::additive) {
      add_into(extra[0].grad, g.dparams.w_q);
      add_into(extra[1].grad, g.dparams.w_k);
      add_into(extra[2].grad, g.dparams.v);
    }
  } else {
    const Tensor g = d_heads.contiguous();
    dq = Tensor(s.q.shape(), g.dtype()), dk = Tensor(s.k.shape(), g.dtype());
    dv = Tensor(s.v.shape(), g.dtype());
    const Sizes z{s.q.dim(0), s.q.dim(1), s.k.dim(1), s.q.dim(2),
                  s.k.dim(2), s.q.dim(3), s.v.dim(3)};
    const double scale = default_scale(opt.score, z.Dk);
    dispatch_float(g.dtype(), [&]<class T>(T) {
      dropped_attention_backward(dq.data<T>(), dk.data<T>(), dv.data<T>(), g.data<T>(),
                                 s.q.data<T>(), s.k.data<T>(), s.v.data<T>(), s.p.data<T>(),
                                 s.keep.data<T>(), scale, z);
    });
  }

  // Then through the projections: Q came from x; K and V from the memory.
  Grads grads;
  grads.dx = q->backward(merge_heads(dq));
  grads.dmemory = (opt.tie_qk ? *s.tied_k : *k).backward(merge_heads(dk));
  if (opt.identity_v)
    add_into(grads.dmemory, merge_heads(dv));
  else
    add_into(grads.dmemory, v->backward(merge_heads(dv)));
  s.p = s.keep = Tensor();
  return grads;
}

void MultiHeadAttention::collect(std::vector<Parameter*>& out) {
  for (Linear* l : {q.get(), k.get(), v.get(), o.get()})
    if (l != nullptr) l->collect(out);
  for (Parameter& p : extra) out.push_back(&p);
}

}  // namespace qkv::nn
