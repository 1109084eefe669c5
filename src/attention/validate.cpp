// Checks of attention inputs; see validate.h.
#include "attention/validate.h"

#include <cmath>
#include <sstream>

namespace qkv::attention_detail {
namespace {

std::string describe(const std::string& name, const Tensor& t) {
  return name + " has shape " + shape_str(t.shape());
}

[[noreturn]] void fail(const std::string& message) { throw Error(message); }

void check_float(const std::string& name, const Tensor& t) {
  if (!t.defined()) fail(name + " is missing");
  if (t.dtype() == DType::b8) fail(name + " has dtype bool; expected float32 or float64");
}

void check_param(const std::string& name, const Tensor& t, const Shape& expected,
                 const std::string& meaning, Score score) {
  if (!t.defined())
    fail("score " + std::string(to_string(score)) + " needs " + name + ", a " + meaning + " = " +
         shape_str(expected) + " tensor");
  check_float(name, t);
  if (t.shape() != expected)
    fail(describe(name, t) + "; expected " + shape_str(expected) + " (" + meaning + ")");
}

}  // namespace

Dims check_inputs(const Tensor& q, const Tensor& k, const Tensor& v,
                  const AttentionOptions& options, const ArgumentNames& n) {
  check_float(n.q, q);
  check_float(n.k, k);
  check_float(n.v, v);
  Dims d;
  d.f32 = q.dtype() != DType::f64 && k.dtype() != DType::f64 && v.dtype() != DType::f64;
  d.rank = q.rank();
  if (d.rank < 2 || d.rank > 4)
    fail(describe(n.q, q) + " (rank " + std::to_string(d.rank) +
         "); expected [B, H, L, D], [H, L, D] or [L, D]");
  for (const auto& [name, t] : {std::pair{n.k, &k}, std::pair{n.v, &v}})
    if (t->rank() != d.rank)
      fail(describe(name, *t) + " (rank " + std::to_string(t->rank()) + ") but " + n.q +
           " has rank " + std::to_string(d.rank) + "; expected the same rank");

  d.L = q.dim(-2), d.Dq = q.dim(-1);
  d.S = k.dim(-2), d.Dk = k.dim(-1), d.Dv = v.dim(-1);
  if (d.rank >= 3) d.Hq = q.dim(-3), d.Hkv = k.dim(-3);
  if (d.rank == 4) d.B = q.dim(0);
  if (d.rank == 4 && k.dim(0) != d.B)
    fail(describe(n.k, k) + " with batch " + std::to_string(k.dim(0)) + " but " + n.q +
         " has batch " + std::to_string(d.B) + "; expected the same batch size");
  if (d.rank == 4 && v.dim(0) != d.B)
    fail(describe(n.v, v) + " with batch " + std::to_string(v.dim(0)) + " but " + n.q +
         " has batch " + std::to_string(d.B) + "; expected the same batch size");
  if (d.rank >= 3 && v.dim(-3) != d.Hkv)
    fail(describe(n.v, v) + " with " + std::to_string(v.dim(-3)) + " heads but " + n.k + " has " +
         std::to_string(d.Hkv) + "; expected keys and values to have the same heads");
  if (d.Hkv == 0 ? d.Hq != 0 : d.Hq % d.Hkv != 0)
    fail(describe(n.q, q) + " with " + std::to_string(d.Hq) + " heads, not a multiple of " + n.k +
         "'s " + std::to_string(d.Hkv) + " heads; expected Hq divisible by Hkv");
  if (v.dim(-2) != d.S)
    fail(describe(n.v, v) + " with " + std::to_string(v.dim(-2)) + " rows but " + n.k + " has " +
         std::to_string(d.S) + "; expected one value row per key");

  const Score score = options.score;
  const bool same_dims = score != Score::general && score != Score::additive;
  if (same_dims && score != Score::uniform && d.Dk != d.Dq)
    fail(describe(n.k, k) + " but " + n.q + " has head dim " + std::to_string(d.Dq) +
         "; expected head dim " + std::to_string(d.Dq) + " for score " +
         std::string(to_string(score)));

  if (options.scale && !std::isfinite(*options.scale)) {
    std::ostringstream s;
    s << n.scale << " is " << *options.scale << "; expected a finite number";
    fail(s.str());
  }
  if (score == Score::uniform && options.normalize == Normalize::none)
    fail("score uniform with normalize none gives all-zero weights; expected normalize softmax");

  const ScoreParams& p = options.params;
  if (score == Score::general)
    check_param(n.w, p.w, {d.Dq, d.Dk}, "[Dq, Dk] matrix W of qᵀ W k", score);
  if (score == Score::additive) {
    if (!p.v.defined())
      fail("score additive needs " + n.v_param + ", the vector v [A] of vᵀ tanh(W_q q + W_k k)");
    check_float(n.v_param, p.v);
    if (p.v.rank() != 1) fail(describe(n.v_param, p.v) + "; expected a vector [A]");
    d.A = p.v.dim(0);
    const std::string a = ", A = " + std::to_string(d.A) + " from " + n.v_param;
    check_param(n.w_q, p.w_q, {d.A, d.Dq}, "[A, Dq] matrix W_q" + a, score);
    check_param(n.w_k, p.w_k, {d.A, d.Dk}, "[A, Dk] matrix W_k" + a, score);
  }

  if (!options.key_lengths.empty()) {
    if (static_cast<int64_t>(options.key_lengths.size()) != d.B)
      fail(n.key_lengths + " has " + std::to_string(options.key_lengths.size()) +
           " entries; expected one per batch (" + std::to_string(d.B) + ")");
    for (int64_t len : options.key_lengths)
      if (len < 0 || len > d.S)
        fail(n.key_lengths + " has length " + std::to_string(len) + "; expected 0 to " +
             std::to_string(d.S) + " (the number of keys)");
  }

  if (options.mask.defined()) {
    const Tensor& m = options.mask;
    const Shape full{d.B, d.Hq, d.L, d.S};
    bool ok = m.rank() <= 4;
    for (int i = 1; ok && i <= m.rank(); ++i) {
      const int64_t have = m.dim(-i), want = full[4 - i];
      ok = have == 1 || have == want;
    }
    if (!ok)
      fail(describe(n.mask, m) + ", which does not broadcast to [B, Hq, L, S] = " +
           shape_str(full) + "; expected each dimension 1 or equal, aligned at the last");
  }
  return d;
}

}  // namespace qkv::attention_detail
