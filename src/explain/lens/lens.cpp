// explain::Lens: a clean run kept layer by layer, and the interventions that rerun part of it —
// a head ablated, edges knocked out (qkv/explain_lens.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "qkv/explain_lens.h"

namespace qkv::explain {
namespace {

// The last row of each sequence of h [B, n, hidden] through the final norm and the unembedding:
// [B, vocab] float32.
Tensor last_logits(const ResidualModel& model, const Tensor& h) {
  const Tensor last = h.narrow(1, h.dim(1) - 1, 1).reshape({h.dim(0), h.dim(2)});
  return model.unembed(model.final_norm(last.contiguous()));
}

std::string range(int64_t hi) { return "0 to " + std::to_string(hi - 1); }

void check_head(const ResidualModel& m, int64_t layer, int64_t head) {
  if (layer < 0 || layer >= m.layers())
    throw Error("layer " + std::to_string(layer) + "; expected " + range(m.layers()),
                Error::Kind::invalid_argument);
  if (head < 0 || head >= m.heads())
    throw Error("head " + std::to_string(head) + "; expected " + range(m.heads()),
                Error::Kind::invalid_argument);
}

}  // namespace

void ablate_rows(float* rows, int64_t n, int64_t d, Ablation how) {
  std::vector<double> mean(static_cast<std::size_t>(d), 0.0);
  if (how == Ablation::mean)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < d; ++k)
        mean[static_cast<std::size_t>(k)] += double{rows[i * d + k]} / static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < d; ++k) rows[i * d + k] = static_cast<float>(mean[k]);
}

Lens::Lens(std::shared_ptr<const ResidualModel> model, std::vector<int32_t> ids)
    : model_(std::move(model)), ids_(std::move(ids)) {
  if (ids_.empty()) throw Error("the lens needs at least one token", Error::Kind::invalid_argument);
  const int64_t layers = model_->layers();
  Tensor h = model_->embed(ids_);
  streams_.resize(static_cast<std::size_t>(layers + 1));
  attended_.resize(static_cast<std::size_t>(layers));
  heads_.resize(static_cast<std::size_t>(layers));
  const LayerHooks keep{
      .heads = [&](int64_t l, Tensor& o) { heads_[static_cast<std::size_t>(l)] = o.clone(); },
      .attended = [&](int64_t l,
                      Tensor& s) { attended_[static_cast<std::size_t>(l)] = s.clone(); }};
  for (int64_t l = 0; l < layers; ++l) {
    streams_[static_cast<std::size_t>(l)] = h.clone();
    model_->layer(l, h, keep);
  }
  logits_ = last_logits(*model_, h.reshape({1, h.dim(0), h.dim(1)})).reshape({model_->vocab()});
  streams_.back() = std::move(h);
}

const Tensor& Lens::stream(int64_t layer) const {
  if (layer < 0 || layer > model_->layers())
    throw Error("stream " + std::to_string(layer) + "; expected " + range(model_->layers() + 1),
                Error::Kind::invalid_argument);
  return streams_[static_cast<std::size_t>(layer)];
}

const Tensor& Lens::attended(int64_t layer) const {
  check_head(*model_, layer, 0);
  return attended_[static_cast<std::size_t>(layer)];
}

const Tensor& Lens::heads(int64_t layer) const {
  check_head(*model_, layer, 0);
  return heads_[static_cast<std::size_t>(layer)];
}

int32_t Lens::top_token() const {
  const float* z = logits_.data<float>();
  return static_cast<int32_t>(std::max_element(z, z + logits_.numel()) - z);
}

Measure Lens::measure(const Target& target) const { return measure(logits_, target); }

