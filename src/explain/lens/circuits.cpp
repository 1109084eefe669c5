// Circuits from the weights alone (qkv/explain_circuits.h; Elhage et al. 2021): the QK and OV
// tables of one head on the direct path, and composition scores between heads through their
// low-rank factors.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "qkv/explain_circuits.h"
#include "qkv/threads.h"

namespace qkv::explain {
namespace {

void check_head(const ResidualModel& m, int64_t layer, int64_t head, const char* who) {
  if (layer < 0 || layer >= m.layers())
    throw Error(std::string(who) + ": layer " + std::to_string(layer) + "; expected 0 to " +
                std::to_string(m.layers() - 1));
  if (head < 0 || head >= m.heads())
    throw Error(std::string(who) + ": head " + std::to_string(head) + "; expected 0 to " +
                std::to_string(m.heads() - 1));
}

int64_t kv_of(const ResidualModel& m, int64_t head) { return head / (m.heads() / m.kv_heads()); }

// The tokens of a table: 1 … context of them (`limit`; output tokens: any number), each in the
// vocabulary.
void check_ids(const ResidualModel& m, const std::vector<int32_t>& ids, const char* who,
               bool limit = true) {
  if (limit && (ids.empty() || static_cast<int64_t>(ids.size()) > m.context()))
    throw Error(std::string(who) + ": " + std::to_string(ids.size()) + " tokens; expected 1 to " +
                std::to_string(m.context()));
  for (const int32_t id : ids)
    if (id < 0 || id >= m.vocab())
      throw Error(std::string(who) + ": token id " + std::to_string(id) + "; expected 0 to " +
                  std::to_string(m.vocab() - 1));
}

// A weight matrix [out, in] float32, contiguous, as the model's accessors give it.
const float* matrix(const Tensor& w, int64_t out, int64_t in, const char* name) {
  if (w.rank() != 2 || w.dim(0) != out || w.dim(1) != in || w.dtype() != DType::f32 ||
      !w.is_contiguous())
    throw Error(std::string(name) + " is " + shape_str(w.shape()) + " " +
                    std::string(dtype_name(w.dtype())) + "; expected [" + std::to_string(out) +
                    ", " + std::to_string(in) + "] float32, contiguous",
                Error::Kind::runtime);
  return w.data<float>();
}

// The direct path's input: each token alone (as at position 0) embedded, through layer l's
// attention norm. [T, hidden] float32.
Tensor normed_embeddings(const ResidualModel& m, int64_t layer, const std::vector<int32_t>& ids) {
  const int64_t hidden = m.hidden(), n = static_cast<int64_t>(ids.size());
  Tensor x({n, hidden});
  for (int64_t t = 0; t < n; ++t) {
    const Tensor e = m.embed({ids[static_cast<std::size_t>(t)]}).contiguous();
    std::copy_n(e.data<float>(), hidden, x.data<float>() + t * hidden);
  }
  return m.attention_norm(layer, x).contiguous();
}

// Rows row0 … row0 + d − 1 of w [·, hidden] applied to each row of x [T, hidden], accumulated in
// float64: [1, T, 1, d] float32 — every token its own "head" of one position, so that position()
// puts each at the same position.
Tensor project(const float* w, int64_t row0, int64_t d, const Tensor& x) {
  const int64_t n = x.dim(0), hidden = x.dim(1);
  Tensor out({1, n, 1, d});
  for (int64_t t = 0; t < n; ++t)
    for (int64_t a = 0; a < d; ++a) {
      const float* row = w + (row0 + a) * hidden;
      const float* xt = x.data<float>() + t * hidden;
      double s = 0;
      for (int64_t i = 0; i < hidden; ++i) s += double{row[i]} * xt[i];
      out.data<float>()[t * d + a] = static_cast<float>(s);
    }
  return out;
}

}  // namespace

QkTable qk_table(const ResidualModel& model, int64_t layer, int64_t head,
                 const std::vector<int32_t>& ids, const QkOptions& options) {
  check_head(model, layer, head, "qk_table");
  check_ids(model, ids, "qk_table");
  if (options.offset < 0 || options.offset >= model.context())
    throw Error("qk_table: offset " + std::to_string(options.offset) +
                " (the query's position less the key's); expected 0 to " +
                std::to_string(model.context() - 1));
  const int64_t hidden = model.hidden(), d = model.head_dim(), n = static_cast<int64_t>(ids.size());
  QkTable t{.layer = layer,
            .head = head,
            .kv_head = kv_of(model, head),
            .offset = options.offset,
            .scale = model.attention_scale(layer),
            .ids = ids};
  for (const int32_t id : ids) t.tokens.push_back(model.token_text(id));
  const Tensor x = normed_embeddings(model, layer, ids);
  const float* wq = matrix(model.query_matrix(layer), model.heads() * d, hidden, "W_Q");
  const float* wk = matrix(model.key_matrix(layer), model.kv_heads() * d, hidden, "W_K");
  Tensor q = project(wq, head * d, d, x), k = project(wk, t.kv_head * d, d, x);
  model.finish_projection(layer, q, head, true);  // biases, per-head norms
  model.finish_projection(layer, k, t.kv_head, false);
  model.position(layer, q, options.offset);  // every query at position Δ,
  model.position(layer, k, 0);               // every key at 0: RoPE enters here and nowhere else
  t.logits = Tensor({n, n}, DType::f64);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t a = 0; a < d; ++a)
        s += double{q.data<float>()[i * d + a]} * k.data<float>()[j * d + a];
      t.logits.data<double>()[i * n + j] = t.scale * s;
    }
  return t;
}

