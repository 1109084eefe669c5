// Composition scores between heads (qkv/explain_circuits.h; Elhage et al. 2021, "Three Kinds of
// Composition"), through the heads' low-rank factors.
//
// Every matrix involved is a product of a [hidden, d] and a [d, hidden] factor: the reader's M =
// P·R (K-composition: P = W_Qᵀ, R = W_K; Q-: P = W_Kᵀ, R = W_Q; V-: P = W_O², R = W_V²) and the
// writer's W_OV = O·V. So
//   ‖M·W_OV‖_F² = ‖P (R O) V‖_F² = tr(PᵀP · A · VVᵀ · Aᵀ),  A = R·O  [d, d]
//   ‖M‖_F² = tr(PᵀP · RRᵀ),  ‖W_OV‖_F² = tr(OᵀO · VVᵀ)
// and since PᵀP and VVᵀ are symmetric, tr(G A H Aᵀ) = Σ (G A) ⊙ (A H). A pair costs d·hidden·d
// for A and 2·d³ for the rest: 2.4 M and 0.5 M multiply-adds for SmolLM2 (d = 64, hidden = 576),
// against 191 M for one hidden × hidden product.
#include <algorithm>
#include <cmath>

#include "qkv/explain_circuits.h"
#include "qkv/threads.h"

namespace qkv::explain {
namespace {

using Matrix = std::vector<double>;  // row-major

void check_pair(const ResidualModel& m, int64_t layer, int64_t head, const char* who) {
  if (layer < 0 || layer >= m.layers() || head < 0 || head >= m.heads())
    throw Error(std::string(who) + ": head " + std::to_string(layer) + "." + std::to_string(head) +
                "; expected layer 0 to " + std::to_string(m.layers() - 1) + ", head 0 to " +
                std::to_string(m.heads() - 1));
}

const float* weights(const Tensor& w, int64_t out, int64_t in, const char* name) {
  if (w.rank() != 2 || w.dim(0) != out || w.dim(1) != in || w.dtype() != DType::f32 ||
      !w.is_contiguous())
    throw Error(std::string(name) + " is " + shape_str(w.shape()) + "; expected [" +
                    std::to_string(out) + ", " + std::to_string(in) + "] float32, contiguous",
                Error::Kind::runtime);
  return w.data<float>();
}

// Layer l's attention-norm gain g, up to a positive factor (every score ignores it): the norm of
// a row of ones. A second probe, ±1 alternating (the same RMS, mean zero), must come out as the
// same gain with those signs — what a diagonal scale (RMSNorm) does and a centring norm does not.
std::vector<double> norm_gain(const ResidualModel& m, int64_t layer) {
  const int64_t hidden = m.hidden();
  Tensor probe({2, hidden});
  for (int64_t i = 0; i < hidden; ++i) {
    probe.data<float>()[i] = 1;
    probe.data<float>()[hidden + i] = i % 2 == 0 ? 1.0f : -1.0f;
  }
  const Tensor y = m.attention_norm(layer, probe).contiguous();
  std::vector<double> g(static_cast<std::size_t>(hidden));
  double worst = 0, largest = 0;
  for (int64_t i = 0; i < hidden; ++i) {
    const double ones = y.data<float>()[i], signs = y.data<float>()[hidden + i];
    g[static_cast<std::size_t>(i)] = ones;
    worst = std::max(worst, std::abs(signs - (i % 2 == 0 ? ones : -ones)));
    largest = std::max(largest, std::abs(ones));
  }
  if (worst > 1e-5 * largest)
    throw Error("composition: layer " + std::to_string(layer) +
                "'s attention norm is not a diagonal scale (an RMSNorm), so its gain cannot be "
                "folded into W_Q, W_K, W_V; set fold_norm to false");
  return g;
}

// Rows row0 … row0 + d − 1 of w [·, hidden], column i scaled by g[i] (g empty: by 1): [d, hidden].
Matrix rows_of(const float* w, int64_t row0, int64_t d, int64_t hidden,
               const std::vector<double>& g) {
  Matrix r(static_cast<std::size_t>(d * hidden));
  for (int64_t a = 0; a < d; ++a)
    for (int64_t i = 0; i < hidden; ++i)
      r[static_cast<std::size_t>(a * hidden + i)] =
          double{w[(row0 + a) * hidden + i]} * (g.empty() ? 1.0 : g[static_cast<std::size_t>(i)]);
  return r;
}

// Columns col0 … col0 + d − 1 of w [hidden, width]: [hidden, d].
Matrix columns_of(const float* w, int64_t width, int64_t col0, int64_t d, int64_t hidden) {
  Matrix c(static_cast<std::size_t>(hidden * d));
  for (int64_t i = 0; i < hidden; ++i)
    for (int64_t b = 0; b < d; ++b)
      c[static_cast<std::size_t>(i * d + b)] = w[i * width + col0 + b];
  return c;
}

// R Rᵀ of R [d, n] (rows = true), or Pᵀ P of P [n, d] (rows = false): [d, d].
Matrix gram(const Matrix& x, int64_t d, int64_t n, bool rows) {
  Matrix g(static_cast<std::size_t>(d * d));
  for (int64_t a = 0; a < d; ++a)
    for (int64_t b = a; b < d; ++b) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i)
        s += rows ? x[static_cast<std::size_t>(a * n + i)] * x[static_cast<std::size_t>(b * n + i)]
                  : x[static_cast<std::size_t>(i * d + a)] * x[static_cast<std::size_t>(i * d + b)];
      g[static_cast<std::size_t>(a * d + b)] = g[static_cast<std::size_t>(b * d + a)] = s;
    }
  return g;
}