Measure Lens::measure(const Tensor& last, const Target& target) const {
  const int64_t vocab = last.numel();
  if (target.id < 0 || target.id >= vocab)
    throw Error("target token id " + std::to_string(target.id) + "; expected " + range(vocab),
                Error::Kind::invalid_argument);
  if (target.versus < -1 || target.versus >= vocab)
    throw Error("versus token id " + std::to_string(target.versus) + "; expected " + range(vocab) +
                    " (or none)",
                Error::Kind::invalid_argument);
  const float* z = last.data<float>();
  const double top = *std::max_element(z, z + vocab);
  double total = 0;
  for (int64_t v = 0; v < vocab; ++v) total += std::exp(double{z[v]} - top);
  Measure m;
  m.logit = z[target.id];
  m.log_prob = m.logit - top - std::log(total);
  m.versus_logit = target.versus >= 0 ? double{z[target.versus]} : 0.0;
  m.metric = m.logit - m.versus_logit;
  return m;
}

Tensor Lens::rerun(int64_t first, const LayerHooks& hooks) const {
  return rerun(first, 1, hooks).reshape({model_->vocab()});
}

Tensor Lens::rerun(int64_t first, int64_t copies, const LayerHooks& hooks,
                   const std::function<void(int64_t, Tensor&)>& prepare) const {
  const Tensor& s = stream(first);
  const int64_t n = s.dim(0), hidden = s.dim(1);
  Tensor h({copies, n, hidden}, DType::f32);
  for (int64_t b = 0; b < copies; ++b) {
    std::copy_n(s.data<float>(), n * hidden, h.data<float>() + b * n * hidden);
    if (prepare) {
      Tensor one = h.narrow(0, b, 1).reshape({n, hidden});  // a view of copy b
      prepare(b, one);
    }
  }
  if (copies == 1) h = h.reshape({n, hidden});  // one sequence: the unbatched layer
  for (int64_t l = first; l < model_->layers(); ++l) model_->layer(l, h, hooks);
  return last_logits(*model_, h.reshape({copies, n, hidden}));
}

int64_t Lens::copies_per_rerun() const { return std::max<int64_t>(1, 2048 / size()); }

Measure Lens::ablate(int64_t layer, int64_t head, Ablation how, const Target& target) const {
  check_head(*model_, layer, head);
  const int64_t n = size(), d = model_->head_dim();
  const LayerHooks hooks{.heads = [&](int64_t l, Tensor& o) {
    if (l == layer) ablate_rows(o.data<float>() + head * n * d, n, d, how);
  }};
  return measure(rerun(layer, hooks), target);
}

Measure Lens::knockout(const std::vector<Edge>& edges, const Target& target) const {
  if (edges.empty()) return measure(target);
  const int64_t n = size(), heads = model_->heads();
  int64_t first = model_->layers();
  for (const Edge& e : edges) {
    check_head(*model_, e.layer, e.head);
    const int64_t keys = model_->keys(e.layer, n);
    if (e.query < 0 || e.query >= n || e.key < 0 || e.key >= keys)
      throw Error("edge " + std::to_string(e.query) + "→" + std::to_string(e.key) +
                      ": queries are " + range(n) + ", keys " + range(keys),
                  Error::Kind::invalid_argument);
    if (model_->causal(e.layer) && e.key > e.query)
      throw Error("edge " + std::to_string(e.query) + "→" + std::to_string(e.key) +
                      " looks ahead, which the causal mask already blocks; expected key ≤ query",
                  Error::Kind::invalid_argument);
    first = std::min(first, e.layer);
  }
  const LayerHooks hooks{.mask = [&](int64_t l) {
    bool any = false;
    for (const Edge& e : edges) any = any || e.layer == l;
    if (!any) return Tensor();
    const int64_t keys = model_->keys(l, n);
    Tensor keep = Tensor::full({1, heads, n, keys}, 1.0, DType::b8);
    for (const Edge& e : edges)
      if (e.layer == l) keep.data<bool>()[(e.head * n + e.query) * keys + e.key] = false;
    return keep;
  }};
  return measure(rerun(first, hooks), target);
}

}  // namespace qkv::explain