namespace {

// W_O^h W_V^{kv(h)} x for each row of x [T, hidden] (float64), and each one's norm.
std::vector<double> ov_outputs(const ResidualModel& m, int64_t layer, int64_t head, const Tensor& x,
                               std::vector<double>& norms) {
  const int64_t hidden = m.hidden(), d = m.head_dim(), n = x.dim(0), kv = kv_of(m, head);
  const float* wv = matrix(m.value_matrix(layer), m.kv_heads() * d, hidden, "W_V");
  const float* wo = matrix(m.output_matrix(layer), hidden, m.heads() * d, "W_O");
  std::vector<double> out(static_cast<std::size_t>(n * hidden)), v(static_cast<std::size_t>(d));
  norms.assign(static_cast<std::size_t>(n), 0);
  for (int64_t t = 0; t < n; ++t) {
    const float* xt = x.data<float>() + t * hidden;
    for (int64_t a = 0; a < d; ++a) {
      const float* row = wv + (kv * d + a) * hidden;
      double s = 0;
      for (int64_t i = 0; i < hidden; ++i) s += double{row[i]} * xt[i];
      v[static_cast<std::size_t>(a)] = s;
    }
    double squares = 0;
    for (int64_t i = 0; i < hidden; ++i) {
      const float* row = wo + i * m.heads() * d + head * d;
      double s = 0;
      for (int64_t a = 0; a < d; ++a) s += double{row[a]} * v[static_cast<std::size_t>(a)];
      out[static_cast<std::size_t>(t * hidden + i)] = s;
      squares += s * s;
    }
    norms[static_cast<std::size_t>(t)] = std::sqrt(squares);
  }
  return out;
}

// The `top` largest of logits [vocab] float32, largest first (ties: the smaller id first).
std::vector<Promoted> promoted(const ResidualModel& m, const float* logits, int64_t top) {
  std::vector<int32_t> order(static_cast<std::size_t>(m.vocab()));
  std::iota(order.begin(), order.end(), 0);
  const auto k = static_cast<std::ptrdiff_t>(std::min<int64_t>(top, m.vocab()));
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  std::vector<Promoted> out;
  for (std::ptrdiff_t r = 0; r < k; ++r)
    out.push_back({.id = order[static_cast<std::size_t>(r)],
                   .token = m.token_text(order[static_cast<std::size_t>(r)]),
                   .logit = logits[order[static_cast<std::size_t>(r)]]});
  return out;
}

}  // namespace

OvTable ov_table(const ResidualModel& model, int64_t layer, int64_t head,
                 const std::vector<int32_t>& ids, const OvOptions& options) {
  check_head(model, layer, head, "ov_table");
  check_ids(model, ids, "ov_table");
  if (!options.outputs.empty()) check_ids(model, options.outputs, "ov_table's outputs", false);
  if (options.top < 0)
    throw Error("ov_table: top " + std::to_string(options.top) + "; expected 0 or more");
  const int64_t hidden = model.hidden(), n = static_cast<int64_t>(ids.size());
  OvTable t{
      .layer = layer, .head = head, .kv_head = kv_of(model, head), .outputs = options.outputs};
  for (const int32_t id : options.outputs) t.output_tokens.push_back(model.token_text(id));
  std::vector<double> norms;
  const std::vector<double> written =
      ov_outputs(model, layer, head, normed_embeddings(model, layer, ids), norms);
  Tensor out({n, hidden});
  for (int64_t i = 0; i < n * hidden; ++i)
    out.data<float>()[i] = static_cast<float>(written[static_cast<std::size_t>(i)]);
  const Tensor logits = model.unembed(model.final_norm(out)).contiguous();  // [T, vocab]
  for (int64_t r = 0; r < n; ++r) {
    const float* row = logits.data<float>() + r * model.vocab();
    OvRow o{.id = ids[static_cast<std::size_t>(r)],
            .token = model.token_text(ids[static_cast<std::size_t>(r)]),
            .norm = norms[static_cast<std::size_t>(r)],
            .top = promoted(model, row, options.top)};
    for (const int32_t id : options.outputs) o.outputs.push_back(row[id]);
    t.rows.push_back(std::move(o));
  }
  return t;
}

}  // namespace qkv::explain
