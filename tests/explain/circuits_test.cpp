// Circuits from the weights (qkv/explain_circuits.h), checked by computations the code does not
// make: the QK table against the attention logits of the model's own capture at layer 0 (where
// the stream is the embedding); the OV table against a float64 recomputation from the GGUF file's
// raw values; composition scores against hidden × hidden products in float64 and on a model
// built so that the answer is 0, 1/√2 or 1. Each checker is shown to reject a perturbed result.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <numeric>

#include "core/scratch_files.h"
#include "models/model_files.h"
#include "models/tiny_llama_gguf.h"
#include "qkv/causal_lm.h"
#include "qkv/explain_circuits.h"
#include "qkv/explain_readings.h"
#include "qkv/explain_run.h"
#include "qkv/terminal.h"
#include "usage_error.h"

namespace qkv::explain {
namespace {

using Matrix = std::vector<double>;  // row-major
constexpr auto error_of = test::usage_error_of;

const CausalLM& smollm2() {
  static const CausalLM model = CausalLM::load(test::smollm2_gguf());
  return model;
}

// tiny_llama_gguf with its norms' gains made uneven (so that a gain left out shows).
test::TinyLlamaGguf uneven_tiny() {
  test::TinyLlamaGguf g = test::tiny_llama_gguf();
  for (const char* name :
       {"blk.0.attn_norm.weight", "blk.1.attn_norm.weight", "output_norm.weight"})
    for (std::size_t i = 0; i < g.tensor(name).values.size(); ++i)
      g.tensor(name).values[i] = 0.5f + 0.1f * static_cast<float>((i * 7 + name[4]) % 11);
  return g;
}

CausalLM load(const test::TinyLlamaGguf& g) {
  const test::ScratchDir dir("qkv-circuits");
  return CausalLM::load(g.write(dir.path("tiny.gguf")));
}

// ---- the QK table against the capture ----
// The checker: the worst |table − capture| over each head's pairs, in units of the float32
// rounding bound 1e-5 · scale · ‖q_i‖ ‖k_j‖ (q, k rounded to float32 once each and summed over
// `hidden` terms: ~√hidden · 6e-8 ≈ 1.4e-6 of that product for SmolLM2). At layer 0 the query at
// position Δ (the last of `ids`) reads only its own embedding, so the capture's logit of the last
// query on the first key is the table's [last][first] entry at offset Δ.
AttentionCapture layer0(const CausalLM& m, const std::vector<int32_t>& ids) {
  std::vector<AttentionCapture> layers;
  (void)m.capture(ids, layers);
  return layers.at(0);
}

double qk_error(const AttentionCapture& c, int64_t head, const QkTable& t, std::size_t query,
                std::size_t key) {
  const int64_t n = c.q.dim(2), d = c.q.dim(3);
  const int64_t i = n - 1, kv = head / (c.q.dim(1) / c.k.dim(1));
  double qq = 0, kk = 0;
  for (int64_t a = 0; a < d; ++a) {
    qq += std::pow(c.q.value((head * n + i) * d + a), 2);
    kk += std::pow(c.k.value((kv * n + 0) * d + a), 2);
  }
  const double captured = c.logits.value((head * n + i) * n + 0);
  const double table = t.logits.value(static_cast<int64_t>(query * t.ids.size() + key));
  return std::abs(table - captured) / (1e-5 * c.scale * std::sqrt(qq * kk));
}

TEST(Circuits, QkTableIsTheCapturedLogitAtLayer0) {
  const CausalLM tiny = load(test::tiny_llama_gguf());
  for (const auto* m : {&tiny, &smollm2()}) {
    const auto rm = m->residual();
    const int32_t a = m == &tiny ? 7 : m->tokenize(" Paris")[0];
    const int32_t b = m == &tiny ? 12 : m->tokenize(" France")[0];
    for (const int64_t offset : {0, 1, 5}) {
      std::vector<int32_t> ids(static_cast<std::size_t>(offset + 1), b);
      ids.front() = offset == 0 ? b : a;  // key first, query last; between them anything
      const AttentionCapture c = layer0(*m, ids);
      double worst = 0;
      for (int64_t h = 0; h < rm->heads(); ++h) {
        const QkTable t = qk_table(*rm, 0, h, {a, b}, {.offset = offset});
        const std::size_t key = offset == 0 ? 1 : 0;
        worst = std::max(worst, qk_error(c, h, t, 1, key));
        EXPECT_LE(qk_error(c, h, t, 1, key), 1.0) << "head " << h << ", offset " << offset;
      }
      std::printf("%s, offset %lld: worst error %.3f of the bound\n",
                  m == &tiny ? "tiny" : "SmolLM2", static_cast<long long>(offset), worst);
    }
  }
}

TEST(Circuits, TheQkCheckerRejectsAWrongOffsetHeadOrValue) {
  const CausalLM& m = smollm2();
  const auto rm = m.residual();
  const int32_t a = m.tokenize(" Paris")[0], b = m.tokenize(" France")[0];
  const AttentionCapture c = layer0(m, {a, b, b, b});  // Δ = 3
  QkTable t = qk_table(*rm, 0, 4, {a, b}, {.offset = 3});
  EXPECT_LE(qk_error(c, 4, t, 1, 0), 1.0);
  EXPECT_GT(qk_error(c, 4, qk_table(*rm, 0, 4, {a, b}, {.offset = 2}), 1, 0), 1.0);
  EXPECT_GT(qk_error(c, 4, qk_table(*rm, 0, 5, {a, b}, {.offset = 3}), 1, 0), 1.0);
  t.logits.data<double>()[2] *= 1 + 1e-4;
  EXPECT_GT(qk_error(c, 4, t, 1, 0), 1.0);
}

// ---- the OV table against float64 from the file's values ----
struct Values {  // the tiny model's tensors, [out][in] row-major as the GGUF stores them
  Matrix embedding, attn_gain, v, o, final_gain;
  int64_t hidden = 16, d = 4, heads = 4, kv_heads = 2, vocab = 0;
};

Values values_of(const test::TinyLlamaGguf& g, int layer) {
  const auto f64 = [&](const std::string& name) {
    for (const test::GgufTensor& t : g.tensors)
      if (t.name == name) return Matrix(t.values.begin(), t.values.end());
    throw std::logic_error("no tensor " + name);
  };
  const std::string p = "blk." + std::to_string(layer) + ".";
  Values x{.embedding = f64("token_embd.weight"),
           .attn_gain = f64(p + "attn_norm.weight"),
           .v = f64(p + "attn_v.weight"),
           .o = f64(p + "attn_output.weight"),
           .final_gain = f64("output_norm.weight")};
  x.vocab = static_cast<int64_t>(x.embedding.size()) / x.hidden;
  return x;
}

Matrix rms_norm(const Matrix& x, const Matrix& gain) {
  double squares = 0;
  for (const double e : x) squares += e * e;
  const double inv = 1 / std::sqrt(squares / static_cast<double>(x.size()) + 1e-5);
  Matrix y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * gain[i];
  return y;
}

// Token `id`'s logits through head h's OV circuit, in float64, and each logit's Σ|terms| (the
// scale of its rounding error). Tied unembedding: the embedding's rows.
std::pair<Matrix, Matrix> ov_reference(const Values& w, int32_t id, int64_t h) {
  const int64_t D = w.hidden, d = w.d, kv = h / (w.heads / w.kv_heads);
  const Matrix x = rms_norm(
      Matrix(w.embedding.begin() + id * D, w.embedding.begin() + (id + 1) * D), w.attn_gain);
  Matrix v(static_cast<std::size_t>(d), 0), o(static_cast<std::size_t>(D), 0);
  for (int64_t a = 0; a < d; ++a)
    for (int64_t i = 0; i < D; ++i) v[a] += w.v[(kv * d + a) * D + i] * x[i];
  for (int64_t i = 0; i < D; ++i)
    for (int64_t a = 0; a < d; ++a) o[i] += w.o[i * w.heads * d + h * d + a] * v[a];
  const Matrix normed = rms_norm(o, w.final_gain);
  Matrix logits(static_cast<std::size_t>(w.vocab), 0), size = logits;
  for (int64_t t = 0; t < w.vocab; ++t)
    for (int64_t i = 0; i < D; ++i) {
      logits[t] += normed[i] * w.embedding[t * D + i];
      size[t] += std::abs(normed[i] * w.embedding[t * D + i]);
    }
  return {logits, size};
}

// The checker: the worst |table − reference| over the chosen outputs (every token) in units of
// 1e-5 · Σ|terms| (float32's final norm and unembedding: ~16 terms at 6e-8 each), and whether the
// top tokens are the reference's largest.
double ov_error(const Values& w, const OvTable& t) {
  double worst = 0;
  for (const OvRow& r : t.rows) {
    const auto [logits, size] = ov_reference(w, r.id, t.head);
    for (std::size_t k = 0; k < t.outputs.size(); ++k)
      worst = std::max(worst, std::abs(r.outputs[k] - logits[t.outputs[k]]) /
                                  (1e-5 * size[t.outputs[k]] + 1e-12));
    std::vector<int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    for (std::size_t k = 0; k < r.top.size(); ++k)
      if (r.top[k].id != order[k]) worst = std::max(worst, 1e9);
  }
  return worst;
}

TEST(Circuits, OvTableIsTheFloat64RecomputationFromTheFile) {
  const test::TinyLlamaGguf g = uneven_tiny();
  const CausalLM m = load(g);
  const auto rm = m.residual();
  std::vector<int32_t> every(static_cast<std::size_t>(rm->vocab()));
  std::iota(every.begin(), every.end(), 0);
  for (int layer = 0; layer < 2; ++layer) {
    const Values w = values_of(g, layer);
    for (int64_t h = 0; h < rm->heads(); ++h) {
      const OvTable t = ov_table(*rm, layer, h, {3, 7, 30}, {.outputs = every, .top = 4});
      EXPECT_EQ(t.kv_head, h / 2);
      EXPECT_LE(ov_error(w, t), 1.0) << "layer " << layer << ", head " << h;
    }
  }
}

TEST(Circuits, TheOvCheckerRejectsAnotherHeadOrAChangedLogit) {
  const test::TinyLlamaGguf g = uneven_tiny();
  const CausalLM m = load(g);
  const auto rm = m.residual();
  std::vector<int32_t> every(static_cast<std::size_t>(rm->vocab()));
  std::iota(every.begin(), every.end(), 0);
  const Values w = values_of(g, 0);
  OvTable t = ov_table(*rm, 0, 1, {3, 7}, {.outputs = every, .top = 4});
  EXPECT_LE(ov_error(w, t), 1.0);
  OvTable other = ov_table(*rm, 0, 2, {3, 7}, {.outputs = every, .top = 4});
  other.head = 1;  // head 2's numbers (kv head 1) passed off as head 1's
  EXPECT_GT(ov_error(w, other), 1.0);
  t.rows[1].outputs[5] += 1e-3;
  EXPECT_GT(ov_error(w, t), 1.0);
}

// ---- composition against hidden × hidden products ----
// A head's W_QK = W_Qᵀ W_K and W_OV = W_O W_V, [hidden, hidden] float64 from the file's values,
// the layer's attention-norm gain folded into W_Q, W_K, W_V (W · diag(g)) when `fold`.
struct Full {
  Matrix qk, ov;
};

Full full_of(const test::TinyLlamaGguf& g, int layer, int64_t h, bool fold) {
  const int64_t D = 16, d = 4, heads = 4, kv = h / 2;
  const auto get = [&](const std::string& name) {
    for (const test::GgufTensor& t : g.tensors)
      if (t.name == "blk." + std::to_string(layer) + "." + name)
        return Matrix(t.values.begin(), t.values.end());
    throw std::logic_error("no tensor " + name);
  };
  const Matrix q = get("attn_q.weight"), k = get("attn_k.weight"), v = get("attn_v.weight"),
               o = get("attn_output.weight"), gain = get("attn_norm.weight");
  Full f{Matrix(D * D, 0), Matrix(D * D, 0)};
  for (int64_t i = 0; i < D; ++i)
    for (int64_t j = 0; j < D; ++j)
      for (int64_t a = 0; a < d; ++a) {
        const double gi = fold ? gain[i] : 1, gj = fold ? gain[j] : 1;
        f.qk[i * D + j] += q[(h * d + a) * D + i] * gi * k[(kv * d + a) * D + j] * gj;
        f.ov[i * D + j] += o[i * heads * d + h * d + a] * v[(kv * d + a) * D + j] * gj;
      }
  return f;
}

double frobenius(const Matrix& a) {
  double s = 0;
  for (const double x : a) s += x * x;
  return std::sqrt(s);
}

// ‖M W‖ / (‖M‖ ‖W‖) by the definition, in float64: M = W_QK (K), W_QKᵀ (Q) or W_OV (V) of the
// reader, W = W_OV of the writer.
double reference_score(const Full& reader, const Full& writer, Composition kind, int64_t D) {
  Matrix m = kind == Composition::value ? reader.ov : reader.qk, mw(m.size(), 0);
  if (kind == Composition::query)
    for (int64_t i = 0; i < D; ++i)
      for (int64_t j = 0; j < D; ++j) m[i * D + j] = reader.qk[j * D + i];
  for (int64_t i = 0; i < D; ++i)
    for (int64_t k = 0; k < D; ++k)
      for (int64_t j = 0; j < D; ++j) mw[i * D + j] += m[i * D + k] * writer.ov[k * D + j];
  const double denominator = frobenius(m) * frobenius(writer.ov);
  return denominator == 0 ? 0 : frobenius(mw) / denominator;
}

constexpr Composition kKinds[] = {Composition::query, Composition::key, Composition::value};

// The bound of |score − reference|: 1e-12 on the raw matrices (float64 sums of a few hundred
// terms); with the gains folded, the gain comes from probing the norm in float32, each g_i rounded
// by up to 2⁻²⁴ relative, and the score (a ratio of norms in which each side's gain enters twice)
// moves by up to ~4 · 2⁻²⁴ ≈ 2.4e-7 of itself (measured: up to 1.2e-8).
double bound(double score, bool fold) { return fold ? 2.4e-7 * score : 1e-12; }

TEST(Circuits, CompositionIsTheFullProductsScore) {
  const test::TinyLlamaGguf g = uneven_tiny();
  const CausalLM m = load(g);
  const auto rm = m.residual();
  for (const Composition kind : kKinds)
    for (const bool fold : {false, true})
      for (int64_t h2 = 0; h2 < 4; ++h2) {
        const Tensor all = composition_scores(*rm, 1, h2, {.kind = kind, .fold_norm = fold});
        ASSERT_EQ(all.shape(), (Shape{1, 4}));
        for (int64_t h1 = 0; h1 < 4; ++h1) {
          const double want =
              reference_score(full_of(g, 1, h2, fold), full_of(g, 0, h1, fold), kind, 16);
          const double got =
              composition_score(*rm, 1, h2, 0, h1, {.kind = kind, .fold_norm = fold});
          EXPECT_NEAR(got, want, bound(want, fold))
              << "1." << h2 << " on 0." << h1 << " fold " << fold;
          EXPECT_EQ(all.data<double>()[h1], got);
        }
      }
}

TEST(Circuits, TheCompositionCheckerRejectsAnotherKindOrNoGain) {
  const test::TinyLlamaGguf g = uneven_tiny();
  const CausalLM m = load(g);
  const auto rm = m.residual();
  const Full reader = full_of(g, 1, 3, false), writer = full_of(g, 0, 1, false);
  const double raw = composition_score(*rm, 1, 3, 0, 1, {.fold_norm = false});  // K-composition
  const double want = reference_score(reader, writer, Composition::key, 16);
  EXPECT_NEAR(raw, want, bound(want, false));
  EXPECT_GT(std::abs(raw - reference_score(reader, writer, Composition::query, 16)), 1e-3);
  EXPECT_GT(std::abs(raw * (1 + 1e-9) - want), bound(want, false));
  const double folded = composition_score(*rm, 1, 3, 0, 1);
  const double want_folded =
      reference_score(full_of(g, 1, 3, true), full_of(g, 0, 1, true), Composition::key, 16);
  EXPECT_NEAR(folded, want_folded, bound(want_folded, true));
  EXPECT_GT(std::abs(folded - want), bound(want, true));  // the gains left out
  EXPECT_GT(std::abs(folded * (1 + 1e-6) - want_folded), bound(want_folded, true));
}

// A model whose layer-0 heads each copy one coordinate to another and whose head 1.2 reads chosen
// coordinates, every other weight zero (norms one):
//   W_OV^{0.0} = e9 e3ᵀ, W_OV^{0.1} = e7 e3ᵀ, W_OV^{0.2} = e11 e5ᵀ, W_OV^{0.3} = e13 e5ᵀ
//   W_QK^{1.2} = e9 (e7 + e11)ᵀ (its query reads e9, its key e7 + e11), W_OV^{1.2} = e0 e13ᵀ
// K: W_QK W_OV^{0.1} = e9 e3ᵀ, of norm 1 over ‖W_QK‖ = √2: 1/√2, as for 0.2; 0 for 0.0 and 0.3.
// Q: W_QKᵀ W_OV^{0.0} = (e7 + e11) e3ᵀ: √2 / √2 = 1; 0 for the rest.
// V: W_OV^{1.2} W_OV^{0.3} = e0 e5ᵀ: 1; 0 for the rest.
TEST(Circuits, CompositionOnAModelBuiltForIt) {
  test::TinyLlamaGguf g = test::zero_llama_gguf(2, 16, 4, 2, 24);
  for (test::GgufTensor& t : g.tensors) {
    uint64_t n = 1;
    for (const uint64_t e : t.ne) n *= e;
    t.values.assign(n, t.name.find("norm") != std::string::npos ? 1.0f : 0.0f);
  }
  const auto set = [&](const std::string& name, int64_t out, int64_t in) {
    test::GgufTensor& t = g.tensor(name);
    t.values[static_cast<std::size_t>(out * static_cast<int64_t>(t.ne[0]) + in)] = 1;
  };
  set("blk.0.attn_v.weight", 0, 3);  // kv head 0 reads e3
  set("blk.0.attn_v.weight", 4, 5);  // kv head 1 reads e5
  set("blk.0.attn_output.weight", 9, 0);
  set("blk.0.attn_output.weight", 7, 4);
  set("blk.0.attn_output.weight", 11, 8);
  set("blk.0.attn_output.weight", 13, 12);
  set("blk.1.attn_q.weight", 8, 9);  // head 2's query reads e9
  set("blk.1.attn_k.weight", 4, 7);  // kv head 1's key reads e7 + e11
  set("blk.1.attn_k.weight", 4, 11);
  set("blk.1.attn_v.weight", 4, 13);
  set("blk.1.attn_output.weight", 0, 8);
  const CausalLM m = load(g);
  const auto rm = m.residual();
  const double r = 1 / std::sqrt(2.0);
  const std::vector<std::pair<Composition, std::vector<double>>> want = {
      {Composition::key, {0, r, r, 0}},
      {Composition::query, {1, 0, 0, 0}},
      {Composition::value, {0, 0, 0, 1}}};
  for (const auto& [kind, scores] : want)
    for (const bool fold : {false, true})
      for (int64_t h1 = 0; h1 < 4; ++h1)
        EXPECT_NEAR(composition_score(*rm, 1, 2, 0, h1, {.kind = kind, .fold_norm = fold}),
                    scores[static_cast<std::size_t>(h1)], 1e-14)
            << "0." << h1;
  EXPECT_EQ(composition_score(*rm, 1, 0, 0, 1), 0);  // head 1.0 reads nothing
}

TEST(Circuits, SaysWhatIsOutOfRange) {
  const CausalLM m = load(test::tiny_llama_gguf());
  const auto rm = m.residual();
  EXPECT_EQ(error_of([&] { qk_table(*rm, 2, 0, {3}); }), "qk_table: layer 2; expected 0 to 1");
  EXPECT_EQ(error_of([&] { qk_table(*rm, 0, 4, {3}); }), "qk_table: head 4; expected 0 to 3");
  EXPECT_EQ(error_of([&] { qk_table(*rm, 0, 0, {3}, {.offset = -1}); }),
            "qk_table: offset -1 (the query's position less the key's); expected 0 to 31");
  EXPECT_EQ(error_of([&] { qk_table(*rm, 0, 0, {}); }), "qk_table: 0 tokens; expected 1 to 32");
  EXPECT_EQ(error_of([&] { ov_table(*rm, 0, 0, {3}, {.outputs = {40}}); }),
            "ov_table's outputs: token id 40; expected 0 to 39");
  EXPECT_EQ(error_of([&] { composition_score(*rm, 1, 0, 1, 1); }),
            "composition_score: the writer 1.1 must sit in a layer before the reader's (1)");
  EXPECT_EQ(error_of([&] {
              top_composers(*rm, {{0.5, 0, 9}});
            }),
            "top_composers: head 0.9; expected layer 0 to 1, head 0 to 3");
}

// ---- views ----
int widest_line(const std::string& text) {
  int widest = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    widest = std::max(widest, display_width(text.substr(start, end - start)));
    start = end + 1;
  }
  return widest;
}

TEST(Circuits, ViewsFitEightyColumnsAndJsonHoldsTheTables) {
  const CausalLM m = load(uneven_tiny());
  const auto rm = m.residual();
  std::vector<int32_t> ids(14);
  std::iota(ids.begin(), ids.end(), 26);  // "Ġ", "Ċ", ".", "he", ... : spaces and controls shown
  const QkTable qk = qk_table(*rm, 1, 3, ids, {.offset = 2});
  const std::string text = qk_text(qk);
  EXPECT_LE(widest_line(text), 80) << text;
  EXPECT_NE(text.find("␣the"), std::string::npos) << text;
  EXPECT_NE(text.find("\\n"), std::string::npos) << text;  // "Ċ" is a newline: spelled out
  const nlohmann::json j = qk_json(qk);
  EXPECT_EQ(j["offset"], 2);
  EXPECT_EQ(j["kv_head"], 1);
  for (int64_t i = 0; i < 14; ++i)
    for (int64_t k = 0; k < 14; ++k)
      EXPECT_EQ(j["logits"][i][k].get<double>(), qk.logits.data<double>()[i * 14 + k]);

  const OvTable ov = ov_table(*rm, 0, 1, ids, {.outputs = ids, .top = 8});
  const std::string ov_view = ov_text(ov);
  EXPECT_LE(widest_line(ov_view), 80) << ov_view;
  const nlohmann::json o = ov_json(ov);
  EXPECT_EQ(o["rows"][3]["top"][0]["id"], ov.rows[3].top[0].id);
  EXPECT_EQ(o["rows"][3]["outputs"][5].get<double>(), ov.rows[3].outputs[5]);

  const std::vector<Composers> c = top_composers(*rm, {{0.9, 1, 2}, {0.4, 0, 1}}, 4);
  const std::string composers = composers_text(c);
  EXPECT_LE(widest_line(composers), 80) << composers;
  EXPECT_EQ(c[1].top.size(), 0u);
  EXPECT_EQ(composers_json(c)["readers"][0]["top"].size(), 4u);
  std::printf("%s\n%s\n%s\n", text.c_str(), ov_view.c_str(), composers.c_str());
}

// ---- SmolLM2: the induction heads qkv detects and what they read ----
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ‖W_QK^{h2} W_OV^{h1}‖ / (‖W_QK^{h2}‖ ‖W_OV^{h1}‖) of SmolLM2's raw matrices (no gain), through
// the [hidden, hidden] matrices in float64: the definition, at 191 M multiply-adds a product.
double smollm2_reference(const ResidualModel& m, int64_t l2, int64_t h2, int64_t l1, int64_t h1) {
  const int64_t D = m.hidden(), d = m.head_dim(), H = m.heads(), group = H / m.kv_heads();
  const auto at = [](const Tensor& w, int64_t r, int64_t c) { return double{w.at<float>(r, c)}; };
  Matrix qk(D * D, 0), ov(D * D, 0), product(D * D, 0);
  for (int64_t a = 0; a < d; ++a)
    for (int64_t i = 0; i < D; ++i) {
      const double q = at(m.query_matrix(l2), h2 * d + a, i),
                   o = at(m.output_matrix(l1), i, h1 * d + a);
      for (int64_t j = 0; j < D; ++j) {
        qk[i * D + j] += q * at(m.key_matrix(l2), h2 / group * d + a, j);
        ov[i * D + j] += o * at(m.value_matrix(l1), h1 / group * d + a, j);
      }
    }
  for (int64_t i = 0; i < D; ++i)
    for (int64_t k = 0; k < D; ++k)
      for (int64_t j = 0; j < D; ++j) product[i * D + j] += qk[i * D + k] * ov[k * D + j];
  return frobenius(product) / (frobenius(qk) * frobenius(ov));
}

TEST(Circuits, SmolLM2InductionHeadsAndTheirComposers) {
  const CausalLM& model = smollm2();
  const auto rm = model.residual();
  const explain::Run run =
      capture(model, "The capital of France is Paris");  // induction: from a repeat
  const HeadRoles roles = head_roles(run);
  ASSERT_FALSE(roles.induction.empty());
  int64_t pairs = 0;
  for (const auto& [score, layer, head] : roles.induction) pairs += layer * rm->heads();
  auto t0 = std::chrono::steady_clock::now();
  const std::vector<Composers> k = top_composers(*rm, roles.induction, 5);
  const double k_seconds = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  const std::vector<Composers> raw = top_composers(*rm, roles.induction, 5, {.fold_norm = false});
  const double raw_seconds = seconds_since(t0);
  std::printf(
      "%zu induction heads × every head of earlier layers: %lld pairs, %.2f s (gains "
      "folded), %.2f s (raw)\n",
      k.size(), static_cast<long long>(pairs), k_seconds, raw_seconds);
  std::printf("%s\nraw matrices:\n%s\n", composers_text(k).c_str(), composers_text(raw).c_str());
  std::string previous = "previous-token heads:";
  for (const auto& [score, layer, head] : roles.previous)
    previous +=
        " " + std::to_string(layer) + "." + std::to_string(head) + " (" + fixed(score, 2) + ")";
  std::printf("%s\n", previous.c_str());

  // The strongest induction head's strongest raw composer, against the definition.
  const Composers& c = raw.front();
  ASSERT_FALSE(c.top.empty());
  const auto [score, l1, h1] = c.top.front();
  t0 = std::chrono::steady_clock::now();
  const double want = smollm2_reference(*rm, c.layer, c.head, l1, h1);
  std::printf(
      "reference (hidden × hidden, float64) of %lld.%lld on %lld.%lld: %.12f vs %.12f, "
      "%.2f s\n",
      static_cast<long long>(c.layer), static_cast<long long>(c.head), static_cast<long long>(l1),
      static_cast<long long>(h1), want, score, seconds_since(t0));
  EXPECT_NEAR(score, want, 1e-10);
  // Elhage et al.'s mechanism: an induction head's keys read a previous-token head. Of the
  // strongest induction head's two strongest composers (gains folded), one is a previous-token
  // head of this very run's head_roles (measured: 18.6 reads 17.8 at 0.175 and 16.0 at 0.161;
  // 16.0 puts 0.83 of its weight on the previous token).
  bool previous_token = false;
  for (std::size_t r = 0; r < 2; ++r)
    for (const auto& [p, pl, ph] : roles.previous)
      previous_token |= std::get<1>(k.front().top[r]) == pl && std::get<2>(k.front().top[r]) == ph;
  EXPECT_TRUE(previous_token);

  const auto [top_score, layer, head] = roles.induction.front();
  std::vector<int32_t> ids;
  for (const char* word : {" Paris", " France", " Rome", " Italy", " the", " Harry", " Potter"})
    ids.push_back(model.tokenize(word).at(0));
  for (const int64_t offset : {int64_t{1}, int64_t{8}})
    std::printf("%s\n\n", qk_text(qk_table(*rm, layer, head, ids, {.offset = offset})).c_str());
  std::printf("%s\n", ov_text(ov_table(*rm, layer, head, ids, {.outputs = ids, .top = 5})).c_str());
}

}  // namespace
}  // namespace qkv::explain
