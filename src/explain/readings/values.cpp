// What the values carried, read off a run: value-weighted attention (Kobayashi et al. 2020), the
// residual-and-norm mixing (Kobayashi et al. 2021), attention rollout (Abnar & Zuidema 2020) and
// the attention sinks explained with their values' norms.
#include <cmath>
#include <string>

#include "qkv/explain_readings.h"

namespace qkv::explain {
namespace {

const Block& values_block(const Run& run, int64_t layer, bool gram) {
  if (run.blocks.empty() || run.blocks.front().ov_norms.empty())
    throw Error(run.model.name + "'s run keeps no value norms; expected BERT's or a decoder's");
  const Block& b = run.blocks.front();
  if (layer < 0 || layer >= static_cast<int64_t>(b.layers.size()))
    throw Error("layer " + std::to_string(layer) + "; expected 0 to " +
                std::to_string(b.layers.size() - 1));
  if (gram && b.mixing_gram.size() != b.layers.size())
    throw Error("the mixing of " + std::to_string(run.size()) + " tokens is not kept; it is " +
                "computed for runs of at most " + std::to_string(kMixingMaxTokens) + " tokens");
  return b;
}

// C = A·B of [n, n] float64 matrices.
Tensor product(const Tensor& a, const Tensor& b) {
  const int64_t n = a.dim(0);
  Tensor c({n, n}, DType::f64);
  const double *x = a.data<double>(), *y = b.data<double>();
  double* z = c.data<double>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < n; ++k) {
      const double s = x[i * n + k];
      if (s != 0)
        for (int64_t j = 0; j < n; ++j) z[i * n + j] += s * y[k * n + j];
    }
  return c;
}

std::vector<Tensor> rolled(const std::vector<Tensor>& steps) {
  std::vector<Tensor> out;
  for (const Tensor& s : steps) out.push_back(out.empty() ? s : product(s, out.back()));
  return out;
}

void require_short(const Run& run, const char* what) {
  if (run.size() > kMixingMaxTokens)
    throw Error(std::string(what) + " of " + std::to_string(run.size()) +
                " tokens is not computed (n³ a layer); expected at most " +
                std::to_string(kMixingMaxTokens));
}

}  // namespace

Tensor value_weighted(const Run& run, int64_t layer) {
  const Block& b = values_block(run, layer, false);
  const auto l = static_cast<std::size_t>(layer);
  const Tensor w = b.layers[l].weights.to(DType::f64);
  const Tensor& norms = b.ov_norms[l];
  const int64_t heads = w.dim(1), n = w.dim(2), m = w.dim(3);
  Tensor out({heads, n, m}, DType::f64);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        const int64_t at = (h * n + i) * m + j;
        out.data<double>()[at] = w.data<double>()[at] * norms.data<double>()[h * m + j];
      }
  return out;
}

bool has_mixing(const Run& run) {
  return !run.blocks.empty() && !run.blocks.front().layers.empty() &&
         run.blocks.front().mixing_gram.size() == run.blocks.front().layers.size();
}

Tensor mixing(const Run& run, int64_t layer) {
  const Block& b = values_block(run, layer, true);
  const auto l = static_cast<std::size_t>(layer);
  const Tensor w = b.layers[l].weights.to(DType::f64);
  const int64_t heads = w.dim(1), n = w.dim(2), m = w.dim(3), k = heads + 1;
  const double* gram = b.mixing_gram[l].data<double>();
  Tensor out({n, m}, DType::f64);
  std::vector<double> beta(static_cast<std::size_t>(k));
  for (int64_t i = 0; i < n; ++i) {
    double total = 0;
    for (int64_t j = 0; j < m; ++j) {
      for (int64_t h = 0; h < heads; ++h)
        beta[static_cast<std::size_t>(h)] = w.data<double>()[(h * n + i) * m + j];
      beta[static_cast<std::size_t>(heads)] = i == j ? 1.0 : 0.0;
      const double* g = gram + j * k * k;
      double s = 0;  // βᵀ G_j β = ‖c_ij‖²
      for (int64_t a = 0; a < k; ++a)
        for (int64_t c = 0; c < k; ++c)
          s += beta[static_cast<std::size_t>(a)] * g[a * k + c] * beta[static_cast<std::size_t>(c)];
      total += out.data<double>()[i * m + j] = std::sqrt(std::max(s, 0.0));
    }
    if (total > 0)
      for (int64_t j = 0; j < m; ++j) out.data<double>()[i * m + j] /= total;
  }
  return out;
}

std::vector<Tensor> attention_rollout(const Run& run) {
  require_short(run, "attention rollout");
  std::vector<Tensor> steps;
  for (const AttentionCapture& c : run.blocks.front().layers) {
    const Tensor w = c.weights.to(DType::f64);  // [1, H, n, n]
    const int64_t heads = w.dim(1), n = w.dim(2);
    Tensor a({n, n}, DType::f64);
    double* x = a.data<double>();
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t t = 0; t < n * n; ++t) x[t] += w.data<double>()[h * n * n + t];
    for (int64_t i = 0; i < n; ++i) {
      double total = 0;
      for (int64_t j = 0; j < n; ++j) {
        x[i * n + j] = 0.5 * x[i * n + j] / static_cast<double>(heads) + (i == j ? 0.5 : 0.0);
        total += x[i * n + j];
      }
      for (int64_t j = 0; j < n; ++j) x[i * n + j] /= total;
    }
    steps.push_back(std::move(a));
  }
  return rolled(steps);
}

std::vector<Tensor> mixing_rollout(const Run& run) {
  require_short(run, "mixing rollout");
  std::vector<Tensor> steps;
  for (int64_t l = 0; l < run.model.layers; ++l) steps.push_back(mixing(run, l));
  return rolled(steps);
}

std::vector<SinkValues> sink_values(const Run& run) {
  std::vector<SinkValues> out;
  if (run.blocks.empty() || run.blocks.front().ov_norms.empty() || run.size() < 2) return out;
  const int64_t n = run.size();
  for (const auto& [score, l, h] : head_roles(run).sinks) {
    const Tensor& norms = run.blocks.front().ov_norms[static_cast<std::size_t>(l)];
    const auto norm = [&](int64_t j) { return norms.data<double>()[h * n + j]; };
    SinkValues s{.layer = l, .head = h, .weight = score, .first_norm = norm(0)};
    for (int64_t j = 1; j < n; ++j) s.others_norm += norm(j) / static_cast<double>(n - 1);
    // Every query i ≥ 1, or past kSinkRows of them (a long run keeps rows, each recomputed) as
    // many spread evenly.
    const int64_t rows = std::min<int64_t>(n - 1, kSinkRows);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = 1 + r * (n - 1) / rows;
      const std::vector<double> w = run.blocks.front().weight_row(l, h, i);
      double total = 0;
      for (int64_t j = 0; j < static_cast<int64_t>(w.size()); ++j)
        total += w[static_cast<std::size_t>(j)] * norm(j);
      if (total > 0) s.value_share += w[0] * norm(0) / total;
      s.moved += total;
    }
    s.value_share /= static_cast<double>(rows);
    s.moved /= static_cast<double>(rows);
    out.push_back(s);
  }
  return out;
}

}  // namespace qkv::explain
