// Direct logit attribution, every head's ablation, and the logit lens (qkv/explain_lens.h).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "qkv/explain_lens.h"

namespace qkv::explain {
namespace {

// The target's unembedding row less the alternative's: the direction the metric reads.
std::vector<double> direction(const ResidualModel& m, const Target& t) {
  std::vector<double> u = m.unembedding_row(t.id);
  if (t.versus >= 0) {
    const std::vector<double> v = m.unembedding_row(t.versus);
    for (std::size_t j = 0; j < u.size(); ++j) u[j] -= v[j];
  }
  return u;
}

// Row i of x [n, hidden] (float32) as float64.
std::vector<double> row(const Tensor& x, int64_t i) {
  const int64_t d = x.dim(1);
  const float* p = x.data<float>() + i * d;
  return {p, p + d};
}

std::vector<double> minus(std::vector<double> a, const std::vector<double>& b) {
  for (std::size_t j = 0; j < a.size(); ++j) a[j] -= b[j];
  return a;
}

}  // namespace

Attribution direct_logit_attribution(const Lens& lens, const Target& target) {
  const ResidualModel& m = lens.model();
  lens.measure(target);  // checks the ids
  const int64_t n = lens.size(), last = n - 1, heads = m.heads(), d = m.head_dim(),
                hidden = m.hidden(), layers = m.layers();
  const std::vector<double> u = direction(m, target);
  const float* at = lens.stream(layers).data<float>() + last * hidden;
  const auto read = [&](const std::vector<double>& part) {
    const std::vector<double> y = m.final_norm_frozen(part, at);
    return std::inner_product(y.begin(), y.end(), u.begin(), 0.0);
  };
  Attribution a;
  a.embedding = read(row(lens.stream(0), last));
  for (int64_t l = 0; l < layers; ++l) {
    const Tensor& wo = m.output_matrix(l);  // [hidden, H·d]
    const float* o = lens.heads(l).data<float>();
    std::vector<std::vector<double>> parts;
    std::vector<double> whole(static_cast<std::size_t>(hidden), 0.0);
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<double> part(static_cast<std::size_t>(hidden), 0.0);
      const float* oh = o + (h * n + last) * d;
      for (int64_t r = 0; r < hidden; ++r) {
        const float* w = wo.data<float>() + r * heads * d + h * d;
        double s = 0;
        for (int64_t k = 0; k < d; ++k) s += double{w[k]} * oh[k];
        part[static_cast<std::size_t>(r)] = s;
        whole[static_cast<std::size_t>(r)] += s;
      }
      parts.push_back(std::move(part));
    }
    for (const std::vector<double>& part : parts) a.heads.push_back(read(m.attention_part(l, part, whole)));
    // The whole attention's part: its heads' and W_O's bias's, where it has one.
    a.attention.push_back(read(minus(row(lens.attended(l), last), row(lens.stream(l), last))));
    a.mlp.push_back(read(minus(row(lens.stream(l + 1), last), row(lens.attended(l), last))));
  }
  a.constant = m.logit_bias(target.id) - (target.versus >= 0 ? m.logit_bias(target.versus) : 0.0);
  a.total = a.embedding + a.constant;
  for (int64_t l = 0; l < layers; ++l)
    a.total += a.attention[static_cast<std::size_t>(l)] + a.mlp[static_cast<std::size_t>(l)];
  return a;
}

std::vector<HeadEffect> head_effects(const Lens& lens, const Target& target,
                                     const OnProgress& progress) {
  const ResidualModel& m = lens.model();
  const Measure clean = lens.measure(target);
  const Attribution dla = direct_logit_attribution(lens, target);
  const int64_t heads = m.heads(), n = lens.size(), d = m.head_dim(), total = m.layers() * heads;
  std::vector<HeadEffect> effects;
  // Layer by layer, its heads' 2·H ablations (copy 2h: head h zeroed; 2h + 1: mean-ablated) in
  // batched reruns from that layer.
  for (int64_t l = 0; l < m.layers(); ++l) {
    std::vector<Measure> measured;
    for (int64_t begin = 0; begin < 2 * heads; begin += lens.copies_per_rerun()) {
      const int64_t copies = std::min(lens.copies_per_rerun(), 2 * heads - begin);
      const LayerHooks hooks{.heads = [&](int64_t layer, Tensor& o) {
        if (layer != l) return;
        for (int64_t b = 0; b < copies; ++b)
          ablate_rows(o.data<float>() + (b * heads + (begin + b) / 2) * n * d, n, d,
                      (begin + b) % 2 == 0 ? Ablation::zero : Ablation::mean);
      }};
      const Tensor logits = lens.rerun(l, copies, hooks);
      for (int64_t b = 0; b < copies; ++b)
        measured.push_back(lens.measure(logits.narrow(0, b, 1).reshape({m.vocab()}), target));
    }
    for (int64_t h = 0; h < heads; ++h) {
      const Measure& zero = measured[static_cast<std::size_t>(2 * h)];
      const Measure& mean = measured[static_cast<std::size_t>(2 * h + 1)];
      effects.push_back(
          {.layer = l,
           .head = h,
           .ablation_logit_change = zero.logit - clean.logit,
           .ablation_log_prob_change = zero.log_prob - clean.log_prob,
           .ablation_metric_change = zero.metric - clean.metric,
           .mean_ablation_logit_change = mean.logit - clean.logit,
           .mean_ablation_log_prob_change = mean.log_prob - clean.log_prob,
           .mean_ablation_metric_change = mean.metric - clean.metric,
           .direct_logit_attribution = dla.heads[static_cast<std::size_t>(l * heads + h)]});
    }
    if (progress) progress(static_cast<int64_t>(effects.size()), total);
  }
  return effects;
}

std::vector<LensRow> logit_lens(const Lens& lens, const Target& target, int64_t top) {
  const ResidualModel& m = lens.model();
  lens.measure(target);
  const int64_t n = lens.size(), vocab = m.vocab();
  std::vector<LensRow> rows;
  for (int64_t l = 0; l < m.layers(); ++l) {
    const Tensor last = lens.stream(l + 1).narrow(0, n - 1, 1).clone();
    const Tensor logits = m.unembed(m.final_norm(last)).reshape({vocab});
    const Measure at = lens.measure(logits, target);
    const float* z = logits.data<float>();
    LensRow r{.layer = l, .target_logit = at.logit, .target_log_prob = at.log_prob};
    for (int64_t v = 0; v < vocab; ++v) r.target_rank += z[v] > z[target.id] ? 1 : 0;
    std::vector<int32_t> order(static_cast<std::size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    const int64_t shown = std::min(top, vocab);
    std::partial_sort(order.begin(), order.begin() + shown, order.end(),
                      [z](int32_t a, int32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
    const double log_total = at.logit - at.log_prob;  // log Σ exp z
    for (int64_t k = 0; k < shown; ++k) {
      const int32_t id = order[static_cast<std::size_t>(k)];
      r.top.emplace_back(id, std::exp(double{z[id]} - log_total));
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace qkv::explain