double frobenius_dot(const Matrix& a, const Matrix& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// The reader's M = P·R: PᵀP [d, d], R [d, hidden], ‖M‖².
struct Reader {
  Matrix gram_left, right;
  double norm2 = 0;
};

// The writer's W_OV = O·V: VVᵀ [d, d] and ‖W_OV‖² (O is read from W_O at each pair).
struct Writer {
  Matrix gram_right;
  double norm2 = 0;
};

std::vector<double> gain_of(const ResidualModel& m, int64_t layer, const CompositionOptions& o) {
  return o.fold_norm ? norm_gain(m, layer) : std::vector<double>{};
}

Reader reader_of(const ResidualModel& m, int64_t layer, int64_t head, const CompositionOptions& o) {
  const int64_t hidden = m.hidden(), d = m.head_dim(), kv = head / (m.heads() / m.kv_heads());
  const std::vector<double> g = gain_of(m, layer, o);
  Matrix left;  // P as [hidden, d] (gram of columns) or Pᵀ as [d, hidden] (gram of rows)
  Reader r;
  if (o.kind == Composition::value) {
    const float* wo = weights(m.output_matrix(layer), hidden, m.heads() * d, "W_O");
    r.gram_left = gram(columns_of(wo, m.heads() * d, head * d, d, hidden), d, hidden, false);
    r.right = rows_of(weights(m.value_matrix(layer), m.kv_heads() * d, hidden, "W_V"), kv * d, d,
                      hidden, g);
  } else {
    const Matrix q = rows_of(weights(m.query_matrix(layer), m.heads() * d, hidden, "W_Q"), head * d,
                             d, hidden, g);
    const Matrix k = rows_of(weights(m.key_matrix(layer), m.kv_heads() * d, hidden, "W_K"), kv * d,
                             d, hidden, g);
    const bool key = o.kind == Composition::key;  // P = W_Qᵀ, R = W_K; else P = W_Kᵀ, R = W_Q
    r.gram_left = gram(key ? q : k, d, hidden, true);
    r.right = key ? k : q;
  }
  r.norm2 = frobenius_dot(r.gram_left, gram(r.right, d, hidden, true));
  return r;
}

Writer writer_of(const ResidualModel& m, int64_t layer, int64_t head,
                 const std::vector<double>& gain) {
  const int64_t hidden = m.hidden(), d = m.head_dim(), heads = m.heads();
  const int64_t kv = head / (heads / m.kv_heads());
  const Matrix v = rows_of(weights(m.value_matrix(layer), m.kv_heads() * d, hidden, "W_V"), kv * d,
                           d, hidden, gain);
  const float* wo = weights(m.output_matrix(layer), hidden, heads * d, "W_O");
  Writer w{.gram_right = gram(v, d, hidden, true)};
  w.norm2 = frobenius_dot(gram(columns_of(wo, heads * d, head * d, d, hidden), d, hidden, false),
                          w.gram_right);
  return w;
}

// Every head of layers 0 … layers − 1 as a writer, layer-major.
std::vector<Writer> writers_of(const ResidualModel& m, int64_t layers,
                               const CompositionOptions& o) {
  std::vector<std::vector<double>> gains;
  for (int64_t l = 0; l < layers; ++l) gains.push_back(gain_of(m, l, o));
  const int64_t heads = m.heads();
  std::vector<Writer> w(static_cast<std::size_t>(layers * heads));
  parallel_for(layers * heads, resolve_num_threads(0), [&](int64_t item, int) {
    w[static_cast<std::size_t>(item)] =
        writer_of(m, item / heads, item % heads, gains[static_cast<std::size_t>(item / heads)]);
  });
  return w;
}

// A worker's scratch: A and PᵀP·A [d, d], one row of A·VVᵀ [d].
struct Scratch {
  explicit Scratch(int64_t d)
      : a(static_cast<std::size_t>(d * d)), b(a.size()), row(static_cast<std::size_t>(d)) {}
  Matrix a, b, row;
};

// The score of one pair: A = R·O (O: columns col0 … of wo [hidden, width]), then
// Σ (PᵀP A) ⊙ (A VVᵀ) over ‖M‖²‖W_OV‖².
double pair_score(const Reader& r, const Writer& w, const float* wo, int64_t width, int64_t col0,
                  int64_t d, int64_t hidden, Scratch& x) {
  if (r.norm2 == 0 || w.norm2 == 0) return 0;  // a zero matrix composes with nothing
  std::fill(x.a.begin(), x.a.end(), 0.0);
  for (int64_t i = 0; i < d; ++i) {
    double* ai = x.a.data() + i * d;
    for (int64_t k = 0; k < hidden; ++k) {
      const double rik = r.right[static_cast<std::size_t>(i * hidden + k)];
      const float* o = wo + k * width + col0;
      for (int64_t j = 0; j < d; ++j) ai[j] += rik * o[j];
    }
  }
  std::fill(x.b.begin(), x.b.end(), 0.0);
  for (int64_t i = 0; i < d; ++i)  // b = PᵀP · A
    for (int64_t k = 0; k < d; ++k) {
      const double g = r.gram_left[static_cast<std::size_t>(i * d + k)];
      const double* ak = x.a.data() + k * d;
      double* bi = x.b.data() + i * d;
      for (int64_t j = 0; j < d; ++j) bi[j] += g * ak[j];
    }
  double s = 0;  // Σ_ij b_ij (A · VVᵀ)_ij, a row of A · VVᵀ at a time
  for (int64_t i = 0; i < d; ++i) {
    std::fill(x.row.begin(), x.row.end(), 0.0);
    for (int64_t k = 0; k < d; ++k) {
      const double aik = x.a[static_cast<std::size_t>(i * d + k)];
      const double* gk = w.gram_right.data() + k * d;
      for (int64_t j = 0; j < d; ++j) x.row[static_cast<std::size_t>(j)] += aik * gk[j];
    }
    for (int64_t j = 0; j < d; ++j)
      s += x.b[static_cast<std::size_t>(i * d + j)] * x.row[static_cast<std::size_t>(j)];
  }
  return std::sqrt(std::max(0.0, s) / (r.norm2 * w.norm2));
}

// The scores of `reader` (in layer `layer`) against writers of layers 0 … layer − 1: [layer, H].
Tensor scores_of(const ResidualModel& m, const Reader& reader, const std::vector<Writer>& writers,
                 int64_t layer) {
  const int64_t hidden = m.hidden(), d = m.head_dim(), heads = m.heads();
  Tensor out({layer, heads}, DType::f64);
  const int threads = resolve_num_threads(0);
  std::vector<Scratch> scratch(static_cast<std::size_t>(threads), Scratch(d));
  parallel_for(layer * heads, threads, [&](int64_t item, int worker) {
    const int64_t l = item / heads, h = item % heads;
    const float* wo = weights(m.output_matrix(l), hidden, heads * d, "W_O");
    out.data<double>()[item] =
        pair_score(reader, writers[static_cast<std::size_t>(item)], wo, heads * d, h * d, d, hidden,
                   scratch[static_cast<std::size_t>(worker)]);
  });
  return out;
}

}  // namespace

