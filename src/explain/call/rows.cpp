// explain/call/rows.cpp — the rows of a call: its sizes (weight_count, head_pairs, reference_bytes)
// and first_rows, as a problem of its own (qkv/explain.h, "one call: what it computes and its
// memory").
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "attention/validate.h"
#include "core/dispatch.h"
#include "qkv/attend.h"
#include "qkv/memory.h"

namespace qkv::explain {
namespace {

attention_detail::Dims dims_of(const AttentionCall& c) {
  return attention_detail::check_inputs(c.q, c.k, c.v, c.options);
}

// Element (b, h, i) of a query-shaped tensor's leading dimensions, read through q's rank.
int64_t row_index(const attention_detail::Dims& d, int64_t b, int64_t h, int64_t i) {
  return (b * d.Hq + h) * d.L + i;
}

}  // namespace

int64_t weight_count(const AttentionCall& c) {
  const auto d = dims_of(c);
  // Inputs of head dim 0 hold no bytes whatever their lengths: L = S = 2^32 is a valid problem
  // whose count overflows int64 (it read "needs all 0 attention weights").
  const double n = static_cast<double>(d.B) * d.Hq * d.L * static_cast<double>(d.S);
  return n >= 9.2e18 ? std::numeric_limits<int64_t>::max() : d.B * d.Hq * d.L * d.S;
}

int64_t head_pairs(const AttentionCall& c) {
  const auto d = dims_of(c);
  return d.B * d.Hq;
}

int64_t reference_bytes(const AttentionCall& c, bool json) {
  // What run_case allocates, as qkv::attention sizes it (the Python package's memory_limit uses
  // the same estimate), and with --json the JSON of every weight, score and logit: three nested
  // arrays of numbers and their text (measured at L = S = 1024: 201 bytes a weight in all).
  AttentionOptions o = c.options;
  o.need_weights = o.need_logsumexp = o.need_scores = true;
  o.path = Path::reference;
  const auto d = dims_of(c);
  const double weights = static_cast<double>(d.B) * d.Hq * d.L * static_cast<double>(d.S);
  const double text = json ? 170 * weights : 0;
  return saturated_bytes(static_cast<double>(attention_bytes(c.q, c.k, c.v, o)) + text);
}

AttentionCall first_rows(const AttentionCall& c, int64_t pair, int64_t rows) {
  const auto d = dims_of(c);
  const int64_t b = pair / d.Hq, h = pair % d.Hq, kv = h / (d.Hq / d.Hkv);
  AttentionCall s;
  s.caption = c.caption;
  s.options = c.options;
  s.options.mask = Tensor();
  s.options.causal = Causal::none;
  s.options.key_lengths.clear();
  s.options.scale = c.options.scale.value_or(default_scale(c.options.score, d.Dk));
  s.query_labels = c.query_labels, s.key_labels = c.key_labels;
  s.value_columns = c.value_columns;

  const Tensor q = c.q.contiguous(), k = c.k.contiguous(), v = c.v.contiguous();
  auto copy_rows = [](const Tensor& from, int64_t first, int64_t count) {
    const int64_t D = from.dim(-1);
    Tensor to({count, D}, from.dtype());
    for (int64_t i = 0; i < count * D; ++i)
      dispatch_float(from.dtype(),
                     [&]<class T>(T) { to.data<T>()[i] = from.data<T>()[first * D + i]; });
    return to;
  };
  s.q = copy_rows(q, row_index(d, b, h, 0), rows);
  s.k = copy_rows(k, (b * d.Hkv + kv) * d.S, d.S);
  s.v = copy_rows(v, (b * d.Hkv + kv) * d.S, d.S);

  // One float mask for everything that hides keys from these rows, by the whole problem's rules
  // (causal alignment included), not the whole L×S of it.
  s.options.mask = attention_detail::logit_bias_rows(c.options, d, b, h, 0, rows);
  return s;
}

}  // namespace qkv::explain