double composition_score(const ResidualModel& model, int64_t reader_layer, int64_t reader_head,
                         int64_t writer_layer, int64_t writer_head,
                         const CompositionOptions& options) {
  check_pair(model, reader_layer, reader_head, "composition_score (reader)");
  check_pair(model, writer_layer, writer_head, "composition_score (writer)");
  if (writer_layer >= reader_layer)
    throw Error("composition_score: the writer " + std::to_string(writer_layer) + "." +
                std::to_string(writer_head) + " must sit in a layer before the reader's (" +
                std::to_string(reader_layer) + ")");
  const int64_t hidden = model.hidden(), d = model.head_dim(), heads = model.heads();
  const Reader r = reader_of(model, reader_layer, reader_head, options);
  const Writer w =
      writer_of(model, writer_layer, writer_head, gain_of(model, writer_layer, options));
  Scratch scratch(d);
  return pair_score(r, w, weights(model.output_matrix(writer_layer), hidden, heads * d, "W_O"),
                    heads * d, writer_head * d, d, hidden, scratch);
}

Tensor composition_scores(const ResidualModel& model, int64_t layer, int64_t head,
                          const CompositionOptions& options) {
  check_pair(model, layer, head, "composition_scores");
  return scores_of(model, reader_of(model, layer, head, options), writers_of(model, layer, options),
                   layer);
}

std::vector<Composers> top_composers(const ResidualModel& model,
                                     const std::vector<ScoredHead>& readers, int64_t top,
                                     const CompositionOptions& options) {
  if (top < 0) throw Error("top_composers: top " + std::to_string(top) + "; expected 0 or more");
  int64_t deepest = 0;
  for (const auto& [score, layer, head] : readers) {
    check_pair(model, layer, head, "top_composers");
    deepest = std::max(deepest, layer);
  }
  const std::vector<Writer> writers = writers_of(model, deepest, options);
  std::vector<Composers> out;
  for (const auto& [score, layer, head] : readers) {
    Composers c{.layer = layer, .head = head, .induction = score};
    c.scores = scores_of(model, reader_of(model, layer, head, options), writers, layer);
    for (int64_t i = 0; i < c.scores.numel(); ++i)
      c.top.emplace_back(c.scores.data<double>()[i], i / model.heads(), i % model.heads());
    std::stable_sort(c.top.begin(), c.top.end(), [](const ScoredHead& x, const ScoredHead& y) {
      return std::get<0>(x) > std::get<0>(y);
    });
    c.top.resize(std::min<std::size_t>(c.top.size(), static_cast<std::size_t>(top)));
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace qkv::explain
